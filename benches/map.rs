//! Criterion benchmark of the server map (issue 11: 10^6 noisy locations
//! into a 61 × 61 map in at most 2 s): parse the JSON report lines, bin
//! them into exact integer counts, FFT, and apply the kernel with standard
//! errors. The whole-process timing from a file is in BENCHMARKS.md.
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use geopriv::map::{
    ingest_map_reports_once, ingest_map_reports_parallel, ingest_map_stream_once, EmDeconvolution,
    EmOptions, KdeGrid, MapAggregator, MapMechanism, MapRelease, MapReport, QuerySet,
};
use geopriv::server::ingest::{Dedup, FormatChoice, IdShards, RecordReader};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn bench_map(c: &mut Criterion) {
    let grid = KdeGrid::square(20_000.0, 61).unwrap();
    let eps = 1.0 / grid.bandwidth(); // εh = 1
    let set = QuerySet::Kde(grid);
    let rel = MapRelease::new(set.clone(), MapMechanism::APriori, eps).unwrap();
    let mut rng = SmallRng::seed_from_u64(1);
    let n = 1_000_000;
    let lines: Vec<String> = (0..n)
        .map(|_| {
            let x = [
                rng.random::<f64>() * 20_000.0,
                rng.random::<f64>() * 20_000.0,
            ];
            serde_json::to_string(&rel.release_unmetered(&x, &mut rng).unwrap()).unwrap()
        })
        .collect();
    let mut group = c.benchmark_group("map");
    group.sample_size(10);
    group.bench_function("server_map_1e6_reports_61x61_eps_h_1", |b| {
        b.iter(|| {
            let mut agg = MapAggregator::new(set.clone(), MapMechanism::APriori, eps).unwrap();
            for l in &lines {
                let r: MapReport = serde_json::from_str(l).unwrap();
                agg.add(&r).unwrap();
            }
            black_box(agg.estimate(Some(1.0)).unwrap())
        })
    });
    group.finish();
}

/// 10^6 JSON report lines of the benches' clustered population (12
/// clusters and a uniform seventh) at per-device ε.
fn clustered_reports(set: &QuerySet, eps: f64) -> Vec<u8> {
    let rel = MapRelease::new(set.clone(), MapMechanism::APriori, eps).unwrap();
    let mut rng = SmallRng::seed_from_u64(2);
    let centres: Vec<[f64; 2]> = (0..12)
        .map(|_| {
            [
                2e3 + rng.random::<f64>() * 16e3,
                2e3 + rng.random::<f64>() * 16e3,
            ]
        })
        .collect();
    let mut bytes = Vec::new();
    for i in 0..1_000_000usize {
        let x = if i % 7 == 0 {
            [rng.random::<f64>() * 20e3, rng.random::<f64>() * 20e3]
        } else {
            let c = centres[i % 12];
            let s = 300.0 + 150.0 * (i % 12) as f64;
            [
                (c[0] + s * (rng.random::<f64>() - 0.5) * 3.4).clamp(0.0, 20e3),
                (c[1] + s * (rng.random::<f64>() - 0.5) * 3.4).clamp(0.0, 20e3),
            ]
        };
        let r = rel.release_unmetered(&x, &mut rng).unwrap();
        bytes.extend_from_slice(serde_json::to_string(&r).unwrap().as_bytes());
        bytes.push(b'\n');
    }
    bytes
}

/// EM's stage alone (issue 22 item 4, branch emspeed): the held-out
/// folds, the fit, the pilot and the bootstrap (`EmDeconvolution::estimate`
/// with the default options) on the binned counts of 10^6 clustered
/// reports, 61 × 61, at εh = 0.1, 0.3, 1 (where EM's CPU matters).
fn bench_em(c: &mut Criterion) {
    let grid = KdeGrid::square(20_000.0, 61).unwrap();
    let h = grid.bandwidth();
    let set = QuerySet::Kde(grid.clone());
    let mut group = c.benchmark_group("map_em");
    group.sample_size(10);
    for eh in [0.1, 0.3, 1.0] {
        let eps = eh / h;
        let bytes = clustered_reports(&set, eps);
        let mut agg = MapAggregator::new(set.clone(), MapMechanism::APriori, eps).unwrap();
        let mut reader = RecordReader::new(&bytes[..], FormatChoice::Json, 1 << 16).unwrap();
        ingest_map_reports_parallel(&mut agg, None, &mut reader, 2, |_, _, _| {}).unwrap();
        let mapper = agg.mapper().unwrap().unwrap();
        group.bench_function(format!("em_estimate_1e6_61x61_eps_h_{eh}"), |b| {
            b.iter(|| {
                let em = EmDeconvolution::new(&grid, eps, mapper.counts(), EmOptions::default())
                    .unwrap();
                black_box(em.estimate().unwrap())
            })
        });
    }
    group.finish();
}

/// Attack6 O1 (branch emcost, docs/MATH.md §9.6): EM on 1,000 reports of
/// one point, 61 × 61 over the city's 20 km square, at εh = 10 (the work
/// cap binds: t* <= 18; main ran to t* = 164, 10.5 s of CPU) and εh = 1.
fn bench_em_coincident(c: &mut Criterion) {
    let grid = KdeGrid::with_cell_diagonal([0.0, 20_000.0, 0.0, 20_000.0], [61, 61]).unwrap();
    let h = grid.bandwidth();
    let set = QuerySet::Kde(grid.clone());
    let mut group = c.benchmark_group("map_em_coincident");
    group.sample_size(10);
    for eh in [1.0, 10.0] {
        let eps = eh / h;
        let rel = MapRelease::new(set.clone(), MapMechanism::APriori, eps).unwrap();
        let mut rng = SmallRng::seed_from_u64(5);
        let mut agg = MapAggregator::new(set.clone(), MapMechanism::APriori, eps).unwrap();
        for _ in 0..1_000 {
            agg.add(
                &rel.release_unmetered(&[5_000.0, 5_000.0], &mut rng)
                    .unwrap(),
            )
            .unwrap();
        }
        let counts = agg.counts().unwrap();
        group.bench_function(format!("em_estimate_1000_at_one_point_eps_h_{eh}"), |b| {
            b.iter(|| {
                let em = EmDeconvolution::new(&grid, eps, counts, EmOptions::default()).unwrap();
                black_box(em.estimate().unwrap())
            })
        });
    }
    group.finish();
}

/// Issue 22 item 4: the server default (the planner, EM included) from
/// JSON bytes, reading and binning on every core: 10^6 reports of a
/// clustered population into 61 × 61 at εh = 0.1, 0.3, 1, 10, 1000.
fn bench_planned(c: &mut Criterion) {
    let grid = KdeGrid::square(20_000.0, 61).unwrap();
    let h = grid.bandwidth();
    let set = QuerySet::Kde(grid);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut group = c.benchmark_group("map_planned");
    group.sample_size(10);
    for eh in [0.1, 0.3, 1.0, 10.0, 1000.0] {
        let eps = eh / h;
        let bytes = clustered_reports(&set, eps);
        group.bench_function(format!("planned_1e6_61x61_eps_h_{eh}"), |b| {
            b.iter(|| {
                let mut agg = MapAggregator::new(set.clone(), MapMechanism::APriori, eps).unwrap();
                let mut reader =
                    RecordReader::new(&bytes[..], FormatChoice::Json, 1 << 16).unwrap();
                ingest_map_reports_parallel(&mut agg, None, &mut reader, threads, |_, _, _| {})
                    .unwrap();
                black_box(agg.planned_estimate().unwrap())
            })
        });
    }
    group.finish();
}

/// Reading and binning alone (issue 22 item 4, branch mapspeed2): 10^6
/// noise-a-priori JSON lines as the devices write them (with report ids),
/// on 1 and 2 threads, through the fast path of the canonical layout.
fn bench_read(c: &mut Criterion) {
    let grid = KdeGrid::square(20_000.0, 61).unwrap();
    let eps = 1.0 / grid.bandwidth();
    let set = QuerySet::Kde(grid);
    let rel = MapRelease::new(set.clone(), MapMechanism::APriori, eps).unwrap();
    let mut rng = SmallRng::seed_from_u64(3);
    let mut bytes = Vec::new();
    for _ in 0..1_000_000 {
        let x = [
            rng.random::<f64>() * 20_000.0,
            rng.random::<f64>() * 20_000.0,
        ];
        let r = rel.release_unmetered(&x, &mut rng).unwrap();
        let r = r.with_random_id(&mut rng);
        bytes.extend_from_slice(serde_json::to_string(&r).unwrap().as_bytes());
        bytes.push(b'\n');
    }
    let mut group = c.benchmark_group("map_read");
    group.sample_size(10);
    for threads in [1, 2] {
        group.bench_function(format!("read_bin_1e6_threads_{threads}"), |b| {
            b.iter(|| {
                let mut agg = MapAggregator::new(set.clone(), MapMechanism::APriori, eps).unwrap();
                let mut reader =
                    RecordReader::new(&bytes[..], FormatChoice::Json, 1 << 16).unwrap();
                black_box(
                    ingest_map_reports_parallel(&mut agg, None, &mut reader, threads, |_, _, _| {})
                        .unwrap(),
                )
            })
        });
    }
    // Each report_id once (issue 22 item 4, branch speed06): decided on
    // the workers by id shard (`map aggregate`'s reader), against every id
    // decided on the reading thread (branch mapids; a `Dedup` that already
    // holds an id takes that path).
    for threads in [1, 2] {
        group.bench_function(format!("read_bin_ids_1e6_threads_{threads}"), |b| {
            b.iter(|| {
                let mut agg = MapAggregator::new(set.clone(), MapMechanism::APriori, eps).unwrap();
                let mut reader =
                    RecordReader::new(&bytes[..], FormatChoice::Json, 1 << 16).unwrap();
                let mut dedup = Dedup::new(1 << 20);
                black_box(
                    ingest_map_stream_once(
                        &mut agg,
                        None,
                        &mut reader,
                        threads,
                        &mut dedup,
                        |_, _, _| {},
                    )
                    .unwrap(),
                )
            })
        });
    }
    group.bench_function("read_bin_ids_1e6_threads_2_on_reading_thread", |b| {
        b.iter(|| {
            let mut agg = MapAggregator::new(set.clone(), MapMechanism::APriori, eps).unwrap();
            let mut reader = RecordReader::new(&bytes[..], FormatChoice::Json, 1 << 16).unwrap();
            let mut dedup = Dedup::new(1 << 20);
            dedup.accepted(Some(&geopriv::ReportId([0xff; 16])));
            black_box(
                ingest_map_reports_once(&mut agg, None, &mut reader, 2, &mut dedup, |_, _, _| {})
                    .unwrap(),
            )
        })
    });
    group.finish();
}

/// The kernel-map stage alone (issue 22 item 4, branch kspeed): one map
/// with its standard errors ([`FftMapper::estimate`]: 8 two-dimensional
/// FFTs) at the FFT lengths of the 61 × 61 grid at εh = 0.3 (864²) and 1
/// (625²). The cost depends on the FFT length, not on n: 10^4 reports.
/// Beside it the planner from the counts, with the counts' FFT made
/// before EM starts and beside it (branch speed04).
fn bench_kernel_map(c: &mut Criterion) {
    let grid = KdeGrid::square(20_000.0, 61).unwrap();
    let h = grid.bandwidth();
    let set = QuerySet::Kde(grid);
    let mut group = c.benchmark_group("map_kernel");
    group.sample_size(10);
    for eh in [0.3, 1.0] {
        let eps = eh / h;
        let rel = MapRelease::new(set.clone(), MapMechanism::APriori, eps).unwrap();
        let mut rng = SmallRng::seed_from_u64(4);
        let mut agg = MapAggregator::new(set.clone(), MapMechanism::APriori, eps).unwrap();
        for _ in 0..10_000 {
            let x = [
                rng.random::<f64>() * 20_000.0,
                rng.random::<f64>() * 20_000.0,
            ];
            agg.add(&rel.release_unmetered(&x, &mut rng).unwrap())
                .unwrap();
        }
        let mapper = agg.mapper().unwrap().unwrap();
        let k = agg.kernel(0.6).unwrap();
        let [n0, n1] = mapper.fft_len();
        group.bench_function(format!("estimate_fft_{n0}x{n1}_eps_h_{eh}"), |b| {
            b.iter(|| black_box(mapper.estimate(&k).unwrap()))
        });
        // The planner from the counts (branch speed04): the counts' FFT
        // made first, then the plan (EM's thread waiting for it), against
        // EM started on the counts while the FFT is made.
        group.bench_function(format!("plan_after_fft_{n0}x{n1}_eps_h_{eh}"), |b| {
            b.iter(|| {
                let m = agg.mapper().unwrap().unwrap();
                black_box(agg.planned_estimate_with(&m).unwrap())
            })
        });
        group.bench_function(format!("plan_beside_fft_{n0}x{n1}_eps_h_{eh}"), |b| {
            b.iter(|| black_box(agg.planned_estimate_and_mapper().unwrap()))
        });
    }
    group.finish();
}

/// The id shards alone (issue 22 item 4, branch speed07): 10^6 distinct
/// random report ids in batches of 6,000 (about a 1 MiB batch of map
/// reports), every one marked accepted, on one thread and 8 shards (2
/// workers' worth), tables reserved for 2^20 ids as `map aggregate` does:
/// the hash, the table probes and the inserts of the once-per-id rule.
fn bench_id_shards(c: &mut Criterion) {
    let mut rng = SmallRng::seed_from_u64(5);
    let ids: Vec<[u8; 16]> = (0..1_000_000).map(|_| rng.random()).collect();
    let mut group = c.benchmark_group("map_read");
    group.sample_size(10);
    group.bench_function("id_shards_1e6_distinct_ids", |b| {
        b.iter(|| {
            let sh = IdShards::new(u64::MAX, 2);
            sh.reserve(1 << 20);
            let mut todo = Vec::new();
            for (seq, batch) in ids.chunks(6_000).enumerate() {
                todo.clear();
                todo.extend(
                    batch
                        .iter()
                        .enumerate()
                        .map(|(i, id)| (i, sh.key_of(id), *id)),
                );
                assert!(sh.decide_in_turn(seq as u64, &mut todo, |_, m| {
                    m.is_none().then_some(true)
                }));
            }
            black_box(sh.take_accepted().len())
        })
    });
    group.finish();
}

criterion_group!(
    benches,
    bench_map,
    bench_planned,
    bench_read,
    bench_id_shards,
    bench_em,
    bench_em_coincident,
    bench_kernel_map
);
criterion_main!(benches);
