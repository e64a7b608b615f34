//! Write a synthetic report stream for throughput and memory measurements
//! of `geopriv aggregate` (BENCHMARKS.md):
//!
//! `cargo run --release --example gen_reports -- N QUERIES json|binary|json-ids > file`
//!
//! N reports round-robin over QUERIES threshold queries, PolyPlace values
//! drawn from a seeded generator (the value distribution does not matter
//! for throughput; the encodings are the real ones). `json-ids`: JSON lines
//! that each carry a `report_id` (as `geopriv privatize` writes them), a
//! fresh random one except that every 100th report repeats the id of the
//! report 50 lines before it (a retransmission, dropped as a duplicate).

use geopriv::{MechanismName, QueryDescriptor, Report, ReportId};
use rand::{Rng, SeedableRng};
use std::io::{BufWriter, Write};

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: gen_reports N QUERIES json|binary|json-ids";
    let n: u64 = args.get(1).and_then(|s| s.parse().ok()).expect(usage);
    let queries: u64 = args.get(2).and_then(|s| s.parse().ok()).expect(usage);
    let (binary, ids) = match args.get(3).map(String::as_str) {
        Some("binary") => (true, false),
        Some("json") => (false, false),
        Some("json-ids") => (false, true),
        _ => panic!("{usage}"),
    };
    let mut recent = [[0u8; 16]; 50];
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut out = BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
    for i in 0..n {
        let q = QueryDescriptor::Threshold {
            threshold: 10_000.0 + 1_000.0 * (i % queries.max(1)) as f64,
            width: 20_000.0,
        };
        let value = rng.random::<f64>() * 40.0 - 19.5;
        let mut r = Report::new(q, MechanismName::Polyplace, 1e-4, 0.0, value);
        if ids {
            let slot = (i % 50) as usize;
            if i % 100 != 99 {
                recent[slot] = rng.random();
            }
            r = r.with_report_id(ReportId(recent[slot]));
        }
        if binary {
            r.write_frame(&mut out)?;
        } else {
            r.write_json_line(&mut out)?;
        }
    }
    out.flush()
}
