//! Generators for the metered release paths, and whether their reports
//! are marked `seeded`.

use rand::RngCore;

/// A noise generator that says whether it is *seeded* (reproducible from a
/// seed, hence not secure: whoever knows the seed can subtract the noise).
/// The metered release paths take one and write the answer into the
/// report's `seeded` flag, which servers refuse unless told otherwise.
///
/// Implemented for [`SecureRng`](crate::SecureRng) (not seeded),
/// `rand::rngs::StdRng` (seeded: it cannot tell how it was keyed, so it is
/// conservatively treated as seeded), [`Seeded`] (any generator, marked
/// seeded) and [`DeclaredSecure`] (any generator the caller vouches for).
///
/// ```
/// use geopriv::device::budget::{NoiseRng, Seeded};
/// use rand::SeedableRng;
/// assert!(rand::rngs::StdRng::seed_from_u64(1).is_seeded());
/// assert!(!geopriv::SecureRng::new().is_seeded());
/// assert!(Seeded(rand::rngs::StdRng::seed_from_u64(1)).is_seeded());
/// ```
pub trait NoiseRng: RngCore {
    /// Whether the output is reproducible from a seed.
    fn is_seeded(&self) -> bool;
}

#[cfg(feature = "std")]
impl NoiseRng for crate::SecureRng {
    fn is_seeded(&self) -> bool {
        false
    }
}

#[cfg(feature = "std")]
impl NoiseRng for rand::rngs::StdRng {
    fn is_seeded(&self) -> bool {
        true
    }
}

impl<R: NoiseRng + ?Sized> NoiseRng for &mut R {
    fn is_seeded(&self) -> bool {
        (**self).is_seeded()
    }
}

/// Any generator, marked seeded: its reports say `"seeded":true`.
#[derive(Clone, Debug)]
pub struct Seeded<R>(pub R);

/// A generator the caller vouches is cryptographically secure and keyed
/// from fresh entropy (e.g. a hardware-seeded ChaCha on a `no_std` device
/// without [`SecureRng`](crate::SecureRng)). Its reports are not marked
/// seeded; wrapping a seeded generator in it mislabels the reports.
#[derive(Clone, Debug)]
pub struct DeclaredSecure<R>(pub R);

macro_rules! forward_rng {
    ($wrapper:ident, $seeded:expr) => {
        impl<R: RngCore> RngCore for $wrapper<R> {
            fn next_u32(&mut self) -> u32 {
                self.0.next_u32()
            }
            fn next_u64(&mut self) -> u64 {
                self.0.next_u64()
            }
            fn fill_bytes(&mut self, dest: &mut [u8]) {
                self.0.fill_bytes(dest)
            }
        }
        impl<R: RngCore> NoiseRng for $wrapper<R> {
            fn is_seeded(&self) -> bool {
                $seeded
            }
        }
    };
}

forward_rng!(Seeded, true);
forward_rng!(DeclaredSecure, false);
