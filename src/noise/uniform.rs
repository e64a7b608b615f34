//! A uniform on (0, 1] with full floating-point resolution near 0
//! (docs/MATH.md §8.1).
//!
//! The usual `k / 2^53` uniform has absolute resolution 2^-53 everywhere, so
//! near 0 it is coarse in relative terms: U < 2^-21 takes only 2^32
//! values, and a transform such as Z = -ln U is then spaced wider than the
//! release grid in the tail. That is how round-1 releases became
//! distinguishable (docs/MATH.md §8.1). The uniform here resolves every
//! binade [2^-(e+1), 2^-e] with a full 52-bit mantissa:
//!
//! ```text
//! e ~ Geometric(1/2) on {0, 1, ..., 1021}   (P(e) = 2^-(e+1); e = number of leading zero bits)
//! M ~ uniform on {0, ..., 2^52 - 1}
//! U = 2^-(e+1) · (1 + (M + 1) · 2^-52)      in (2^-(e+1), 2^-e]
//! ```
//!
//! Each attainable value u has probability exactly equal to the gap below
//! it, u - prev(u): U is the uniform on (0, 1] rounded *up* to the floating
//! point grid, and P(U <= u) = u for every attainable u. The only
//! departure from the continuous uniform is this rounding (relative size
//! 2^-52) and the binades below 2^-1022, which get the mass 2^-1022 of
//! their union folded into the last binade (`e = 1021`).
//!
//! The sampler is a deterministic, monotone function of an integer key
//! (see [`uniform_from_key`] and [`key_mass`]), which is what the exact
//! enumeration of `audit::enumeration` counts. One 64-bit draw gives the
//! sign bit, the mantissa and (with probability 1 - 2^-11) the exponent.

use rand::RngCore;

/// Largest binade index e (U >= 2^-1022, a normal float).
pub const MAX_BINADE: u64 = 1021;
/// Number of integer keys of the full-resolution uniform:
/// (MAX_BINADE + 1) binades of 2^52 mantissas.
pub const KEY_COUNT: u64 = (MAX_BINADE + 1) << 52;
const MANTISSA_MASK: u64 = (1u64 << 52) - 1;

/// One draw of the key: an integer in [0, [`KEY_COUNT`]) with the law
/// [`key_probability`], and an independent fair sign bit (`true` =
/// negative). Every uniform the samplers use is
/// [`uniform_from_key`] of this key, so the exact enumeration, which
/// counts keys through [`uniform_from_key`] and [`key_mass`], sees the
/// sampler that runs (docs/MATH.md §8.1, "The draw is the enumerated
/// map"); `draw_matches_the_key_law` in this file's tests checks the law
/// of the key itself.
///
/// ```
/// use geopriv::noise::uniform::{draw_key, uniform_from_key, full_resolution_uniform_and_sign};
/// use rand::SeedableRng;
/// let mut a = rand::rngs::StdRng::seed_from_u64(1);
/// let mut b = a.clone();
/// let (key, negative) = draw_key(&mut a);
/// assert_eq!(full_resolution_uniform_and_sign(&mut b), (uniform_from_key(key), negative));
/// ```
#[inline]
pub fn draw_key<R: RngCore + ?Sized>(rng: &mut R) -> (u64, bool) {
    let v = rng.next_u64();
    let negative = v & 1 == 1;
    let mantissa = (v >> 1) & MANTISSA_MASK;
    // The top 11 bits give the exponent when one of them is set.
    let top = v >> 53;
    let binade = if top != 0 {
        u64::from(top.leading_zeros()) - 53
    } else {
        let mut e = 11u64;
        loop {
            let w = rng.next_u64();
            if w != 0 {
                e += u64::from(w.leading_zeros());
                break;
            }
            e += 64;
            if e >= MAX_BINADE {
                break;
            }
        }
        e.min(MAX_BINADE)
    };
    (((MAX_BINADE - binade) << 52) | mantissa, negative)
}

/// One draw: a full-resolution uniform in (0, 1] and an independent fair
/// sign bit (`true` = negative): [`uniform_from_key`] of [`draw_key`].
///
/// ```
/// use geopriv::noise::uniform::full_resolution_uniform_and_sign;
/// use rand::SeedableRng;
/// let mut rng = rand::rngs::StdRng::seed_from_u64(1);
/// let (u, _negative) = full_resolution_uniform_and_sign(&mut rng);
/// assert!(u > 0.0 && u <= 1.0);
/// ```
#[inline]
pub fn full_resolution_uniform_and_sign<R: RngCore + ?Sized>(rng: &mut R) -> (f64, bool) {
    let (key, negative) = draw_key(rng);
    (uniform_from_key(key), negative)
}

/// The key of an attainable value u of the uniform (the inverse of
/// [`uniform_from_key`]), or `None` if u is not attainable (not in
/// (2^-1022, 1], or not one of the values the keys map to).
///
/// ```
/// use geopriv::noise::uniform::{key_of_uniform, uniform_from_key};
/// assert_eq!(key_of_uniform(uniform_from_key(12345)), Some(12345));
/// assert_eq!(key_of_uniform(0.0), None);
/// ```
pub fn key_of_uniform(u: f64) -> Option<u64> {
    if !(u > 0.0 && u <= 1.0) {
        return None;
    }
    let bits = u.to_bits().checked_sub(1)?;
    let exponent = bits >> 52;
    if !(1..=1022).contains(&exponent) {
        return None;
    }
    let binade = 1022 - exponent;
    let key = ((MAX_BINADE.checked_sub(binade)?) << 52) | (bits & MANTISSA_MASK);
    (uniform_from_key(key) == u).then_some(key)
}

/// A full-resolution uniform in (0, 1] (the sign bit of the draw is
/// discarded).
#[inline]
pub fn full_resolution_uniform<R: RngCore + ?Sized>(rng: &mut R) -> f64 {
    full_resolution_uniform_and_sign(rng).0
}

/// 2^-(e+1) (1 + (M+1) 2^-52): the bit pattern of 2^-(e+1)(1 + M 2^-52)
/// plus one (which carries into the exponent when M = 2^52 - 1).
#[inline]
fn compose(binade: u64, mantissa: u64) -> f64 {
    f64::from_bits((((1022 - binade) << 52) | mantissa) + 1)
}

/// The uniform's value at integer key `key` in [0, [`KEY_COUNT`]); keys are
/// ordered by value (key 0 is the smallest value, 2^-1022 (1 + 2^-52)).
/// Keys outside the range are clamped.
///
/// ```
/// use geopriv::noise::uniform::{uniform_from_key, KEY_COUNT};
/// assert_eq!(uniform_from_key(KEY_COUNT - 1), 1.0);
/// assert!(uniform_from_key(0) < uniform_from_key(1));
/// ```
#[inline]
pub fn uniform_from_key(key: u64) -> f64 {
    let key = key.min(KEY_COUNT - 1);
    let binade = MAX_BINADE - (key >> 52);
    compose(binade, key & MANTISSA_MASK)
}

/// The probability of one key: 2^-(e+1) · 2^-52 in binade e.
#[inline]
pub fn key_probability(key: u64) -> f64 {
    let binade = MAX_BINADE - (key.min(KEY_COUNT - 1) >> 52);
    pow2(-(binade as i32) - 53)
}

/// The probability of the keys in [lo, hi), summed over the binades they
/// span (exact up to one rounding per binade).
pub fn key_mass(lo: u64, hi: u64) -> f64 {
    let hi = hi.min(KEY_COUNT);
    if lo >= hi {
        return 0.0;
    }
    let mut total = 0.0;
    let mut start = lo;
    while start < hi {
        let block = start >> 52;
        let end = hi.min((block + 1) << 52);
        total += (end - start) as f64 * key_probability(start);
        start = end;
    }
    total
}

/// 2^n for -1074 <= n <= 1023 (exact, no libm).
#[inline]
fn pow2(n: i32) -> f64 {
    if n >= -1022 {
        f64::from_bits(((n + 1023) as u64) << 52)
    } else {
        f64::from_bits(1u64 << (n + 1074))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn keys_are_monotone_and_cover_each_binade() {
        // Across a binade boundary the values keep increasing.
        for block in [0u64, 1, 500, MAX_BINADE - 1] {
            let k = ((block + 1) << 52) - 1;
            assert!(uniform_from_key(k) < uniform_from_key(k + 1));
            // The top key of a binade is exactly the power of two.
            let e = MAX_BINADE - block;
            assert_eq!(uniform_from_key(k), pow2(-(e as i32)));
        }
        assert_eq!(uniform_from_key(KEY_COUNT - 1), 1.0);
        assert_eq!(uniform_from_key(0), pow2(-1022) * (1.0 + f64::EPSILON));
    }

    #[test]
    fn every_value_has_the_probability_of_the_gap_below_it() {
        // P(U <= u) = u: the mass of keys [0, k] equals uniform_from_key(k).
        for k in [
            KEY_COUNT - 1,
            KEY_COUNT - 2,
            KEY_COUNT - (1 << 52),
            KEY_COUNT - (1 << 52) - 12345,
            KEY_COUNT - 40 * (1 << 52) + 7,
        ] {
            let u = uniform_from_key(k);
            let mass = key_mass(0, k + 1);
            assert!((mass - u).abs() <= 1e-15 * u, "{k}: {mass} vs {u}");
            // and the gap below u is exactly the key's probability
            let below = uniform_from_key(k - 1);
            assert_eq!(u - below, key_probability(k));
        }
        assert!((key_mass(0, KEY_COUNT) - 1.0).abs() < 1e-15);
    }

    #[test]
    fn draws_follow_the_uniform_law_including_deep_binades() {
        let mut rng = StdRng::seed_from_u64(3);
        let n = 400_000;
        let mut below = [0usize; 4];
        let cuts = [0.5, 0.1, 2f64.powi(-10), 2f64.powi(-14)];
        let mut sign = 0usize;
        for _ in 0..n {
            let (u, neg) = full_resolution_uniform_and_sign(&mut rng);
            assert!(u > 0.0 && u <= 1.0);
            sign += neg as usize;
            for (c, b) in cuts.iter().zip(below.iter_mut()) {
                *b += (u <= *c) as usize;
            }
        }
        for (c, b) in cuts.iter().zip(below) {
            let expected = c * n as f64;
            let sd = (expected * (1.0 - c)).sqrt().max(1.0);
            assert!((b as f64 - expected).abs() < 5.0 * sd, "{c}: {b}");
        }
        assert!((sign as f64 - n as f64 / 2.0).abs() < 5.0 * (n as f64 / 4.0).sqrt());
    }

    /// A generator that repeats one word.
    struct Constant(u64);
    impl RngCore for Constant {
        fn next_u32(&mut self) -> u32 {
            self.0 as u32
        }
        fn next_u64(&mut self) -> u64 {
            self.0
        }
        fn fill_bytes(&mut self, dst: &mut [u8]) {
            dst.fill(0);
        }
    }

    #[test]
    fn tiny_values_are_resolved_to_their_ulp() {
        // A generator whose first word has no top bits forces the extra
        // exponent draw; the value still carries a full mantissa.
        let mut rng = Constant(0x0000_0000_0000_0ffe);
        let (u, neg) = full_resolution_uniform_and_sign(&mut rng);
        // 11 zero bits, then the next word (same value) has 52 leading zeros:
        // e = 11 + 52 = 63, so u is in (2^-64, 2^-63].
        assert!(!neg);
        assert!(u > 2f64.powi(-64) && u <= 2f64.powi(-63), "{u}");
        assert_ne!(u, 2f64.powi(-63));
        // All-zero words end at the last binade, never at 0.
        let mut zero = Constant(0);
        let (u, _) = full_resolution_uniform_and_sign(&mut zero);
        assert!(u > 0.0 && u.is_normal() && u <= pow2(-1021));
    }
}
