//! Exact sums of charges (`docs/MATH.md §8.3`): every finite double is an
//! integer multiple of 2^-1074, so a sum of charges is an integer in that
//! unit, held here as a fixed array of [`WORDS`] little-endian u64 words:
//! no allocation, a charge is a few word additions and a compare.
//!
//! Capacity: a finite double is below 2^1024 = 2^2098 units, and a ledger
//! sums at most 2^64 charges (the release counter is a u64, plus one
//! carried-over v1 amount), so every sum it forms is below 2^2162 units;
//! 34 words hold 2176 bits. Limits are compared without shifting: for an
//! integer s and a total t (both in units),
//! s ≤ t·(1 + 2^-SLACK_BITS) ⟺ s ≤ t + ⌊t / 2^SLACK_BITS⌋, and for
//! t = m·2^p (m < 2^53) that bound is one number of at most 104
//! significant bits, computed from the double's bits.

use crate::exact::decompose;
use core::cmp::Ordering;

/// The ledger's relative slack: a total T admits charges whose exact sum
/// is at most T·(1 + 2^-SLACK_BITS). It makes k charges of fl(T/k) fit
/// (their exact sum is at most T·(1 + 2^-53)·(1 + 2^-53)) while k + 1
/// never do for k < 2^49.
pub(crate) const SLACK_BITS: u32 = 50;

/// Words of an [`ExactSum`]: 2176 bits ≥ 2098 (one double) + 64 (2^64
/// charges).
const WORDS: usize = 34;

/// An exact non-negative sum of doubles, in units of 2^-1074: the integer
/// Σ w[i]·2^(64 i).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ExactSum {
    w: [u64; WORDS],
}

impl Default for ExactSum {
    fn default() -> Self {
        Self::ZERO
    }
}

/// The number v·2^s (v < 2^118, s ≤ 2046) as three words from word `idx`.
#[derive(Clone, Copy)]
pub(crate) struct Window {
    idx: usize,
    w: [u64; 3],
}

impl Window {
    #[inline]
    fn new(v: u128, s: u32) -> Self {
        let idx = (s / 64) as usize;
        let off = s % 64;
        let w = if off == 0 {
            [v as u64, (v >> 64) as u64, 0]
        } else {
            // v << off has at most 118 + 63 bits: the low word, then the
            // rest (v >> (64 - off) < 2^(54 + off) <= 2^117) in two words.
            let rest = v >> (64 - off);
            [(v as u64) << off, rest as u64, (rest >> 64) as u64]
        };
        // s <= 2046 keeps idx + 2 <= 33 < WORDS.
        Window {
            idx: idx.min(WORDS - 3),
            w,
        }
    }

    /// |x|·count: the mantissa times the count (< 2^117) at x's position.
    #[inline]
    pub(crate) fn of(x: f64, count: u64) -> Self {
        let (_, m, pos) = decompose(x.abs());
        Window::new(m as u128 * count as u128, pos)
    }

    /// ⌊T·(1 + 2^-SLACK_BITS)⌋ in units for a total T = m·2^pos (units):
    /// m·(2^50 + 1)·2^(pos - 50) if pos ≥ 50 (exact, < 2^104 · 2^(pos-50)),
    /// else m·2^pos + ⌊m·2^pos / 2^50⌋ (< 2^104).
    #[inline]
    pub(crate) fn cap(total: f64) -> Self {
        let (_, m, pos) = decompose(total.abs());
        let m = m as u128;
        if pos >= SLACK_BITS {
            Window::new(m * ((1u128 << SLACK_BITS) + 1), pos - SLACK_BITS)
        } else {
            let t = m << pos;
            Window::new(t + (t >> SLACK_BITS), 0)
        }
    }

    /// The window's word i of the whole number.
    #[inline(always)]
    fn word(&self, i: usize) -> u64 {
        match i.checked_sub(self.idx) {
            Some(k) if k < 3 => self.w[k],
            _ => 0,
        }
    }
}

impl ExactSum {
    /// 0.
    pub(crate) const ZERO: Self = ExactSum { w: [0; WORDS] };

    /// count · x exactly (x finite, >= 0).
    #[cfg(test)]
    pub(crate) fn of(x: f64, count: u64) -> Self {
        let mut s = Self::default();
        s.add(x, count);
        s
    }

    /// self += count · |x|, exactly.
    #[inline]
    pub(crate) fn add(&mut self, x: f64, count: u64) {
        self.add_window(&Window::of(x, count));
    }

    /// self += the window's number, exactly.
    #[inline]
    pub(crate) fn add_window(&mut self, win: &Window) {
        let mut carry = false;
        let mut rest = self.w[win.idx.min(WORDS)..].iter_mut();
        for (&v, w) in win.w.iter().zip(rest.by_ref()) {
            let (a, c1) = w.overflowing_add(v);
            let (b, c2) = a.overflowing_add(carry as u64);
            *w = b;
            carry = c1 | c2;
        }
        // A ledger's sums stay below 2^2162 units (module docs): the carry
        // stops inside the array.
        for w in rest {
            if !carry {
                break;
            }
            let (a, c) = w.overflowing_add(1);
            *w = a;
            carry = c;
        }
    }

    /// self + other.
    #[cfg(test)]
    pub(crate) fn plus(&self, other: &Self) -> Self {
        let mut out = *self;
        let mut carry = false;
        for (o, &b) in out.w.iter_mut().zip(other.w.iter()) {
            let (a, c1) = o.overflowing_add(b);
            let (s, c2) = a.overflowing_add(carry as u64);
            *o = s;
            carry = c1 | c2;
        }
        out
    }

    /// Compare with a window: any word above it set means greater, then
    /// its three words from the top, then any word below it set means
    /// greater.
    #[inline]
    fn cmp_window(&self, win: &Window) -> Ordering {
        let idx = win.idx.min(WORDS - 3);
        if self.w[idx + 3..].iter().any(|&w| w != 0) {
            return Ordering::Greater;
        }
        for k in (0..3).rev() {
            match self.w[idx + k].cmp(&win.w[k]) {
                Ordering::Equal => {}
                o => return o,
            }
        }
        if self.w[..idx].iter().any(|&w| w != 0) {
            Ordering::Greater
        } else {
            Ordering::Equal
        }
    }

    /// Whether self <= total · (1 + 2^-SLACK_BITS), exactly: self ≤
    /// t + ⌊t / 2^SLACK_BITS⌋ with t = total in units (self is an integer).
    pub(crate) fn fits(&self, total: f64) -> bool {
        self.cmp_window(&Window::cap(total)) != Ordering::Greater
    }

    /// Whether self + count·|x| fits `total` (see [`fits`](Self::fits)),
    /// without changing self.
    #[cfg(test)]
    pub(crate) fn fits_with(&self, x: f64, count: u64, total: f64) -> bool {
        self.window_fits(&Window::of(x, count), &Window::cap(total))
    }

    /// Whether self + x <= cap (a [`Window::cap`]), without changing self
    /// or copying it: the sum's words are self's but for x's three words
    /// and the carry's run (words of all ones become 0, the word it stops
    /// in gains 1), so only the words from the lower of the two windows to
    /// the higher of the sum's changed words and the cap are compared one
    /// by one; above and below, any word of self set means "greater".
    #[inline]
    pub(crate) fn window_fits(&self, x: &Window, cap: &Window) -> bool {
        let xi = x.idx.min(WORDS - 3);
        let ci = cap.idx.min(WORDS - 3);
        let mut near = [0u64; 3];
        let mut carry = false;
        for (k, n) in near.iter_mut().enumerate() {
            let (a, c1) = self.w[xi + k].overflowing_add(x.w[k]);
            let (b, c2) = a.overflowing_add(carry as u64);
            *n = b;
            carry = c1 | c2;
        }
        // The carry runs through words of all ones and stops in word r (a
        // ledger's sums never carry out of the array: module docs).
        let mut r = xi + 3;
        if carry {
            while r < WORDS && self.w[r] == u64::MAX {
                r += 1;
            }
        }
        let sum_word = |i: usize| -> u64 {
            if (xi..xi + 3).contains(&i) {
                near[i - xi]
            } else if !carry || i < xi || i > r {
                self.w[i]
            } else if i < r {
                0
            } else {
                self.w[i].wrapping_add(1)
            }
        };
        let changed_top = if carry { r.min(WORDS - 1) } else { xi + 2 };
        let hi = changed_top.max(ci + 2);
        let lo = xi.min(ci);
        if self.w[hi + 1..].iter().any(|&w| w != 0) {
            return false;
        }
        for i in (lo..=hi).rev() {
            match sum_word(i).cmp(&cap.word(i)) {
                Ordering::Equal => {}
                o => return o == Ordering::Less,
            }
        }
        !self.w[..lo].iter().any(|&w| w != 0)
    }

    /// Bit length of the integer (0 for zero).
    fn bits(&self) -> u32 {
        match self.w.iter().rposition(|&w| w != 0) {
            None => 0,
            Some(i) => 64 * i as u32 + 64 - self.w[i].leading_zeros(),
        }
    }

    /// (⌊self / 2^shift⌋ mod 2^64, whether any bit below `shift` is set).
    fn bits_from(&self, shift: u32) -> (u64, bool) {
        let (idx, off) = ((shift / 64) as usize, shift % 64);
        let lo = self.w.get(idx).copied().unwrap_or(0);
        let hi = self.w.get(idx + 1).copied().unwrap_or(0);
        let v = if off == 0 {
            lo
        } else {
            (lo >> off) | (hi << (64 - off))
        };
        let below = (off != 0 && lo & ((1u64 << off) - 1) != 0)
            || self.w[..idx.min(WORDS)].iter().any(|&w| w != 0);
        (v, below)
    }

    /// The double nearest to self towards zero (`up` false) or away from
    /// it (`up` true), as bits: with L the bit length and shift =
    /// max(L − 53, 0), the mantissa n = ⌊self / 2^shift⌋ (+1 if rounding up
    /// and bits were cut), and the double n·2^(shift − 1074) has the bits
    /// (shift << 52) + n (biased exponent shift + 1 with the implicit bit
    /// folded in; shift 0 covers the subnormals and the first binade).
    fn rounded_bits(&self, up: bool) -> u64 {
        let shift = self.bits().saturating_sub(53);
        let (n, cut) = self.bits_from(shift);
        let n = n + (up && cut) as u64;
        ((shift as u64) << 52) + n
    }

    /// The smallest double >= self. Above 2^1024 (not a double's range;
    /// only a sum past a total near f64::MAX) it is not finite: infinity up
    /// to 2^1024 inclusive, then the NaN 0x7ff0000000000001 (the bits the
    /// `Vec<u32>` implementation this replaces returned).
    pub(crate) fn round_up(&self) -> f64 {
        let bits = self.bits();
        // 2^1024 = 2^2098 units has bit length 2099.
        if bits > 2099 || (bits == 2099 && self.bits_from(2098) != (1, false)) {
            return f64::from_bits(f64::INFINITY.to_bits() + 1);
        }
        f64::from_bits(self.rounded_bits(true))
    }

    /// The largest double <= total − self, or 0 if self exceeds total.
    pub(crate) fn remaining_in(&self, total: f64) -> f64 {
        let t = Window::of(total, 1);
        if self.cmp_window(&t) != Ordering::Less {
            return 0.0;
        }
        // t - self, with t < 2^2098 units: the result is below a double.
        let mut diff = Self::default();
        let mut borrow = false;
        for (i, (d, &s)) in diff.w.iter_mut().zip(self.w.iter()).enumerate() {
            let (a, b1) = t.word(i).overflowing_sub(s);
            let (r, b2) = a.overflowing_sub(borrow as u64);
            *d = r;
            borrow = b1 | b2;
        }
        f64::from_bits(diff.rounded_bits(false))
    }
}

/// The implementation this module replaced (sums as `Vec<u32>` big
/// integers built per operation), kept as the oracle of the property
/// tests.
#[cfg(test)]
pub(crate) mod oracle {
    use super::SLACK_BITS;
    use crate::exact::{cmp, decompose, from_u64, mul, shift_left, to_f64_parts, trim};
    use alloc::vec::Vec;
    use core::cmp::Ordering;

    /// An exact non-negative sum of doubles, in units of 2^-1074.
    #[derive(Clone, Debug, Default, PartialEq, Eq)]
    pub(crate) struct ExactSum(pub(crate) Vec<u32>);

    fn add(a: &[u32], b: &[u32]) -> Vec<u32> {
        let n = a.len().max(b.len());
        let mut out = Vec::with_capacity(n + 1);
        let mut carry = 0u64;
        for i in 0..n {
            let t = a.get(i).copied().unwrap_or(0) as u64
                + b.get(i).copied().unwrap_or(0) as u64
                + carry;
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
            ExactSum(shift_left(&mul(&from_u64(m), &from_u64(count)), pos))
        }

        /// self + other.
        pub(crate) fn plus(&self, other: &Self) -> Self {
            ExactSum(add(&self.0, &other.0))
        }

        /// Whether self <= total · (1 + 2^-SLACK_BITS), exactly.
        pub(crate) fn fits(&self, total: f64) -> bool {
            let t = Self::of(total, 1);
            let lhs = shift_left(&self.0, SLACK_BITS);
            let rhs = add(&shift_left(&t.0, SLACK_BITS), &t.0);
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;
    use proptest::prelude::*;

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

    #[test]
    fn the_top_of_the_range_matches_the_oracle() {
        // 2^64 - 1 charges of f64::MAX: the largest sum a ledger can form.
        let top = ExactSum::of(f64::MAX, u64::MAX).plus(&ExactSum::of(f64::MAX, 1));
        let old = oracle::ExactSum::of(f64::MAX, u64::MAX).plus(&oracle::ExactSum::of(f64::MAX, 1));
        assert_eq!(words_of(&top), old.0);
        assert_eq!(top.round_up().to_bits(), old.round_up().to_bits());
        assert!(!top.fits(f64::MAX) && !old.fits(f64::MAX));
        // f64::MAX = 2^1024 - 2^971; with h = 2^970: MAX + h rounds up to
        // infinity, MAX + 2h is 2^1024 exactly (infinity), MAX + 3h is
        // above it (NaN, as the oracle).
        let max = ExactSum::of(f64::MAX, 1);
        let h = |k| ExactSum::of(2f64.powi(970), k);
        for s in [
            max,
            max.plus(&ExactSum::of(1.0, 1)),
            max.plus(&h(1)),
            max.plus(&h(2)),
            max.plus(&h(3)),
        ] {
            let o = to_oracle(&s);
            assert_eq!(s.round_up().to_bits(), o.round_up().to_bits());
            assert_eq!(s.fits(f64::MAX), o.fits(f64::MAX));
            assert_eq!(s.remaining_in(f64::MAX), o.remaining_in(f64::MAX));
        }
        assert_eq!(max.plus(&h(1)).round_up(), f64::INFINITY);
        assert_eq!(max.plus(&h(2)).round_up(), f64::INFINITY);
        assert!(max.plus(&h(3)).round_up().is_nan());
        assert_eq!(max.plus(&h(3)).remaining_in(f64::MAX), 0.0);
    }

    /// The little-endian u32 words without leading zeros (the oracle's
    /// form).
    fn words_of(s: &ExactSum) -> Vec<u32> {
        let mut out: Vec<u32> =
            s.w.iter()
                .flat_map(|&w| [w as u32, (w >> 32) as u32])
                .collect();
        while out.last() == Some(&0) {
            out.pop();
        }
        out
    }

    fn to_oracle(s: &ExactSum) -> oracle::ExactSum {
        oracle::ExactSum(words_of(s))
    }

    /// Doubles >= 0 from every part of the range: subnormals, the
    /// smallest normals, everyday charges, 1e300 and f64::MAX.
    fn value() -> impl Strategy<Value = f64> {
        prop_oneof![
            (1u64..1 << 20).prop_map(f64::from_bits),
            (0u64..1 << 52).prop_map(|f| f64::from_bits((1u64 << 52) | f)),
            (0u64..0x7ff0_0000_0000_0000).prop_map(f64::from_bits),
            (1e-6f64..1.0),
            prop_oneof![
                Just(1e300),
                Just(f64::MAX),
                Just(5e-324),
                Just(0.0),
                Just(1e-3)
            ],
            (1u64..100_000).prop_map(|k| 1e-3 / k as f64),
        ]
    }

    /// A count: mostly 1 (a charge), sometimes a history entry's count.
    fn count() -> impl Strategy<Value = u64> {
        prop_oneof![
            4 => Just(1u64),
            1 => 0u64..1_000_000,
            1 => Just(u64::MAX >> 8),
        ]
    }

    /// Sums with runs of all-ones words (long carries) and zeros.
    fn sum_words() -> impl Strategy<Value = ExactSum> {
        let word = prop_oneof![Just(0u64), Just(u64::MAX), proptest::num::u64::ANY];
        proptest::array::uniform32(word).prop_map(|w32| {
            let mut s = ExactSum::default();
            s.w[..32].copy_from_slice(&w32);
            s
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        /// `window_fits` (no copy) against the sum formed in a copy and
        /// compared word by word.
        #[test]
        fn window_fits_is_the_materialized_compare(
            s in sum_words(),
            x in value(),
            k in count(),
            t in value(),
        ) {
            let xw = Window::of(x, k);
            let mut sum = s;
            sum.add_window(&xw);
            let cap = Window::cap(t);
            let expected = sum.cmp_window(&cap) != Ordering::Greater;
            prop_assert_eq!(s.window_fits(&xw, &cap), expected);
        }

        /// Random charge sequences: the sum, its rounding, `fits` and
        /// `remaining_in` against every total, bit for bit the oracle's.
        #[test]
        fn matches_the_vec_oracle(
            charges in proptest::collection::vec((value(), count()), 0..24),
            totals in proptest::collection::vec(value(), 1..4),
        ) {
            let mut new = ExactSum::default();
            let mut old = oracle::ExactSum::default();
            for &(x, k) in &charges {
                let was_new = new;
                new.add(x, k);
                old = old.plus(&oracle::ExactSum::of(x, k));
                prop_assert_eq!(words_of(&new), old.0.clone());
                prop_assert_eq!(words_of(&ExactSum::of(x, k)), oracle::ExactSum::of(x, k).0);
                prop_assert_eq!(was_new.plus(&ExactSum::of(x, k)), new);
                for &t in &totals {
                    prop_assert_eq!(was_new.fits_with(x, k, t), old.fits(t));
                }
                for &t in totals.iter().chain(&[x]) {
                    prop_assert_eq!(new.fits(t), old.fits(t), "fits {:e}", t);
                    prop_assert_eq!(
                        new.remaining_in(t).to_bits(),
                        old.remaining_in(t).to_bits(),
                        "remaining_in {:e}", t
                    );
                }
                prop_assert_eq!(new.round_up().to_bits(), old.round_up().to_bits());
            }
        }

        /// Repeated tiny values and shares fl(T/k): the sums and the
        /// limits' decisions around k and k + 1 are the oracle's.
        #[test]
        fn shares_match_the_vec_oracle(t in value(), k in 1u64..2_000) {
            let share = t / k as f64;
            for n in [k - 1, k, k + 1, k + 2] {
                let new = ExactSum::of(share, n);
                let old = oracle::ExactSum::of(share, n);
                prop_assert_eq!(words_of(&new), old.0.clone());
                prop_assert_eq!(new.fits(t), old.fits(t));
                prop_assert_eq!(new.remaining_in(t).to_bits(), old.remaining_in(t).to_bits());
                prop_assert_eq!(new.round_up().to_bits(), old.round_up().to_bits());
            }
            // One at a time, as a ledger charges.
            let mut new = ExactSum::default();
            let mut old = oracle::ExactSum::default();
            for _ in 0..k.min(64) {
                new.add(share, 1);
                old = old.plus(&oracle::ExactSum::of(share, 1));
            }
            prop_assert_eq!(words_of(&new), old.0);
        }
    }
}
