//! Exact sums of charges (`docs/MATH.md §8.3`): every finite double is an
//! integer multiple of 2^-1074, so a sum of charges is an integer in that
//! unit, held here as a little-endian magnitude of u32 words (the crate's
//! big-integer helpers in [`crate::exact`]).

use crate::exact::{cmp, decompose, from_u64, mul, to_f64_parts};
use alloc::vec;
use alloc::vec::Vec;
use core::cmp::Ordering;

/// The ledger's relative slack: a total T admits charges whose exact sum
/// is at most T·(1 + 2^-SLACK_BITS). It makes k charges of fl(T/k) fit
/// (their exact sum is at most T·(1 + 2^-53)·(1 + 2^-53)) while k + 1
/// never do for k < 2^49.
pub(crate) const SLACK_BITS: u32 = 50;

/// An exact non-negative sum of doubles, in units of 2^-1074.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ExactSum(Vec<u32>);

fn trim(w: &mut Vec<u32>) {
    while w.last() == Some(&0) {
        w.pop();
    }
}

fn shl(words: &[u32], bits: u32) -> Vec<u32> {
    if words.is_empty() {
        return Vec::new();
    }
    let (whole, part) = ((bits / 32) as usize, bits % 32);
    let mut out = vec![0u32; whole];
    let mut carry = 0u32;
    for &w in words {
        if part == 0 {
            out.push(w);
        } else {
            out.push((w << part) | carry);
            carry = w >> (32 - part);
        }
    }
    out.push(carry);
    trim(&mut out);
    out
}

fn add(a: &[u32], b: &[u32]) -> Vec<u32> {
    let n = a.len().max(b.len());
    let mut out = Vec::with_capacity(n + 1);
    let mut carry = 0u64;
    for i in 0..n {
        let t =
            a.get(i).copied().unwrap_or(0) as u64 + b.get(i).copied().unwrap_or(0) as u64 + carry;
        out.push(t as u32);
        carry = t >> 32;
    }
    out.push(carry as u32);
    trim(&mut out);
    out
}

impl ExactSum {
    /// count · x exactly (x finite, >= 0).
    pub(crate) fn of(x: f64, count: u64) -> Self {
        let (_, m, pos) = decompose(x.abs());
        ExactSum(shl(&mul(&from_u64(m), &from_u64(count)), pos))
    }

    /// self + other.
    pub(crate) fn plus(&self, other: &Self) -> Self {
        ExactSum(add(&self.0, &other.0))
    }

    /// Whether self <= total · (1 + 2^-SLACK_BITS), exactly.
    pub(crate) fn fits(&self, total: f64) -> bool {
        let t = Self::of(total, 1);
        let lhs = shl(&self.0, SLACK_BITS);
        let rhs = add(&shl(&t.0, SLACK_BITS), &t.0);
        cmp(&lhs, &rhs) != Ordering::Greater
    }

    /// The smallest double >= self (self must be below 2^1024).
    pub(crate) fn round_up(&self) -> f64 {
        let (m, e) = to_f64_parts(&self.0);
        let v = libm::ldexp(m, e - 1074);
        match cmp(&Self::of(v, 1).0, &self.0) {
            Ordering::Less => f64::from_bits(v.to_bits() + 1),
            _ => v,
        }
    }

    /// The largest double <= total − self, or 0 if self exceeds total.
    pub(crate) fn remaining_in(&self, total: f64) -> f64 {
        let t = Self::of(total, 1);
        if cmp(&t.0, &self.0) != Ordering::Greater {
            return 0.0;
        }
        let diff = ExactSum(crate::exact::sub(&t.0, &self.0));
        let up = diff.round_up();
        if Self::of(up, 1) == diff {
            up
        } else {
            f64::from_bits(up.to_bits() - 1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_are_exact_and_rounded_outwards() {
        let tenth = ExactSum::of(0.1, 10);
        // 10 × fl(0.1) is above 1 exactly, and rounds up to 1 + 2^-52.
        assert_eq!(tenth.round_up(), 1.0 + f64::EPSILON);
        assert!(!tenth.fits(1.0 - 2f64.powi(-48)));
        assert!(tenth.fits(1.0)); // within the slack
        assert_eq!(ExactSum::of(0.25, 3).round_up(), 0.75);
        assert_eq!(ExactSum::of(0.25, 3).remaining_in(1.0), 0.25);
        assert_eq!(ExactSum::of(0.25, 5).remaining_in(1.0), 0.0);
        let tiny = ExactSum::of(f64::from_bits(1), 3);
        assert_eq!(tiny.round_up(), f64::from_bits(3));
        let big = ExactSum::of(1e300, 1).plus(&ExactSum::of(1e-300, 1));
        assert_eq!(big.round_up(), f64::from_bits(1e300f64.to_bits() + 1));
        assert_eq!(ExactSum::default().round_up(), 0.0);
        assert_eq!(ExactSum::of(3.0, 0), ExactSum::default());
    }
}
