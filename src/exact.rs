//! Exact fixed-point accumulation of binary64 values (a "superaccumulator").
//!
//! Every finite `f64` is an integer multiple of 2^-1074 (the smallest
//! subnormal), and its square an integer multiple of 2^-2148. So Σx and Σx²
//! over any multiset of finite doubles are *integers* in those units, and
//! integer addition is associative and commutative. [`Limbs`] holds such an
//! integer as signed 32-bit-weight limbs stored in `i64` ("carry-save"): an
//! addition touches a few limbs and never propagates carries; the spare 31
//! bits per limb absorb more than 2^28 additions before a carry pass is
//! needed. After a carry pass the limbs are *balanced* (each in
//! [-2^31, 2^31)), a representation that is unique for each integer, so two
//! accumulators holding the same integer compare and serialize equal, however
//! the values were grouped or ordered.
//!
//! The big-integer helpers at the end (magnitude, multiply, subtract,
//! rounding to f64) turn the exact sums into the estimate; they run once per
//! estimate, not per value.

use alloc::vec;
use alloc::vec::Vec;

/// Weight of one limb, in bits.
const LIMB_BITS: u32 = 32;
/// Half the limb radix: balanced limbs lie in [-HALF, HALF).
const HALF: i64 = 1 << 31;

/// Limbs for Σx: bit positions 0..=2097 (2^-1074 .. 2^1024) plus 64 bits of
/// headroom for up to 2^64 additions, and a sign: 68 × 32 = 2176 bits.
pub(crate) const SUM_LIMBS: usize = 68;
/// Limbs for Σx²: bit positions 0..=4195 plus 64 bits of headroom and a sign:
/// 134 × 32 = 4288 bits.
pub(crate) const SQ_LIMBS: usize = 134;
/// Bits of the largest single |x| in units of 2^-1074 (|x| < 2^1024).
pub(crate) const SUM_VALUE_BITS: u32 = 2098;
/// Bits of the largest single x² in units of 2^-2148 (x² < 2^2048).
pub(crate) const SQ_VALUE_BITS: u32 = 4196;

/// Whether an exact sum of `n` terms, each of magnitude below
/// 2^`value_bits` units, can have a magnitude of `bits` bits:
/// |Σ| < n · 2^value_bits <= 2^(value_bits + bitlen(n)). A state that breaks
/// this was not produced by adding n finite doubles (a forged or corrupted
/// state, or a merge beyond the 2^64-term capacity).
pub(crate) fn sum_fits(bits: u32, value_bits: u32, n: u64) -> bool {
    let n_bits = 64 - n.leading_zeros();
    bits <= value_bits + n_bits
}

/// Unit of the Σx accumulator: 2^-1074.
pub(crate) const SUM_EXP: i32 = -1074;
/// Unit of the Σx² accumulator: 2^-2148.
pub(crate) const SQ_EXP: i32 = -2148;

/// Additions allowed between carry passes. Each addition adds less than
/// 2^33 to any one limb; starting from balanced limbs (< 2^31) this keeps
/// every limb below 2^31 + 2^28 · 2^33 < 2^62, far from i64 overflow.
#[cfg(not(test))]
pub(crate) const MAX_PENDING: u32 = 1 << 28;
/// Unit tests carry every few additions so the carry pass is exercised.
#[cfg(test)]
pub(crate) const MAX_PENDING: u32 = 5;

/// The integer mantissa and bit position of |x| in units of 2^-1074:
/// |x| = m · 2^(pos - 1074), m < 2^53. `x` must be finite.
#[inline(always)]
pub(crate) fn decompose(x: f64) -> (bool, u64, u32) {
    let bits = x.to_bits();
    let negative = bits >> 63 != 0;
    let biased = ((bits >> 52) & 0x7ff) as u32;
    let fraction = bits & ((1u64 << 52) - 1);
    if biased == 0 {
        (negative, fraction, 0)
    } else {
        (negative, fraction | (1u64 << 52), biased - 1)
    }
}

/// A signed integer Σ limb[i] · 2^(32 i) held in carry-save form.
#[derive(Clone, Debug)]
pub(crate) struct Limbs<const N: usize> {
    pub(crate) limbs: [i64; N],
}

impl<const N: usize> Default for Limbs<N> {
    fn default() -> Self {
        Self { limbs: [0; N] }
    }
}

impl<const N: usize> Limbs<N> {
    /// Add ±(v << off) at limb `idx`, with v < 2^96 >> off so that the
    /// shifted value fits three limbs. `mask` is 0 (add) or -1 (subtract).
    #[inline(always)]
    fn add_shifted3(&mut self, idx: usize, v: u128, mask: i64) {
        let p0 = (v as u64 & 0xffff_ffff) as i64;
        let p1 = ((v >> 32) as u64 & 0xffff_ffff) as i64;
        let p2 = ((v >> 64) as u64 & 0xffff_ffff) as i64;
        self.limbs[idx] += (p0 ^ mask) - mask;
        self.limbs[idx + 1] += (p1 ^ mask) - mask;
        self.limbs[idx + 2] += (p2 ^ mask) - mask;
    }

    /// Add ±m · 2^pos (m < 2^53).
    #[inline(always)]
    pub(crate) fn add_mantissa(&mut self, negative: bool, m: u64, pos: u32) {
        let idx = (pos / LIMB_BITS) as usize;
        let off = pos % LIMB_BITS;
        let mask = -(negative as i64);
        self.add_shifted3(idx, (m as u128) << off, mask);
    }

    /// Add m² · 2^(2 pos) (m < 2^53), always non-negative.
    #[inline(always)]
    pub(crate) fn add_square(&mut self, m: u64, pos: u32) {
        let sq = (m as u128) * (m as u128); // < 2^106
        let pos2 = 2 * pos;
        let idx = (pos2 / LIMB_BITS) as usize;
        let off = pos2 % LIMB_BITS;
        let low = (sq as u64) as u128; // 64 bits
        let high = sq >> 64; // < 2^42
        self.add_shifted3(idx, low << off, 0);
        self.add_shifted3(idx + 2, high << off, 0);
    }

    /// Carry pass: bring every limb but the top one into [-2^31, 2^31).
    /// The result is the unique balanced representation of the integer.
    pub(crate) fn normalize(&mut self) {
        for i in 0..N - 1 {
            let carry = (self.limbs[i] + HALF) >> LIMB_BITS;
            self.limbs[i] -= carry << LIMB_BITS;
            self.limbs[i + 1] += carry;
        }
    }

    /// self += other, exactly, leaving self balanced. Works whatever the
    /// pending additions of either side (the carry runs in i128).
    pub(crate) fn merge(&mut self, other: &Self) {
        let mut carry: i128 = 0;
        for i in 0..N {
            let t = self.limbs[i] as i128 + other.limbs[i] as i128 + carry;
            if i + 1 < N {
                let c = (t + HALF as i128) >> LIMB_BITS;
                self.limbs[i] = (t - (c << LIMB_BITS)) as i64;
                carry = c;
            } else {
                // The top limb of a real sum is far below 2^31 (64 bits of
                // headroom above the largest possible bit); states are
                // validated on deserialization, so this cannot overflow.
                self.limbs[i] = t as i64;
            }
        }
    }

    /// Whether all limbs are zero (only meaningful when balanced).
    pub(crate) fn is_zero(&self) -> bool {
        self.limbs.iter().all(|&l| l == 0)
    }

    /// Sign-magnitude form of a *balanced* accumulator: (negative, little-
    /// endian u32 words without leading zero words).
    pub(crate) fn to_magnitude(&self) -> (bool, Vec<u32>) {
        // Two's complement words: propagate so each word is in [0, 2^32).
        let mut words: Vec<u32> = Vec::with_capacity(N + 1);
        let mut carry: i128 = 0;
        for &l in self.limbs.iter() {
            let t = l as i128 + carry;
            words.push((t & 0xffff_ffff) as u32);
            carry = t >> LIMB_BITS;
        }
        // carry is now the sign extension: 0 or -1 for any valid state.
        let negative = carry < 0;
        if negative {
            // Negate the two's complement number.
            let mut c = 1u64;
            for w in words.iter_mut() {
                let t = (!*w) as u64 + c;
                *w = t as u32;
                c = t >> 32;
            }
        }
        trim(&mut words);
        (negative, words)
    }

    /// Balanced limbs as (offset of the first non-zero limb, limbs up to the
    /// last non-zero one). Empty for zero.
    pub(crate) fn to_sparse(&self) -> (u16, Vec<i64>) {
        match self.limbs.iter().position(|&l| l != 0) {
            None => (0, Vec::new()),
            Some(lo) => {
                let hi = self.limbs.iter().rposition(|&l| l != 0).unwrap_or(lo);
                (lo as u16, self.limbs[lo..=hi].to_vec())
            }
        }
    }

    /// Inverse of [`to_sparse`](Self::to_sparse), checking that the limbs
    /// are balanced and in range.
    pub(crate) fn from_sparse(offset: u16, limbs: &[i64]) -> Option<Self> {
        let offset = offset as usize;
        if offset.checked_add(limbs.len())? > N {
            return None;
        }
        if limbs.iter().any(|&l| !(-HALF..HALF).contains(&l)) {
            return None;
        }
        let mut out = Self::default();
        out.limbs[offset..offset + limbs.len()].copy_from_slice(limbs);
        Some(out)
    }

    /// Number of bits of |value| of a *balanced* accumulator (0 for zero).
    pub(crate) fn magnitude_bits(&self) -> u32 {
        let (_, words) = self.to_magnitude();
        match words.last() {
            None => 0,
            Some(&top) => words.len() as u32 * 32 - top.leading_zeros(),
        }
    }

    /// Sign of a balanced accumulator: that of its highest non-zero limb.
    pub(crate) fn is_negative(&self) -> bool {
        self.limbs
            .iter()
            .rev()
            .find(|&&l| l != 0)
            .is_some_and(|&l| l < 0)
    }
}

impl<const N: usize> PartialEq for Limbs<N> {
    fn eq(&self, other: &Self) -> bool {
        self.limbs == other.limbs
    }
}

// ---------------------------------------------------------------------------
// Unsigned big integers as little-endian u32 words (only what the estimate
// needs).

/// Drop the zero words at the top.
pub(crate) fn trim(words: &mut Vec<u32>) {
    while words.last() == Some(&0) {
        words.pop();
    }
}

/// a · b.
pub(crate) fn mul(a: &[u32], b: &[u32]) -> Vec<u32> {
    if a.is_empty() || b.is_empty() {
        return Vec::new();
    }
    let mut out = vec![0u32; a.len() + b.len()];
    for (i, &x) in a.iter().enumerate() {
        let mut carry = 0u64;
        for (j, &y) in b.iter().enumerate() {
            let t = x as u64 * y as u64 + out[i + j] as u64 + carry;
            out[i + j] = t as u32;
            carry = t >> 32;
        }
        out[i + b.len()] = carry as u32;
    }
    trim(&mut out);
    out
}

/// The words of a u64.
pub(crate) fn from_u64(n: u64) -> Vec<u32> {
    let mut w = vec![n as u32, (n >> 32) as u32];
    trim(&mut w);
    w
}

/// Compare two trimmed magnitudes.
pub(crate) fn cmp(a: &[u32], b: &[u32]) -> core::cmp::Ordering {
    a.len()
        .cmp(&b.len())
        .then_with(|| a.iter().rev().cmp(b.iter().rev()))
}

/// a - b for a >= b (trimmed inputs).
pub(crate) fn sub(a: &[u32], b: &[u32]) -> Vec<u32> {
    debug_assert!(cmp(a, b) != core::cmp::Ordering::Less);
    let mut out = a.to_vec();
    let mut borrow = 0i64;
    for (i, w) in out.iter_mut().enumerate() {
        let t = *w as i64 - b.get(i).copied().unwrap_or(0) as i64 - borrow;
        if t < 0 {
            *w = (t + (1i64 << 32)) as u32;
            borrow = 1;
        } else {
            *w = t as u32;
            borrow = 0;
        }
    }
    trim(&mut out);
    out
}

/// The number of significant bits of a trimmed magnitude (0 for zero).
fn bit_length(words: &[u32]) -> u32 {
    words
        .last()
        .map_or(0, |&top| words.len() as u32 * 32 - top.leading_zeros())
}

/// words · 2^k, trimmed.
pub(crate) fn shift_left(words: &[u32], k: u32) -> Vec<u32> {
    if words.is_empty() {
        return Vec::new();
    }
    let (whole, part) = ((k / 32) as usize, k % 32);
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

/// (⌊a / d⌋, a mod d) for d >= 1 (schoolbook division by one u64).
fn divide_small(a: &[u32], d: u64) -> (Vec<u32>, u64) {
    let d = d as u128;
    let mut quotient = vec![0u32; a.len()];
    let mut rem = 0u128;
    for i in (0..a.len()).rev() {
        let cur = (rem << 32) | a[i] as u128;
        quotient[i] = (cur / d) as u32;
        rem = cur % d;
    }
    trim(&mut quotient);
    (quotient, rem as u64)
}

/// The magnitude a · 2^[`SUM_EXP`] divided by d >= 1, **correctly
/// rounded** to a double (to nearest, ties to even): one rounding of the
/// exact quotient, so the mean of values in [lo, hi] is in [lo, hi].
///
/// Where a/d >= 2^52 (the quotient is a normal double) the division is
/// carried to at least 66 bits and the remainder folded into a sticky bit,
/// which [`to_f64_parts`] then rounds once; below, the quotient is rounded
/// to an integer number of units 2^-1074, the subnormal spacing, which is
/// exact as a double.
pub(crate) fn quotient_to_f64(a: &[u32], d: u64) -> f64 {
    let d = d.max(1);
    let (whole, rem) = divide_small(a, d);
    if bit_length(&whole) < 53 {
        // Below 2^-1022: round ⌊a/d⌋ by the remainder, ties to even.
        let mut q = whole
            .iter()
            .enumerate()
            .fold(0u64, |v, (i, &w)| v | (w as u64) << (32 * i));
        let twice = 2 * rem as u128;
        if twice > d as u128 || (twice == d as u128 && q & 1 == 1) {
            q += 1;
        }
        return libm::scalbn(q as f64, SUM_EXP);
    }
    let shift = (64 - d.leading_zeros() + 66).saturating_sub(bit_length(a));
    let (mut q, rem) = divide_small(&shift_left(a, shift), d);
    if rem != 0 {
        q[0] |= 1;
    }
    let (m, e) = to_f64_parts(&q);
    libm::scalbn(m, e - shift as i32 + SUM_EXP)
}

/// A magnitude as m · 2^e with m an integer-valued f64 (< 2^64, correctly
/// rounded to 53 bits, ties to even) and e >= 0. Zero gives (0, 0).
pub(crate) fn to_f64_parts(words: &[u32]) -> (f64, i32) {
    let Some(&top) = words.last() else {
        return (0.0, 0);
    };
    let total_bits = words.len() as u32 * 32 - top.leading_zeros();
    if total_bits <= 64 {
        let mut v = 0u64;
        for (i, &w) in words.iter().enumerate() {
            v |= (w as u64) << (32 * i);
        }
        return (v as f64, 0);
    }
    // Take the 64 bits below the top bit (inclusive) and fold the rest into
    // a sticky bit: with 11 bits below the 53-bit mantissa, the u64 -> f64
    // conversion then rounds exactly as the full number would.
    let shift = total_bits - 64;
    let bit = |k: u32| -> u64 { ((words[(k / 32) as usize] >> (k % 32)) & 1) as u64 };
    let mut window = 0u64;
    for k in 0..64 {
        window |= bit(shift + k) << k;
    }
    let word_shift = (shift / 32) as usize;
    let sticky = words[..word_shift].iter().any(|&w| w != 0)
        || (shift % 32 != 0 && words[word_shift] & ((1u32 << (shift % 32)) - 1) != 0);
    (((window | sticky as u64) as f64), shift as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// quotient_to_f64 of a · 2^1074 by d is the IEEE quotient of the two
    /// exact doubles a and d (one correct rounding each way), and below
    /// 2^-1022 it rounds to the nearest unit, ties to even.
    #[test]
    fn quotients_are_correctly_rounded() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for i in 0..20_000 {
            let a = next() >> (11 + i % 40);
            let d = (next() >> (11 + (i / 7) % 52)).max(1);
            let scaled = shift_left(&from_u64(a), 1074);
            let want = a as f64 / d as f64;
            assert_eq!(
                quotient_to_f64(&scaled, d).to_bits(),
                want.to_bits(),
                "{a}/{d}"
            );
        }
        // Subnormal quotients, in units of 2^-1074: 2/3 -> 1, 1/2 -> 0
        // (tie to even), 3/2 -> 2, 5/2 -> 2, 7/2 -> 4, 0 -> 0.
        for (a, d, units) in [
            (2u64, 3u64, 1u64),
            (1, 2, 0),
            (3, 2, 2),
            (5, 2, 2),
            (7, 2, 4),
            (0, 5, 0),
        ] {
            let got = quotient_to_f64(&from_u64(a), d);
            assert_eq!(got.to_bits(), units, "{a}/{d}");
        }
        // Just below and at 2^-1022 (2^52 units).
        let edge = (1u64 << 52) * 3 - 1;
        assert_eq!(quotient_to_f64(&from_u64(edge), 3).to_bits(), 1u64 << 52);
    }

    fn value_of(parts: (f64, i32), unit: i32) -> f64 {
        libm::scalbn(parts.0, parts.1 + unit)
    }

    #[test]
    fn single_values_round_trip() {
        for &x in &[
            1.0,
            -1.0,
            0.1,
            -3.5e300,
            f64::MAX,
            -f64::MAX,
            f64::MIN_POSITIVE,
            5e-324,
            -5e-324,
            123456.789,
        ] {
            let mut s = Limbs::<SUM_LIMBS>::default();
            let (neg, m, pos) = decompose(x);
            s.add_mantissa(neg, m, pos);
            s.normalize();
            let (negative, mag) = s.to_magnitude();
            let y = value_of(to_f64_parts(&mag), SUM_EXP);
            assert_eq!(if negative { -y } else { y }, x, "{x}");
            let mut q = Limbs::<SQ_LIMBS>::default();
            q.add_square(m, pos);
            q.normalize();
            let (negative, mag) = q.to_magnitude();
            assert!(!negative);
            let sq = value_of(to_f64_parts(&mag), SQ_EXP);
            assert_eq!(sq, x * x, "{x}");
        }
    }

    #[test]
    fn cancellation_is_exact() {
        let mut s = Limbs::<SUM_LIMBS>::default();
        for &x in &[1e300, 1.0, -1e300, 1e-300, -1.0] {
            let (neg, m, pos) = decompose(x);
            s.add_mantissa(neg, m, pos);
        }
        s.normalize();
        let (negative, mag) = s.to_magnitude();
        assert!(!negative);
        assert_eq!(value_of(to_f64_parts(&mag), SUM_EXP), 1e-300);
    }

    #[test]
    fn rounding_is_to_nearest_even() {
        // 2^53 + 1 is a tie between 2^53 and 2^53 + 2: even is 2^53.
        let mut s = Limbs::<SUM_LIMBS>::default();
        for &x in &[9007199254740992.0, 1.0] {
            let (neg, m, pos) = decompose(x);
            s.add_mantissa(neg, m, pos);
        }
        s.normalize();
        let (_, mag) = s.to_magnitude();
        assert_eq!(value_of(to_f64_parts(&mag), SUM_EXP), 9007199254740992.0);
        // Add a tiny amount: no longer a tie, rounds up.
        let (neg, m, pos) = decompose(1e-300);
        s.add_mantissa(neg, m, pos);
        s.normalize();
        let (_, mag) = s.to_magnitude();
        assert_eq!(value_of(to_f64_parts(&mag), SUM_EXP), 9007199254740994.0);
    }

    #[test]
    fn merge_equals_sequential_and_is_canonical() {
        let xs = [3.25, -7.5e10, 1e-200, 2.0, -2.0, 6.02e23];
        let mut all = Limbs::<SUM_LIMBS>::default();
        let mut a = Limbs::<SUM_LIMBS>::default();
        let mut b = Limbs::<SUM_LIMBS>::default();
        for (i, &x) in xs.iter().enumerate() {
            let (neg, m, pos) = decompose(x);
            all.add_mantissa(neg, m, pos);
            if i % 2 == 0 {
                a.add_mantissa(neg, m, pos)
            } else {
                b.add_mantissa(neg, m, pos)
            }
        }
        all.normalize();
        b.merge(&a);
        assert_eq!(all, b);
        let (off, limbs) = all.to_sparse();
        assert_eq!(Limbs::<SUM_LIMBS>::from_sparse(off, &limbs).unwrap(), all);
    }

    #[test]
    fn big_integer_helpers() {
        let a = from_u64(u64::MAX);
        let sq = mul(&a, &a); // (2^64-1)^2 = 2^128 - 2^65 + 1
        assert_eq!(sq, vec![1, 0, 0xffff_fffe, 0xffff_ffff]);
        let d = sub(&sq, &from_u64(1));
        assert_eq!(d, vec![0, 0, 0xffff_fffe, 0xffff_ffff]);
        assert_eq!(cmp(&d, &sq), core::cmp::Ordering::Less);
        let (m, e) = to_f64_parts(&sq);
        assert_eq!(libm::scalbn(m, e), (u64::MAX as f64) * (u64::MAX as f64));
    }
}
