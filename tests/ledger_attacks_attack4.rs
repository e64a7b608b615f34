//! attack4: the ledger's exact accounting (fixed 34-word sums, running
//! period and lifetime sums, windowed compare) against an independent
//! oracle written here: plain big integers in units of 2^-1074 built from
//! the doubles' bits, the rule "sum · 2^50 <= total · (2^50 + 1)" checked
//! by multiplication (not the code's windows), and the ledger's periods
//! tracked here from the clock.

use geopriv::device::budget::{BudgetPolicy, BudgetUnit, Charge, ManualClock, PrivacyBudget};
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A non-negative integer, little-endian u32 limbs (no trailing zeros).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Big(Vec<u32>);

impl Big {
    fn trim(mut self) -> Self {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
        self
    }
    /// x in units of 2^-1074, from its bits.
    fn units(x: f64) -> Big {
        let b = x.to_bits() & !(1u64 << 63);
        let e = (b >> 52) as u32;
        let f = b & ((1 << 52) - 1);
        let (m, shift) = if e == 0 { (f, 0) } else { (f | 1 << 52, e - 1) };
        Big(vec![m as u32, (m >> 32) as u32]).trim().shl(shift)
    }
    fn shl(&self, bits: u32) -> Big {
        let mut out = vec![0u32; (bits / 32) as usize];
        let p = bits % 32;
        let mut carry = 0u32;
        for &w in &self.0 {
            let wide = (w as u64) << p;
            out.push(wide as u32 | carry);
            carry = (wide >> 32) as u32;
        }
        out.push(carry);
        Big(out).trim()
    }
    fn add(&self, o: &Big) -> Big {
        let n = self.0.len().max(o.0.len()) + 1;
        let mut out = Vec::with_capacity(n);
        let mut c = 0u64;
        for i in 0..n {
            let t = *self.0.get(i).unwrap_or(&0) as u64 + *o.0.get(i).unwrap_or(&0) as u64 + c;
            out.push(t as u32);
            c = t >> 32;
        }
        Big(out).trim()
    }
    fn mul_small(&self, k: u64) -> Big {
        let (lo, hi) = (k as u32 as u64, k >> 32);
        let a: Vec<u32> = {
            let mut out = vec![0u32; self.0.len() + 2];
            let mut c = 0u64;
            for (i, &w) in self.0.iter().enumerate() {
                let t = w as u64 * lo + out[i] as u64 + c;
                out[i] = t as u32;
                c = t >> 32;
            }
            out[self.0.len()] = c as u32;
            out
        };
        let b = if hi == 0 {
            Big::default()
        } else {
            let mut out = vec![0u32; self.0.len() + 2];
            let mut c = 0u64;
            for (i, &w) in self.0.iter().enumerate() {
                let t = w as u64 * hi + c;
                out[i] = t as u32;
                c = t >> 32;
            }
            out[self.0.len()] = c as u32;
            Big(out).trim().shl(32)
        };
        Big(a).trim().add(&b)
    }
    fn cmp(&self, o: &Big) -> Ordering {
        self.0
            .len()
            .cmp(&o.0.len())
            .then_with(|| self.0.iter().rev().cmp(o.0.iter().rev()))
    }
}

/// sum <= total · (1 + 2^-50), by multiplication.
fn covers(sum: &Big, total: f64) -> bool {
    let lhs = sum.shl(50);
    let rhs = Big::units(total).mul_small((1u64 << 50) + 1);
    lhs.cmp(&rhs) != Ordering::Greater
}

/// d is the smallest double >= s.
fn is_round_up(d: f64, s: &Big) -> bool {
    let ok_above = Big::units(d).cmp(s) != Ordering::Less;
    let below_is_less =
        d == 0.0 || Big::units(f64::from_bits(d.to_bits() - 1)).cmp(s) == Ordering::Less;
    ok_above && below_is_less
}

/// r is the largest double <= total - s (0 if s >= total).
fn is_remaining(r: f64, s: &Big, total: f64) -> bool {
    let t = Big::units(total);
    if s.cmp(&t) != Ordering::Less {
        return r == 0.0;
    }
    let with = |x: f64| Big::units(x).add(s).cmp(&t);
    with(r) != Ordering::Greater && with(f64::from_bits(r.to_bits() + 1)) == Ordering::Greater
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const DAY: u64 = 86_400;

/// A charge from every part of the range, relative to the totals.
fn pick(rng: &mut Rng, period_total: f64, total: f64) -> f64 {
    let k = (1 + rng.below(70)) as f64;
    match rng.below(14) {
        0 => f64::from_bits(1 + rng.below(1 << 20)), // subnormal
        1 => f64::from_bits((1 << 52) - 1 - rng.below(4)), // largest subnormals
        2 => f64::MIN_POSITIVE,
        3 => period_total / k,
        4 => total / k,
        5 => period_total,
        6 => total,
        7 => f64::from_bits(period_total.to_bits() + 1), // just above
        8 => f64::from_bits(period_total.to_bits() - 1), // just below
        9 => f64::MAX,
        10 => 1e300,
        11 => 1e-300,
        // 2^(64 j) units: lands exactly on a word boundary
        12 => f64::from_bits(1).max(2f64.powi(-1074 + 64 * rng.below(33) as i32)),
        _ => period_total * 2f64.powi(-(rng.below(120) as i32)),
    }
}

/// Random sequences on periodic ledgers with extreme totals, the clock
/// jumping forward and back, memo charges and save/restore: every
/// decision, every spent and remaining amount is the oracle's.
#[test]
fn attack4_ledger_decisions_match_an_independent_big_integer_oracle() {
    let totals: [f64; 9] = [
        f64::from_bits(1),
        f64::from_bits(3),
        f64::from_bits((1 << 52) - 1),
        f64::MIN_POSITIVE,
        1e-300,
        1e-3,
        1.0,
        1e300,
        1e300 * 0.999_999,
    ];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut admitted, mut refused) = (0u32, 0u32);
    for (case, &total) in totals.iter().cycle().take(9 * 12).enumerate() {
        let period_total = match case % 3 {
            0 => total,
            1 => f64::from_bits(total.to_bits().saturating_sub(1)).max(f64::from_bits(1)),
            _ => (total / 7.0).max(f64::from_bits(1)),
        };
        let delta_total = 1e-5;
        let policy = BudgetPolicy::periodic(
            BudgetUnit::PerDollar,
            period_total,
            delta_total / 2.0,
            DAY,
            total,
            delta_total,
        )
        .unwrap();
        let clock = ManualClock::new(500 * DAY);
        let mut b =
            PrivacyBudget::with_secret(policy.clone(), [7; 32]).with_clock(Arc::new(clock.clone()));
        let mut day: i64 = 500;
        let (mut life_e, mut life_d) = (Big::default(), Big::default());
        let mut periods: BTreeMap<u64, (Big, Big)> = BTreeMap::new();
        let mut last = 0u64;
        let mut memos: Vec<[u8; 32]> = Vec::new();
        for step in 0..200 {
            day = (day + rng.below(6) as i64 - 2).max(0);
            clock.set(day as u64 * DAY + rng.below(DAY));
            let e = pick(&mut rng, period_total, total).max(f64::from_bits(1));
            let d = [0.0, 1e-7, 5e-6, f64::from_bits(1)][rng.below(4) as usize];
            let c = Charge::new(BudgetUnit::PerDollar, e, d).unwrap();
            let period = (day as u64).max(last);
            let (pe, pd) = periods.get(&period).cloned().unwrap_or_default();
            let (ce, cd) = (Big::units(e), Big::units(d));
            let expected = covers(&pe.add(&ce), period_total)
                && covers(&pd.add(&cd), delta_total / 2.0)
                && covers(&life_e.add(&ce), total)
                && covers(&life_d.add(&cd), delta_total);
            assert_eq!(
                b.can_afford(&c),
                expected,
                "case {case} step {step}: {e:e} {d:e}"
            );
            let memo = rng.below(4) == 0;
            let got = if memo {
                let key = if !memos.is_empty() && rng.below(2) == 0 {
                    memos[rng.below(memos.len() as u64) as usize]
                } else {
                    let mut k = [0u8; 32];
                    k[..8].copy_from_slice(&rng.next().to_le_bytes());
                    k
                };
                match b.commit_once(key, &c) {
                    Ok(true) => {
                        memos.push(key);
                        true
                    }
                    Ok(false) => {
                        assert!(
                            memos.contains(&key),
                            "case {case} step {step}: unknown memo"
                        );
                        false // charged before: not again
                    }
                    Err(_) => {
                        assert!(!expected, "case {case} step {step}: refused");
                        false
                    }
                }
            } else {
                let ok = b.try_charge(&c).is_ok();
                assert_eq!(ok, expected, "case {case} step {step}: {e:e} {d:e}");
                ok
            };
            if expected {
                admitted += 1;
            } else {
                refused += 1;
            }
            if got {
                let s = periods.entry(period).or_default();
                s.0 = s.0.add(&ce);
                s.1 = s.1.add(&cd);
                life_e = life_e.add(&ce);
                life_d = life_d.add(&cd);
                last = period;
            }
            assert_eq!(b.last_period(), last);
            assert!(
                is_round_up(b.spent_epsilon(), &life_e),
                "case {case} step {step}"
            );
            assert!(
                is_round_up(b.spent_delta(), &life_d),
                "case {case} step {step}"
            );
            let left = b.remaining();
            let (pe, pd) = periods.get(&left.period).cloned().unwrap_or_default();
            assert!(is_remaining(left.lifetime_epsilon, &life_e, total));
            assert!(is_remaining(left.lifetime_delta, &life_d, delta_total));
            assert!(
                is_remaining(left.period_epsilon, &pe, period_total),
                "case {case} step {step}"
            );
            assert!(is_remaining(left.period_delta, &pd, delta_total / 2.0));
            if rng.below(10) == 0 {
                b = PrivacyBudget::restore(&b.to_json(), &policy)
                    .unwrap()
                    .with_clock(Arc::new(clock.clone()));
            }
        }
    }
    // Both outcomes are exercised, many times.
    assert!(
        admitted > 2_000 && refused > 2_000,
        "{admitted} admitted, {refused} refused"
    );
}

/// 2^16 + 5 charges of fl(T/k) fit, one more never does, for totals at
/// the ends of the range (the sums carry through many words); for a
/// total whose share is subnormal, every decision is the oracle's.
#[test]
fn attack4_many_shares_fit_and_one_more_does_not() {
    let k = (1u64 << 16) + 5;
    for total in [
        f64::from_bits(1 << 40),
        f64::MIN_POSITIVE,
        1e-300,
        0.7,
        1e300,
    ] {
        let policy = BudgetPolicy::new(BudgetUnit::PerDollar, total, 0.0).unwrap();
        let mut b = PrivacyBudget::with_secret(policy.clone(), [1; 32]);
        let share = total / k as f64;
        let c = Charge::new(BudgetUnit::PerDollar, share, 0.0).unwrap();
        let mut sum = Big::default();
        // A subnormal share carries an absolute rounding error (up to
        // half a unit each), so k of them may overshoot T by more than the
        // slack: there the decisions are only the oracle's.
        let normal = share >= f64::MIN_POSITIVE;
        for i in 0..k {
            let next = sum.add(&Big::units(share));
            let expected = covers(&next, total);
            assert!(expected || !normal, "{total:e}: oracle refuses share {i}");
            assert_eq!(b.try_charge(&c).is_ok(), expected, "{total:e}: share {i}");
            if !expected {
                break;
            }
            sum = next;
        }
        if !normal {
            continue;
        }
        assert!(covers(&sum, total));
        assert!(!covers(&sum.add(&Big::units(share)), total));
        assert!(!b.can_afford(&c), "{total:e}: k + 1 shares admitted");
        assert!(is_round_up(b.spent_epsilon(), &sum));
        let again = PrivacyBudget::restore(&b.to_json(), &policy).unwrap();
        assert!(!again.can_afford(&c));
        assert_eq!(again.releases(), k);
    }
}

/// Many subnormal charges, then one big one that exactly fills the slack
/// (and one unit more): the sum and total differ only far below the
/// compare's window.
#[test]
fn attack4_the_slack_boundary_far_below_the_window() {
    for total in [1.0f64, 1e300, 3.0e-200] {
        // cap = T + floor(T / 2^50) units. Fill it with subnormal units.
        let policy = BudgetPolicy::new(BudgetUnit::PerDollar, total, 0.0).unwrap();
        let cap = Big::units(total).mul_small((1u64 << 50) + 1);
        // Charge big = T (exactly), then the rest of cap / 2^50 units.
        let mut b = PrivacyBudget::with_secret(policy.clone(), [2; 32]);
        let tiny = f64::from_bits(1);
        let big = Charge::new(BudgetUnit::PerDollar, total, 0.0).unwrap();
        let one = Charge::new(BudgetUnit::PerDollar, tiny, 0.0).unwrap();
        for _ in 0..1000 {
            b.try_charge(&one).unwrap();
        }
        let sum = Big::units(tiny).mul_small(1000).add(&Big::units(total));
        let expect = sum.shl(50).cmp(&cap) != Ordering::Greater;
        assert_eq!(b.try_charge(&big).is_ok(), expect, "{total:e}");
        // 2^-1074 more than slack: a charge of the largest subnormal
        // pushes past for T = 1 once the slack (2^-50) is consumed.
        let slack = total * 2f64.powi(-50);
        let mut c = PrivacyBudget::with_secret(policy.clone(), [3; 32]);
        c.try_charge(&big).unwrap();
        let near = Charge::new(BudgetUnit::PerDollar, slack, 0.0).unwrap();
        let s = Big::units(total).add(&Big::units(slack));
        assert_eq!(c.can_afford(&near), covers(&s, total), "{total:e}");
        let above = f64::from_bits(slack.to_bits() + 1);
        let s2 = Big::units(total).add(&Big::units(above));
        let c2 = Charge::new(BudgetUnit::PerDollar, above, 0.0).unwrap();
        assert_eq!(c.can_afford(&c2), covers(&s2, total), "{total:e}");
    }
}

/// A charge of f64::MAX against the largest total, and after it: never
/// admitted, and the state stays restorable.
#[test]
fn attack4_f64_max_charges_are_refused_at_every_total() {
    for total in [1e300, f64::from_bits(1), 1.0] {
        let policy = BudgetPolicy::new(BudgetUnit::PerDollar, total, 0.0).unwrap();
        let mut b = PrivacyBudget::with_secret(policy.clone(), [4; 32]);
        let max = Charge::new(BudgetUnit::PerDollar, f64::MAX, 1.0).unwrap();
        assert!(b.try_charge(&max).is_err());
        let c = Charge::new(BudgetUnit::PerDollar, total, 0.0).unwrap();
        b.try_charge(&c).unwrap();
        assert!(b.try_charge(&max).is_err());
        assert_eq!(b.spent_epsilon(), total);
        let again = PrivacyBudget::restore(&b.to_json(), &policy).unwrap();
        assert_eq!(again, b);
    }
}

/// Two FileLedger handles on one file (each reloads under the lock before
/// charging): k shares of a tiny total split between them all fit, the
/// (k+1)-th is refused by both, a memo key charged through one is not
/// charged again through the other, and the file restores to the oracle's
/// sum.
#[test]
fn attack4_two_file_ledgers_share_exact_sums() {
    use geopriv::device::budget::{FileLedger, Ledger};
    let dir = std::env::temp_dir().join(format!("attack4-ledger-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ledger.json");
    for total in [1e-300, 1.0, 1e300] {
        std::fs::remove_file(&path).ok();
        let policy = BudgetPolicy::new(BudgetUnit::PerDollar, total, 0.0).unwrap();
        let mut a = FileLedger::open_or_create(&path, &policy).unwrap();
        let mut b = FileLedger::open_or_create(&path, &policy).unwrap();
        let k = 101u64;
        let share = total / k as f64;
        let c = Charge::new(BudgetUnit::PerDollar, share, 0.0).unwrap();
        let mut sum = Big::default();
        for i in 0..k - 1 {
            let l = if i % 3 == 0 { &mut a } else { &mut b };
            l.spend(&c, || Ok(()))
                .unwrap_or_else(|e| panic!("{total:e} share {i}: {e}"));
            sum = sum.add(&Big::units(share));
        }
        assert!(a.commit_once([9; 32], &c).unwrap());
        sum = sum.add(&Big::units(share));
        assert!(!b.commit_once([9; 32], &c).unwrap(), "memo charged twice");
        assert!(
            a.spend(&c, || Ok(())).is_err(),
            "{total:e}: k + 1 admitted via a"
        );
        assert!(
            b.spend(&c, || Ok(())).is_err(),
            "{total:e}: k + 1 admitted via b"
        );
        let text = std::fs::read_to_string(&path).unwrap();
        let back = PrivacyBudget::restore(&text, &policy).unwrap();
        assert_eq!(back.releases(), k);
        assert!(is_round_up(back.spent_epsilon(), &sum));
        assert!(!back.can_afford(&c));
    }
    std::fs::remove_dir_all(&dir).ok();
}
