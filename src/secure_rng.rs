//! The default, cryptographically secure generator.

use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};

/// A cryptographically secure generator seeded from the operating system:
/// rand's `StdRng` (ChaCha with 12 rounds) keyed with 32 bytes of OS
/// randomness. This is what the SDK uses unless the caller passes a seeded
/// generator for a reproducible experiment.
#[derive(Debug)]
pub struct SecureRng(StdRng);

impl SecureRng {
    /// A fresh generator keyed from the operating system's randomness.
    pub fn new() -> Self {
        Self(StdRng::from_os_rng())
    }
}

impl Default for SecureRng {
    fn default() -> Self {
        Self::new()
    }
}

impl RngCore for SecureRng {
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

impl rand::CryptoRng for SecureRng {}
