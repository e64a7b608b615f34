//! Stage timings of the planner default of `geopriv map aggregate`
//! (BENCHMARKS.md, "Branch mapspeed2"): `cargo run --release --example
//! map_stages -- <ε per metre> < reports.jsonl` on the 61 x 61 grid of the
//! synthetic city. Prints the CPU-heavy stages one after the other, each
//! timed alone (wall, single process).
use geopriv::map::{
    ingest_map_reports_parallel, EmDeconvolution, EmOptions, KdeGrid, MapAggregator, MapMechanism,
    QuerySet,
};
use geopriv::server::ingest::{FormatChoice, RecordReader};
use std::time::Instant;

fn main() {
    // The per-device ε per metre the reports were made at (εh / h).
    let eps: f64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1e-3);
    // The CLI's default: the 20 km square, 61 x 61, h one cell diagonal.
    let grid = KdeGrid::with_cell_diagonal([0.0, 20_000.0, 0.0, 20_000.0], [61, 61]).unwrap();

    let set = QuerySet::Kde(grid.clone());
    let t = Instant::now();
    let mut agg = MapAggregator::new(set.clone(), MapMechanism::APriori, eps).unwrap();
    let stdin = std::io::stdin();
    let mut reader = RecordReader::new(stdin.lock(), FormatChoice::Json, 1 << 16).unwrap();
    let counts = ingest_map_reports_parallel(&mut agg, None, &mut reader, 2, |_, _, _| {}).unwrap();
    eprintln!(
        "read {} reports: {:.3} s",
        counts.accepted,
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let mapper = agg.mapper().unwrap().unwrap();
    let spec = mapper.counts().spec();
    eprintln!(
        "mapper {:?} (bins {:?}, margin {}, refine {}; unguarded {:?}): {:.3} s",
        mapper.fft_len(),
        spec.bins(),
        spec.margin(),
        spec.refine(),
        geopriv::map::FftMapper::new(mapper.counts().clone())
            .unwrap()
            .fft_len(),
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let l1 = grid.l1_bound();
    eprintln!("l1 bound {l1:.4e}: {:.3} s", t.elapsed().as_secs_f64());
    let t = Instant::now();
    let em = EmDeconvolution::new(&grid, eps, mapper.counts(), EmOptions::default()).unwrap();
    let ts = em.stopping_iteration();
    eprintln!(
        "EM {em:?} t* = {ts}: held-out {:.3} s",
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let e = em.estimate_at(ts).unwrap();
    eprintln!(
        "EM fit + pilot + bootstrap: {:.3} s (ase {:.3e})",
        t.elapsed().as_secs_f64(),
        e.predicted_ase
    );
    let t = Instant::now();
    for lam in [0.0, 0.2, 0.4, 0.6, 0.8, 1.0] {
        let k = agg.kernel(lam).unwrap();
        let _ = mapper.estimate(&k).unwrap();
    }
    eprintln!(
        "6 kernel maps with variances: {:.3} s",
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let (_, p) = agg.planned_estimate_with(&mapper).unwrap();
    eprintln!(
        "planned_estimate_with: {:.3} s; {}",
        t.elapsed().as_secs_f64(),
        p.unwrap().line
    );
}
