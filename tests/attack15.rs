//! attack15 (docs/ATTACK-15.md): the counter's read-back in the core
//! ledger (tidy14, `FileLedger::advance_counter`, docs/MATH.md §8.3) and
//! `Error::CounterNotAdvanced`, attacked by a tester who did not write
//! them. Every counter here is a scripted `MonotonicCounter` around a
//! shared `MemoryCounter`; "rolled back" means the ledger file's bytes
//! from before a charge written back over it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use geopriv::device::budget::{
    BudgetPolicy, BudgetUnit, Charge, FileLedger, Ledger, MemoryCounter, MonotonicCounter,
};

mod common;
use common::TempDir;

fn policy(total_epsilon: f64) -> BudgetPolicy {
    BudgetPolicy::new(BudgetUnit::PerMetre, total_epsilon, 0.0).unwrap()
}

fn metres(epsilon: f64) -> Charge {
    Charge::new(BudgetUnit::PerMetre, epsilon, 0.0).unwrap()
}

/// A new ledger file (total ε 1 per metre) bound to a scripted counter,
/// and the file's bytes before any charge (what a rollback writes back).
fn bound_to_scripted(name: &str) -> (TempDir, std::path::PathBuf, Scripted, FileLedger, Vec<u8>) {
    let dir = TempDir::new(name);
    let path = dir.file("ledger.json");
    let counter = Scripted::new();
    let app = FileLedger::create(&path, &policy(1.0))
        .unwrap()
        .with_counter(Box::new(counter.clone()))
        .unwrap();
    let before = std::fs::read(&path).unwrap();
    (dir, path, counter, app, before)
}

/// Writes `before` back over the ledger at `path` and reopens it with
/// `counter`: the releases the accepted file records, or `u64::MAX` when
/// the rollback is refused (caught).
fn charges_after_rollback(path: &std::path::Path, before: &[u8], counter: &Scripted) -> u64 {
    std::fs::write(path, before).unwrap();
    match FileLedger::open(path, &policy(1.0))
        .and_then(|l| l.with_counter(Box::new(counter.clone())))
    {
        Ok(l) => l.state().releases(),
        Err(_) => u64::MAX,
    }
}

/// What a scripted counter does on its next calls.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Honest.
    None,
    /// `advance_to` fails ("TPM busy") and does not move.
    AdvanceFails,
    /// `advance_to` moves, then the read-back fails with `LedgerIo`.
    ReadFails,
    /// `advance_to` moves, then the read-back says the counter went back
    /// (what the bindings' `AppCounter` answers when a foreign exception,
    /// e.g. Python's `KeyboardInterrupt`, makes `read` "return 0").
    ReadWentBack,
    /// `advance_to(v)` moves to v + 3 (the read-back sees it ahead).
    Overshoots,
}

/// A counter whose next calls misbehave as `fault` says (shared, so a
/// test changes it while the ledger holds the counter). `advance_to`
/// arms the read-back fault; the read that follows it fires it once.
#[derive(Clone)]
struct Scripted {
    inner: MemoryCounter,
    fault: Arc<AtomicU64>,
    armed: Arc<AtomicU64>,
}

impl Scripted {
    fn new() -> Self {
        Scripted {
            inner: MemoryCounter::default(),
            fault: Arc::new(AtomicU64::new(0)),
            armed: Arc::new(AtomicU64::new(0)),
        }
    }
    fn set(&self, f: Fault) {
        // Disarm what an earlier advance (e.g. the binding's probe) armed.
        self.armed.store(0, Ordering::SeqCst);
        self.fault.store(f as u64, Ordering::SeqCst);
    }
    fn fault(&self) -> u64 {
        self.fault.load(Ordering::SeqCst)
    }
}

impl MonotonicCounter for Scripted {
    fn read(&self) -> geopriv::Result<u64> {
        if self.armed.swap(0, Ordering::SeqCst) == 1 {
            let f = self.fault();
            if f == Fault::ReadFails as u64 {
                return Err(geopriv::Error::LedgerIo {
                    detail: "TPM read timed out".into(),
                });
            }
            if f == Fault::ReadWentBack as u64 {
                return Err(geopriv::Error::InvalidLedgerState {
                    reason:
                        "the platform monotonic counter went back from 1 to 0: it is not monotonic"
                            .into(),
                });
            }
        }
        self.inner.read()
    }
    fn advance_to(&mut self, value: u64) -> geopriv::Result<()> {
        let f = self.fault();
        if f == Fault::AdvanceFails as u64 {
            return Err(geopriv::Error::LedgerIo {
                detail: "TPM busy".into(),
            });
        }
        self.armed.store(1, Ordering::SeqCst);
        if f == Fault::Overshoots as u64 {
            return self.inner.advance_to(value + 3);
        }
        self.inner.advance_to(value)
    }
}

/// Item 2: whatever the counter does after the outbox's write (advance
/// fails, read-back fails, read-back says the counter went back, read-back
/// ahead of the file), the report is charged and queued: the error must
/// say so (`CounterNotAdvanced` with its id). Before the fix, the two
/// read-back faults that are not `LedgerIo` came out as
/// `InvalidLedgerState` ("the file was rolled back or deleted" / "not
/// monotonic"; bindings `LedgerRefused`, CLI exit 3 beside a refused
/// release) while the report waited in the outbox: an app retrying it
/// released and charged a second report.
#[test]
fn every_counter_fault_after_the_outbox_write_says_the_report_is_queued() {
    for (k, fault) in [
        Fault::AdvanceFails,
        Fault::ReadFails,
        Fault::ReadWentBack,
        Fault::Overshoots,
    ]
    .into_iter()
    .enumerate()
    {
        let dir = TempDir::new(&format!("a15-outbox-fault-{k}"));
        let path = dir.file("ledger.json");
        let counter = Scripted::new();
        let mut app = FileLedger::create(&path, &policy(1.0))
            .unwrap()
            .with_counter(Box::new(counter.clone()))
            .unwrap();
        counter.set(fault);
        let e = app
            .spend_to_outbox(&metres(0.1), || Ok("r".into()))
            .unwrap_err();
        let queued = app.pending_uploads();
        assert_eq!(queued.len(), 1, "fault {k}");
        assert_eq!(app.state().releases(), 1, "fault {k}");
        assert!(
            matches!(e, geopriv::Error::CounterNotAdvanced { id, .. } if id == queued[0].0),
            "fault {k}: the report is queued, the error says {e:?}"
        );
        assert!(
            e.to_string()
                .starts_with("charged and queued in the outbox as report"),
            "fault {k}: {e}"
        );
        // Reopened from disk: the same report is queued, charged once.
        let fresh = FileLedger::open(&path, &policy(1.0)).unwrap();
        assert_eq!(fresh.pending_uploads(), queued, "fault {k}");
        assert_eq!(fresh.state().releases(), 1, "fault {k}");
    }
}

/// Item 1, memoized releases: `commit_once` whose counter fails after the
/// write says `LedgerIo` (nothing released: true). But the key is now on
/// file, so the app's retry of the same memoized release got `Ok(false)`
/// ("already charged": nothing written) **without the counter being
/// advanced**, and the memoized value was released with the counter
/// behind the file. Writing back the file from before that charge was
/// then accepted by a new process holding the same counter: a released
/// value whose charge is on no file (the budget's ε for it freed). After
/// the fix, a call under the lock that writes nothing still advances a
/// counter that reads below the file's count before it answers.
#[test]
fn a_memoized_retry_after_a_failed_advance_moves_the_counter_before_releasing() {
    let (_dir, path, counter, mut app, before) = bound_to_scripted("a15-memo-retry");
    let key = [7u8; 32];
    counter.set(Fault::AdvanceFails);
    let e = app.commit_once(key, &metres(0.4)).unwrap_err();
    assert!(matches!(e, geopriv::Error::LedgerIo { .. }), "{e:?}");
    // The TPM answers again; the app retries the memoized release.
    counter.set(Fault::None);
    let charged = app.commit_once(key, &metres(0.4)).unwrap();
    assert!(!charged, "the key was on file: no second charge");
    // The value is released now (MemoizedRelease returns it on Ok).
    let released = 1;
    let (on_counter, on_file) = (counter.read().unwrap(), app.state().releases());
    drop(app);
    // Roll the file back to before the key's charge.
    let charges_surviving = charges_after_rollback(&path, &before, &counter);
    assert!(
        charges_surviving >= released,
        "rollback accepted with {charges_surviving} charge(s) for {released} release(s)"
    );
    assert_eq!(
        on_counter, on_file,
        "a memoized value released with the counter behind the file"
    );
}

/// Item 1, arrays: `commit_n` through a counter that does not move (its
/// `advance_to` returns `Ok`): refused by the read-back, the n charges are
/// on file, nothing released; a rollback is then accepted but only loses
/// unreleased charges. A counter that overshoots: the ledger refuses
/// everything after (fail closed).
#[test]
fn commit_n_through_a_lying_counter_releases_nothing() {
    struct Stuck(MemoryCounter);
    impl MonotonicCounter for Stuck {
        fn read(&self) -> geopriv::Result<u64> {
            self.0.read()
        }
        fn advance_to(&mut self, _: u64) -> geopriv::Result<()> {
            Ok(())
        }
    }
    let dir = TempDir::new("a15-commit-n");
    let path = dir.file("ledger.json");
    let p = policy(1.0);
    let mut app = FileLedger::create(&path, &p)
        .unwrap()
        .with_counter(Box::new(Stuck(MemoryCounter::default())))
        .unwrap();
    let mut released = 0u64;
    let r = app.spend(&metres(0.01), || Ok(()));
    assert!(matches!(r, Err(geopriv::Error::LedgerIo { .. })), "{r:?}");
    let r = app.commit_n(&metres(0.01), 50);
    assert!(matches!(r, Err(geopriv::Error::LedgerIo { .. })), "{r:?}");
    if r.is_ok() {
        released += 50;
    }
    assert_eq!(released, 0);
    assert_eq!(app.state().releases(), 51);

    let counter = Scripted::new();
    let path2 = dir.file("ledger2.json");
    let mut app = FileLedger::create(&path2, &p)
        .unwrap()
        .with_counter(Box::new(counter.clone()))
        .unwrap();
    counter.set(Fault::Overshoots);
    assert!(app.commit_n(&metres(0.01), 5).is_err());
    counter.set(Fault::None);
    for _ in 0..3 {
        assert!(app.commit_n(&metres(0.01), 1).is_err());
        assert!(app
            .spend_to_outbox(&metres(0.01), || Ok("r".into()))
            .is_err());
    }
    assert_eq!(app.pending_uploads().len(), 0);
    assert!(FileLedger::open(&path2, &p)
        .and_then(|l| l.with_counter(Box::new(counter.clone())))
        .is_err());
}

/// Finding O1 (docs/ATTACK-15.md), fixed by the lead: an outbox report
/// queued while the counter failed was uploadable at once
/// (`pending_uploads`), with the counter behind the file; writing back the
/// file from before its charge was then accepted by a new process holding
/// the counter: one uploaded report, no charge on file. Now what may leave
/// is `uploadable_reports`, which first moves the counter to the file (and
/// hands out nothing while it cannot), and a ledger without the counter is
/// refused on a bound file.
#[test]
fn an_outbox_report_queued_with_the_counter_behind_cannot_be_uploaded_then_rolled_back() {
    let (_dir, path, counter, mut app, before) = bound_to_scripted("a15-outbox-rollback");
    counter.set(Fault::AdvanceFails);
    let e = app
        .spend_to_outbox(&metres(0.4), || Ok("r".into()))
        .unwrap_err();
    assert!(matches!(e, geopriv::Error::CounterNotAdvanced { .. }));
    // While the counter cannot move, nothing may leave.
    assert!(app.uploadable_reports().is_err());
    // An uploader without the counter is refused on the bound file.
    let counterless = FileLedger::open(&path, &policy(1.0))
        .unwrap()
        .uploadable_reports();
    assert!(
        matches!(counterless, Err(geopriv::Error::InvalidLedgerState { .. })),
        "{counterless:?}"
    );
    // The counter works again: it is moved to the file first, then the
    // report is handed out.
    counter.set(Fault::None);
    let uploaded = app.uploadable_reports().unwrap().len() as u64;
    assert_eq!(uploaded, 1);
    drop(app);
    let charges_surviving = charges_after_rollback(&path, &before, &counter);
    assert!(
        charges_surviving >= uploaded,
        "rollback accepted with {charges_surviving} charge(s) for {uploaded} uploaded report(s)"
    );
}

/// Item 3 (emzero): EM's channel on both sides of the shifted form's
/// switch (ε r₀ = 600, r₀ the nearest quadrature point's distance,
/// |v| = 1/96 cell per axis) and of e^{-745} (the smallest exponent
/// whose exponential is not 0), ± 1 and 4 ulps, and at tiny ε (ε² in
/// the subnormals and 0): every value, standard error, bias and the
/// prediction finite (or the call refused with a typed error), the map's
/// mass where the devices are. Grids 2, 3 and 21, 1 and 200 devices.
#[test]
fn em_is_finite_on_both_sides_of_its_thresholds() {
    use geopriv::map::{BinSpec, BinnedCounts, EmDeconvolution, EmOptions, KdeGrid};
    let mut tried = 0;
    let mut refused = 0;
    for (g, side, n) in [
        (2usize, 20_000.0, 1usize),
        (3, 20_000.0, 200),
        (21, 10_000.0, 200),
    ] {
        let grid = KdeGrid::square(side, g).unwrap();
        let xs: Vec<[f64; 2]> = (0..n)
            .map(|i| {
                let t = i as f64 / n as f64;
                [side * (0.3 + 0.4 * t), side * (0.6 - 0.2 * t)]
            })
            .collect();
        let build = |eps: f64| {
            // Below εh = 1e-75 the estimation binning is refused (F4):
            // bin as an API user may (`BinSpec::new`) to reach EM's channel.
            let spec = if eps * grid.bandwidth() < 1e-75 {
                BinSpec::new(&grid, 2, 8)?
            } else {
                BinSpec::for_estimation(&grid, eps, 512)?
            };
            let mut c = BinnedCounts::new(spec);
            for x in &xs {
                c.add(x)?;
            }
            EmDeconvolution::new(&grid, eps, &c, EmOptions::default())
        };
        let mut eps_list = vec![1e-170, 1e-160, 1e-155, 1e-150, 5e-324, 1e-310];
        for target in [600.0, 745.0, 700.0] {
            // r₀ from the lattice at a first guess, then again at the
            // threshold (the lattice may depend on ε).
            let mut eps = target / side;
            for _ in 0..4 {
                let c = build(eps).unwrap().cell_size();
                let r0 = (c[0] / 96.0).hypot(c[1] / 96.0);
                eps = target / r0;
            }
            let mut e = eps;
            for _ in 0..4 {
                e = f64::from_bits(e.to_bits() - 1);
            }
            for k in 0..9 {
                eps_list.push(e);
                if k < 8 {
                    e = f64::from_bits(e.to_bits() + 1);
                }
            }
        }
        for eps in eps_list {
            tried += 1;
            let m = match build(eps).and_then(|em| em.estimate()) {
                Ok(m) => m,
                Err(e) => {
                    refused += 1;
                    println!("grid {g} n {n} ε {eps:e}: refused: {e}");
                    continue;
                }
            };
            let finite = |v: &[f64]| v.iter().all(|x| x.is_finite());
            let mass: f64 = m.values.iter().sum();
            println!(
                "grid {g} n {n} ε {eps:e}: t {} mass {mass:e} predicted {:e} se[0] {:e}",
                m.iterations, m.predicted_ase, m.standard_errors[0]
            );
            assert!(
                finite(&m.values)
                    && finite(&m.standard_errors)
                    && finite(&m.bias)
                    && m.predicted_ase.is_finite()
                    && m.values.iter().all(|v| *v >= 0.0),
                "grid {g} n {n} ε {eps:e}: values {:?} se {:?} predicted {}",
                &m.values[..m.values.len().min(6)],
                &m.standard_errors[..m.standard_errors.len().min(6)],
                m.predicted_ase
            );
            assert!(mass > 0.0, "grid {g} n {n} ε {eps:e}: all-zero map");
        }
    }
    println!("{tried} ε tried, {refused} refused");
}

/// F4: kernel maps were NaN everywhere (JSON null, `map aggregate` exit
/// 0; `map plan` "ASE NaN" for every λ and a NaN pick): λ = 1 from ε·h ≈
/// 1e-102, every λ from ε·h ≈ 3e-154. The kernel (and with it the
/// aggregator, the binning and the planner) now refuses ε·h < 1e-75 with a
/// typed error; just above it every kernel map (λ 0, 0.5, 1) is finite.
#[test]
fn kernel_maps_at_tiny_epsilon_are_finite_or_refused() {
    use geopriv::map::{KdeGrid, MapAggregator, MapMechanism, MapRelease, QuerySet};
    let mut checked = 0;
    for g in [2usize, 3, 61] {
        let grid = KdeGrid::square(20_000.0, g).unwrap();
        let h = grid.bandwidth();
        for eps in [
            1e-300,
            1e-158,
            1e-100,
            0.99e-75 / h,
            1.01e-75 / h,
            1e-60,
            1e-20,
        ] {
            let set = QuerySet::Kde(grid.clone());
            let agg = MapAggregator::new(set.clone(), MapMechanism::APriori, eps);
            if eps * h < 1e-75 {
                let Err(e) = agg else {
                    panic!("grid {g} ε {eps:e}: not refused below εh = 1e-75");
                };
                assert!(
                    matches!(
                        e,
                        geopriv::Error::InvalidParameter {
                            name: "epsilon",
                            ..
                        }
                    ),
                    "{e:?}"
                );
                continue;
            }
            let mut agg = agg.unwrap();
            // Reports inside the box (a server takes the location it is sent).
            let dev = MapRelease::new(set, MapMechanism::APriori, eps).unwrap();
            let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(1);
            let mut r = dev.release_unmetered(&[7000.0, 9000.0], &mut rng).unwrap();
            for i in 0..20 {
                let mut q = r.clone();
                q.location = Some(vec![5000.0 + 50.0 * i as f64, 7000.0 + 30.0 * i as f64]);
                agg.add(&q).unwrap();
            }
            r.location = Some(vec![1.0, 1.0]);
            agg.add(&r).unwrap();
            let m = agg.mapper().unwrap().unwrap();
            for lambda in [0.0, 0.5, 1.0] {
                let est = m.estimate(&agg.kernel(lambda).unwrap()).unwrap();
                assert!(
                    est.values.iter().all(|v| v.is_finite()),
                    "grid {g} ε {eps:e} λ {lambda}: {:?}",
                    &est.values[..est.values.len().min(4)]
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 18, "{checked}");
}
