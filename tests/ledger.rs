//! The device ledger (docs/MATH.md §8.3): units, the pinned policy, the
//! metered release paths and the write-ahead file ledger, including a
//! simulated crash between the charge and the upload.

use geopriv::device::budget::{
    BudgetPolicy, BudgetUnit, Charge, FileLedger, Ledger, PrivacyBudget,
};
use geopriv::{Error, GaussianKde, Mechanism, Report, SoftThreshold, ValidationPolicy};
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::path::PathBuf;

fn policy(total_epsilon: f64, total_delta: f64) -> BudgetPolicy {
    BudgetPolicy::new(BudgetUnit::PerMetre, total_epsilon, total_delta).unwrap()
}

fn metres(epsilon: f64, delta: f64) -> Charge {
    Charge::new(BudgetUnit::PerMetre, epsilon, delta).unwrap()
}

/// A fresh directory for one test (removed at the end of the test).
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("geopriv-ledger-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
    fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn budget_refuses_overspending_and_leaves_state_unchanged() {
    let mut b = PrivacyBudget::new(policy(1.0 / 100.0, 1e-6));
    b.try_charge(&metres(0.004, 0.0)).unwrap();
    b.try_charge(&metres(0.004, 5e-7)).unwrap();
    let before = b.clone();
    match b.try_charge(&metres(0.004, 0.0)).unwrap_err() {
        Error::BudgetExceeded {
            requested_epsilon,
            remaining_epsilon,
            requested_delta,
            remaining_delta,
        } => {
            assert_eq!(requested_epsilon, 0.004);
            assert!(remaining_epsilon > 0.0019 && remaining_epsilon <= 0.002);
            assert_eq!(requested_delta, 0.0);
            assert!(remaining_delta <= 5e-7);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(b, before);
    // δ alone can be exhausted too.
    assert!(matches!(
        b.try_charge(&metres(1e-4, 6e-7)),
        Err(Error::BudgetExceeded { .. })
    ));
    assert_eq!(b, before);
    assert_eq!(b.releases(), 2);
    // What remains can still be spent, exactly.
    let (re, _) = b.remaining();
    b.try_charge(&metres(re, 0.0)).unwrap();
    assert!(b.spent_epsilon() <= b.total_epsilon());
    assert!(!b.can_afford(&metres(f64::MIN_POSITIVE, 0.0)));
}

#[test]
fn spend_charges_only_successful_releases() {
    let mut b = PrivacyBudget::new(policy(1.0, 0.0));
    let r: Result<f64, Error> = b.spend(&metres(0.5, 0.0), || {
        Err(Error::Numerical { routine: "test" })
    });
    assert!(r.is_err());
    assert_eq!(b.spent_epsilon(), 0.0);
    assert_eq!(b.spend(&metres(0.75, 0.0), || Ok(3.0)).unwrap(), 3.0);
    assert_eq!(b.spent_epsilon(), 0.75);
    // An unaffordable one, or one in another unit, never runs.
    let mut ran = false;
    for charge in [
        metres(0.5, 0.0),
        Charge::new(BudgetUnit::LocalDp, 0.1, 0.0).unwrap(),
    ] {
        let r = b.spend(&charge, || {
            ran = true;
            Ok(1.0)
        });
        assert!(r.is_err());
    }
    assert!(!ran);
    assert_eq!(b.spent_epsilon(), 0.75);
}

#[test]
fn metered_releases_charge_and_refuse() {
    let q = GaussianKde::new(&[0.0, 0.0], 100.0).unwrap();
    let m = Mechanism::polyplace(1e-3)
        .unwrap()
        .with_unit(BudgetUnit::PerMetre)
        .unwrap();
    let mut budget = PrivacyBudget::new(policy(2.5e-3, 0.0));
    let mut rng = StdRng::seed_from_u64(6);
    for _ in 0..2 {
        Report::release(&mut budget, &m, &q, &[10.0, 20.0], &mut rng).unwrap();
    }
    let before = budget.clone();
    let refused = Report::release(&mut budget, &m, &q, &[10.0, 20.0], &mut rng);
    assert!(matches!(refused, Err(Error::BudgetExceeded { .. })));
    assert_eq!(budget, before);
    // A failing release (bad point) is not charged either.
    let mut fresh = PrivacyBudget::new(policy(1e-2, 0.0));
    let snapshot = fresh.clone();
    assert!(Report::release(&mut fresh, &m, &q, &[f64::NAN, 0.0], &mut rng).is_err());
    assert_eq!(fresh, snapshot);
    // A per-dollar query released into the per-metre ledger is refused.
    let income = SoftThreshold::new(100_000.0, 20_000.0).unwrap();
    let dollars = Mechanism::polyplace(1e-5)
        .unwrap()
        .with_unit(BudgetUnit::PerDollar)
        .unwrap();
    let e = Report::release(&mut fresh, &dollars, &income, &[9e4], &mut rng).unwrap_err();
    assert!(matches!(e, Error::UnitMismatch { .. }), "{e}");
    assert_eq!(fresh, snapshot);
}

#[test]
fn seeded_reports_are_marked_and_refused_by_default() {
    let q = SoftThreshold::new(0.0, 1.0).unwrap();
    let m = Mechanism::polyplace(0.1)
        .unwrap()
        .with_unit(BudgetUnit::PerMetre)
        .unwrap();
    let mut b = PrivacyBudget::new(policy(1.0, 0.0));
    let seeded = Report::release(&mut b, &m, &q, &[0.0], &mut StdRng::seed_from_u64(1)).unwrap();
    let secure = Report::release(&mut b, &m, &q, &[0.0], &mut geopriv::SecureRng::new()).unwrap();
    assert!(seeded.seeded && !secure.seeded);
    let server = ValidationPolicy::new(1.0, 0.0).unwrap();
    assert!(server.accept_json(&seeded.to_json_line()).is_err());
    assert!(server.accept_bytes(&seeded.to_bytes()).is_err());
    assert!(server.accept_json(&secure.to_json_line()).is_ok());
    let test_server = server.accept_seeded();
    assert!(test_server.accept_json(&seeded.to_json_line()).is_ok());
}

#[test]
fn file_ledger_survives_restarts_and_refuses_edits() {
    let dir = TempDir::new("restart");
    let path = dir.file("ledger.json");
    let p = policy(0.01, 1e-6);
    assert!(matches!(
        FileLedger::open(&path, &p),
        Err(Error::LedgerIo { .. })
    ));
    let mut ledger = FileLedger::create(&path, &p).unwrap();
    ledger.commit(&metres(0.003, 1e-7)).unwrap();
    drop(ledger);
    // Restart: the state is back; creating anew is refused.
    let ledger = FileLedger::open_or_create(&path, &p).unwrap();
    assert_eq!(ledger.state().releases(), 1);
    assert_eq!(ledger.state().spent_epsilon(), 0.003);
    assert!(matches!(
        FileLedger::create(&path, &p),
        Err(Error::LedgerIo { .. })
    ));
    // Another pinned policy is refused, with the field named.
    for (other, field) in [
        (policy(0.02, 1e-6), "total_epsilon"),
        (
            BudgetPolicy::new(BudgetUnit::LocalDp, 0.01, 1e-6).unwrap(),
            "unit",
        ),
    ] {
        match FileLedger::open(&path, &other) {
            Err(Error::LedgerPolicyMismatch { field: f, .. }) => assert_eq!(f, field),
            r => panic!("{r:?}"),
        }
    }
    // Edits on disk: raised totals, spent reset.
    let json = std::fs::read_to_string(&path).unwrap();
    for (edited, expect_policy) in [
        (
            json.replace("\"total_epsilon\":0.01", "\"total_epsilon\":1e300"),
            true,
        ),
        (
            json.replace("\"spent_epsilon\":0.003", "\"spent_epsilon\":0.0"),
            false,
        ),
    ] {
        std::fs::write(&path, &edited).unwrap();
        let e = FileLedger::open(&path, &p).unwrap_err();
        assert_eq!(
            matches!(e, Error::LedgerPolicyMismatch { .. }),
            expect_policy,
            "{e}"
        );
    }
    // An edit while the app runs is caught before the next charge.
    std::fs::write(&path, &json).unwrap();
    let mut ledger = FileLedger::open(&path, &p).unwrap();
    let restored_backup = PrivacyBudget::new(p.clone()).to_json();
    std::fs::write(&path, restored_backup).unwrap();
    assert!(matches!(
        ledger.commit(&metres(0.001, 0.0)),
        Err(Error::InvalidLedgerState { .. })
    ));
}

#[test]
fn a_crash_between_charge_and_upload_loses_the_release_not_the_charge() {
    let dir = TempDir::new("crash");
    let path = dir.file("ledger.json");
    let p = policy(0.02, 0.0);
    let q = SoftThreshold::new(100.0, 20.0).unwrap();
    let m = Mechanism::polyplace(0.004)
        .unwrap()
        .with_unit(BudgetUnit::PerMetre)
        .unwrap();
    let mut ledger = FileLedger::open_or_create(&path, &p).unwrap();
    let report = Report::release(&mut ledger, &m, &q, &[95.0], &mut geopriv::SecureRng::new());
    // The process dies here, before the upload: the report is lost...
    drop(report);
    drop(ledger);
    // ...but the charge was on disk before release() returned.
    let ledger = FileLedger::open(&path, &p).unwrap();
    assert_eq!(ledger.state().releases(), 1);
    assert_eq!(ledger.state().spent_epsilon(), 0.004);

    // A crash in the middle of a write leaves a stale temporary file and the
    // previous state (and that release was never returned): the ledger
    // opens and the next charge replaces the temporary file.
    std::fs::write(dir.file(".ledger.json.tmp"), "{\"partial").unwrap();
    let mut ledger = FileLedger::open(&path, &p).unwrap();
    Report::release(&mut ledger, &m, &q, &[95.0], &mut geopriv::SecureRng::new()).unwrap();
    assert_eq!(FileLedger::open(&path, &p).unwrap().state().releases(), 2);
    assert!(!dir.file(".ledger.json.tmp").exists());

    // The reverse never happens: if the charge cannot be written, no value
    // is returned. (The directory is replaced by a file, so every write
    // fails; the budget still has room for one more release.)
    std::fs::remove_dir_all(&dir.0).unwrap();
    std::fs::write(&dir.0, b"not a directory").unwrap();
    let r = Report::release(&mut ledger, &m, &q, &[95.0], &mut geopriv::SecureRng::new());
    assert!(matches!(r, Err(Error::LedgerIo { .. })), "{r:?}");
    assert_eq!(ledger.state().releases(), 2);
    std::fs::remove_file(&dir.0).unwrap();
}
