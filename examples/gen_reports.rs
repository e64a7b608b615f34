//! Write a synthetic report stream for throughput and memory measurements
//! of `geopriv aggregate` (BENCHMARKS.md):
//!
//! `cargo run --release --example gen_reports -- N QUERIES json|binary > file`
//!
//! N reports round-robin over QUERIES threshold queries, PolyPlace values
//! drawn from a seeded generator (the value distribution does not matter
//! for throughput; the encodings are the real ones).

use geopriv::{MechanismName, QueryDescriptor, Report};
use rand::{Rng, SeedableRng};
use std::io::{BufWriter, Write};

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: gen_reports N QUERIES json|binary";
    let n: u64 = args.get(1).and_then(|s| s.parse().ok()).expect(usage);
    let queries: u64 = args.get(2).and_then(|s| s.parse().ok()).expect(usage);
    let binary = match args.get(3).map(String::as_str) {
        Some("binary") => true,
        Some("json") => false,
        _ => panic!("{usage}"),
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut out = BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
    for i in 0..n {
        let q = QueryDescriptor::Threshold {
            threshold: 10_000.0 + 1_000.0 * (i % queries.max(1)) as f64,
            width: 20_000.0,
        };
        let value = rng.random::<f64>() * 40.0 - 19.5;
        let r = Report::new(q, MechanismName::Polyplace, 1e-4, 0.0, value);
        if binary {
            r.write_frame(&mut out)?;
        } else {
            r.write_json_line(&mut out)?;
        }
    }
    out.flush()
}
