//! attack13 (docs/ATTACK-13.md): this session's changes attacked by a
//! tester who did not write them: `commit_n` in closed form (tidy13)
//! against an oracle of n public single commits, and its records through
//! the file ledger.

use std::sync::Arc;

use geopriv::device::budget::{
    BudgetPolicy, BudgetUnit, Charge, FileLedger, Ledger, ManualClock, MemoryCounter,
    MonotonicCounter, PrivacyBudget,
};

mod common;
use common::TempDir;

/// A small deterministic generator (xorshift64*), so a failure replays.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

fn ulps(x: f64, d: i64) -> f64 {
    f64::from_bits((x.to_bits() as i64 + d).max(0) as u64)
}

/// The oracle: n public single commits on a copy, stopping at the first
/// refusal (which leaves the ledger as it was before the call).
fn by_single_commits(b: &PrivacyBudget, c: &Charge, n: u64) -> Result<PrivacyBudget, String> {
    let mut dry = b.clone();
    for _ in 0..n {
        dry.commit(c).map_err(|e| format!("{e:?}"))?;
    }
    Ok(dry)
}

fn kind(e: &str) -> &str {
    e.split([' ', '{', '(']).next().unwrap_or(e)
}

/// `commit_n` against n single commits on random states near every edge:
/// the remaining budget's n-th share and a few ulps either side, period
/// limits, δ limits, a new period before the call, the history-size limit
/// not reached. Same acceptance, same refusal kind, same saved state.
#[test]
fn commit_n_is_n_single_commits_on_random_edges() {
    let mut g = Gen(0x9e37_79b9_7f4a_7c15);
    let (mut compared, mut accepted) = (0u32, 0u32);
    for case in 0..6_000 {
        let total = g.pick(&[1.0, 3.0, 0.7, 1e-9, 5e10, 1e300, f64::MIN_POSITIVE]);
        let delta_total = g.pick(&[0.0, 1e-5, 0.5]);
        let periodic = g.below(2) == 0;
        let period_share = g.pick(&[0.5, 0.25, 1.0, 0.1]);
        let policy = if periodic {
            BudgetPolicy::periodic(
                BudgetUnit::PerMetre,
                total * period_share,
                delta_total * period_share,
                60,
                total,
                delta_total,
            )
        } else {
            BudgetPolicy::new(BudgetUnit::PerMetre, total, delta_total)
        };
        let Ok(policy) = policy else { continue };
        let clock = ManualClock::new(1_000 + g.below(120));
        let mut b = PrivacyBudget::with_secret(policy, [7; 32]).with_clock(Arc::new(clock.clone()));
        let cap = if periodic {
            total * period_share
        } else {
            total
        };
        let dcap = if periodic {
            delta_total * period_share
        } else {
            delta_total
        };
        // A history: a few charges of shares, some in earlier periods.
        for _ in 0..g.below(6) {
            let k = 1 + g.below(9) as i64;
            let e = ulps(cap / k as f64, g.below(5) as i64 - 2);
            let d = if dcap > 0.0 && g.below(2) == 0 {
                dcap / (k as f64)
            } else {
                0.0
            };
            if let Ok(c) = Charge::new(BudgetUnit::PerMetre, e, d) {
                let _ = b.commit_n(&c, 1 + g.below(3));
            }
            if g.below(3) == 0 {
                clock.advance(g.pick(&[1, 59, 60, 61, 600]));
            }
        }
        if g.below(3) == 0 {
            clock.advance(g.pick(&[1, 60, 61]));
        }
        // A charge near the n-th share of what is left (or of the cap).
        let n = g.pick(&[0u64, 1, 2, 3, 7, 10, 64, 100, 333, 1000, 4096]) + g.below(3);
        let left = b.remaining();
        let base = if g.below(2) == 0 {
            left.epsilon.min(cap)
        } else {
            cap
        };
        let slack = 1.0 + 2f64.powi(-50);
        let e = match g.below(4) {
            0 => ulps(base / n.max(1) as f64, g.below(9) as i64 - 4),
            1 => ulps(base * slack / n.max(1) as f64, g.below(9) as i64 - 4),
            2 => ulps(base / (n.max(1) + g.below(3) - 1).max(1) as f64, 0),
            _ => base * 2f64.powi(-(g.below(60) as i32)),
        };
        let d = match g.below(3) {
            0 => 0.0,
            1 => ulps(left.delta / n.max(1) as f64, g.below(5) as i64 - 2),
            _ => dcap,
        };
        let Ok(c) = Charge::new(BudgetUnit::PerMetre, e, d) else {
            continue;
        };
        let want = by_single_commits(&b, &c, n);
        let mut got = b.clone();
        let outcome = got.commit_n(&c, n);
        compared += 1;
        match (outcome, want) {
            (Ok(()), Ok(w)) => {
                accepted += 1;
                assert_eq!(got.to_json(), w.to_json(), "case {case}: states differ");
                assert_eq!(got.remaining(), w.remaining(), "case {case}");
            }
            (Err(e), Err(w)) => {
                let e = format!("{e:?}");
                assert_eq!(kind(&e), kind(&w), "case {case}: {e} vs {w}");
                assert_eq!(got.to_json(), b.to_json(), "case {case}: a refusal charged");
            }
            (g2, w) => panic!(
                "case {case}: commit_n {g2:?}, single commits {:?} (n {n}, ε {e:e}, δ {d:e}, {:?})",
                w.map(|s| s.releases()),
                b.to_json()
            ),
        }
    }
    eprintln!("compared {compared} accepted {accepted}");
    assert!(
        compared > 4_000 && accepted > 1_000,
        "{compared} {accepted}"
    );
}

/// A history entry whose count only commit_n can reach (2^60 + 1, u64::MAX
/// releases) is written and read back exactly by the file ledger and a
/// counter bound to it follows.
#[test]
fn a_huge_count_round_trips_through_the_file_and_the_counter() {
    let dir = TempDir::new("a13-huge");
    let path = dir.file("ledger.json");
    let p = BudgetPolicy::new(BudgetUnit::PerMetre, 1.0, 0.0).unwrap();
    let counter = MemoryCounter::default();
    let tiny = Charge::new(BudgetUnit::PerMetre, 2f64.powi(-70), 0.0).unwrap();
    let mut app =
        FileLedger::open_or_create_with_counter(&path, &p, Box::new(counter.clone())).unwrap();
    app.commit_n(&tiny, (1u64 << 60) + 1).unwrap();
    app.commit_n(&tiny, u64::MAX - (1u64 << 60) - 2).unwrap();
    assert_eq!(counter.read().unwrap(), u64::MAX - 1);
    let before = app.state().to_json();
    drop(app);
    let mut again = FileLedger::open(&path, &p)
        .unwrap()
        .with_counter(Box::new(counter.clone()))
        .unwrap();
    assert_eq!(again.state().to_json(), before);
    assert!(again.commit_n(&tiny, 2).is_err());
    again.commit_n(&tiny, 1).unwrap();
    assert_eq!(counter.read().unwrap(), u64::MAX);
    assert!(again.commit(&tiny).is_err());
    assert_eq!(
        PrivacyBudget::restore(&again.state().to_json(), &p)
            .unwrap()
            .releases(),
        u64::MAX
    );
}

/// The sampling tester's tail sets (tidy13, attack10 O3) on honest
/// mechanisms that are exactly tight: randomized response (two atoms), the
/// two-sided geometric (integers, ties everywhere), Laplace at exactly εd,
/// a constant release (every set empty) and tiny pilots (an extreme set
/// by one or two draws). Over 60 seeds each at α = 0.05 the failures stay
/// within what α allows (a binomial(60, 0.05) exceeds 9 with probability
/// below 0.2%).
#[test]
fn the_tail_sets_raise_no_false_alarms_on_tight_honest_mechanisms() {
    use geopriv::audit::sampling::{test_pair, Release, SamplingOptions};
    use rand::Rng;
    let eps: f64 = 0.7;
    let rr = move |x: &[f64], rng: &mut rand::rngs::StdRng| -> geopriv::Result<f64> {
        let keep = rng.random::<f64>() < eps.exp() / (1.0 + eps.exp());
        Ok(if keep { x[0] } else { 1.0 - x[0] })
    };
    let geometric = move |x: &[f64], rng: &mut rand::rngs::StdRng| -> geopriv::Result<f64> {
        // Two-sided geometric: P(k) ∝ e^{-ε|k|}, the difference of two
        // geometric draws.
        let p = 1.0 - (-eps).exp();
        let mut g = || {
            let u: f64 = rng.random::<f64>();
            ((1.0 - u).ln() / (1.0 - p).ln()).floor()
        };
        Ok(x[0] + g() - g())
    };
    let laplace = move |x: &[f64], rng: &mut rand::rngs::StdRng| -> geopriv::Result<f64> {
        let u: f64 = rng.random::<f64>() - 0.5;
        Ok(x[0] - u.signum() * (1.0 - 2.0 * u.abs()).ln() / eps)
    };
    let constant = |_: &[f64], _: &mut rand::rngs::StdRng| -> geopriv::Result<f64> { Ok(3.0) };
    let cases: [(&str, &Release, usize); 6] = [
        ("randomized response", &rr, 2_000),
        ("geometric", &geometric, 2_000),
        ("geometric, pilot 3", &geometric, 3),
        ("laplace", &laplace, 2_000),
        ("laplace, pilot 2", &laplace, 2),
        ("constant", &constant, 2_000),
    ];
    for (name, release, pilot) in cases {
        let mut failed = 0;
        for seed in 0..60 {
            let options = SamplingOptions {
                samples: 20_000,
                pilot,
                bins: 16,
                alpha: 0.05,
                seed,
            };
            let v = test_pair(release, &[0.0], &[1.0], eps, &options).unwrap();
            failed += u32::from(!v.passed);
        }
        eprintln!("{name}: {failed} of 60 failed at α = 0.05");
        assert!(failed <= 9, "{name}: {failed} of 60 honest pairs failed");
    }
    // And a fault they are for, on one side only: Laplace with its upper
    // tail piled onto x + 5 scales (mass 0.34%), caught at every seed.
    let cut = move |x: &[f64], rng: &mut rand::rngs::StdRng| -> geopriv::Result<f64> {
        Ok(laplace(x, rng)?.min(x[0] + 5.0 / eps))
    };
    for seed in 0..20 {
        let options = SamplingOptions {
            samples: 20_000,
            pilot: 2_000,
            bins: 16,
            alpha: 0.05,
            seed,
        };
        let v = test_pair(&cut, &[0.0], &[1.0], eps, &options).unwrap();
        assert!(!v.passed, "seed {seed}: a one-sided cut tail passed: {v:?}");
    }
}
