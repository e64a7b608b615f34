//! Noise distributions, one per file (SPEC §4).
