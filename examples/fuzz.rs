//! Fuzz harness on stable Rust (no cargo-fuzz): random and structured
//! inputs for every report decoder, the server's record reader and
//! aggregator (what `geopriv aggregate` runs), the allow-list reader, the
//! query-id parser, every state restore path (Aggregator, GridAggregator,
//! as JSON and postcard; the privacy ledger: `PrivacyBudget::restore` and
//! `FileLedger::open` on a file of arbitrary bytes) and the map report
//! decoder with `MapAggregator::add`.
//!
//! `cargo run --release --example fuzz -- N [SEED]` runs N inputs and
//! prints the counts; a panic or a broken invariant aborts with the seed
//! and case. The invariant on streams: every record is counted exactly
//! once (records = accepted + rejected + skipped, records = the number of
//! records written), and no pristine report is ever rejected, whatever
//! garbage surrounds it. `tests/fuzz_smoke.rs` runs a short round in CI.
//! Ledger invariant: a restored state charges, serialises and restores to
//! itself; a refused charge changes nothing.

use geopriv::device::budget::{
    BudgetPolicy, BudgetUnit, Charge, FileLedger, Ledger, PrivacyBudget,
};
use geopriv::map::{
    ingest_map_reports, KdeGrid, MapAggregator, MapClip, MapMechanism, MapRelease, MapReport,
    QuerySet,
};
use geopriv::server::ingest::{
    decode_binary_record, decode_json_record, read_allow_list, AggregationConfig, Decoded,
    Estimator, FormatChoice, RecordReader, ReportAggregator,
};
use geopriv::{
    Aggregator, GridAggregator, MechanismName, QueryDescriptor, Report, ValidationPolicy,
};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::io::Read;

/// What a run did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stats {
    /// Inputs handed to a decoder, reader or restore path.
    pub inputs: u64,
    /// Of which decoded or restored successfully.
    pub accepted: u64,
    /// Stream records checked against the counting invariant.
    pub records: u64,
}

const FLOATS: [f64; 12] = [
    0.0,
    -0.0,
    1.0,
    -3.5,
    1e-300,
    5e-324,
    f64::MAX,
    -f64::MAX,
    f64::NAN,
    f64::INFINITY,
    100_000.0,
    0.05,
];

fn float(rng: &mut SmallRng) -> f64 {
    if rng.random_bool(0.5) {
        FLOATS[rng.random_range(0..FLOATS.len())]
    } else {
        f64::from_bits(rng.random())
    }
}

/// A random report, valid for the harness's policy when `pristine`.
fn report(rng: &mut SmallRng, pristine: bool) -> Report {
    let w = if pristine {
        rng.random_range(1.0..1e5)
    } else {
        float(rng)
    };
    let query = match rng.random_range(0..4) {
        0 => QueryDescriptor::Threshold {
            threshold: rng.random_range(-1e6..1e6),
            width: w,
        },
        1 => {
            let a = rng.random_range(-1e6..1e6);
            QueryDescriptor::Interval {
                lower: a,
                upper: a + 3.0 * w,
                width: w,
            }
        }
        2 => QueryDescriptor::TwoWay {
            thresholds: [rng.random_range(-1e6..1e6), rng.random_range(-1e6..1e6)],
            width: w,
        },
        _ => QueryDescriptor::Kde {
            center: (0..rng.random_range(1..4))
                .map(|_| rng.random_range(-1e6..1e6))
                .collect(),
            bandwidth: w,
        },
    };
    let mechanism = MechanismName::ALL[rng.random_range(0..6)];
    let delta = if mechanism.is_pure() { 0.0 } else { 1e-6 };
    if pristine {
        let value = if rng.random_bool(0.1) {
            f64::MAX * rng.random_range(-1.0..1.0)
        } else {
            rng.random_range(-50.0..50.0)
        };
        Report::new(query, mechanism, rng.random_range(1e-4..1.0), delta, value)
    } else {
        Report::new(query, mechanism, float(rng), float(rng), float(rng))
    }
}

fn policy() -> ValidationPolicy {
    ValidationPolicy::new(1.0, 1e-4).expect("valid policy")
}

fn mutate(rng: &mut SmallRng, bytes: &mut Vec<u8>) {
    for _ in 0..rng.random_range(1..4) {
        let len = bytes.len();
        match rng.random_range(0..7) {
            0 if len > 0 => {
                let i = rng.random_range(0..len);
                bytes[i] ^= 1 << rng.random_range(0..8);
            }
            1 if len > 0 => {
                let i = rng.random_range(0..len);
                bytes[i] = rng.random();
            }
            2 if len > 0 => bytes.truncate(rng.random_range(0..len)),
            3 => {
                let i = rng.random_range(0..=len);
                let b = [b'"', b'{', b'}', b'[', b',', b':', 0xff, 0xef, b'e', b'9'];
                bytes.insert(i, b[rng.random_range(0..b.len())]);
            }
            4 if len > 0 => {
                let i = rng.random_range(0..len);
                bytes.remove(i);
            }
            5 if len > 1 => {
                let i = rng.random_range(0..len);
                let j = rng.random_range(i..len);
                let piece = bytes[i..=j].to_vec();
                bytes.extend_from_slice(&piece);
            }
            _ => bytes.push(rng.random()),
        }
    }
}

fn random_bytes(rng: &mut SmallRng, max: usize) -> Vec<u8> {
    let n = rng.random_range(0..max);
    (0..n).map(|_| rng.random()).collect()
}

/// Every decoder on one input; none may panic.
fn decoders(bytes: &[u8], stats: &mut Stats) {
    let mut scratch = Vec::new();
    stats.inputs += 1;
    if let Ok(s) = std::str::from_utf8(bytes) {
        if let Ok(r) = Report::from_json(s) {
            stats.accepted += 1;
            let _ = policy().validate(&r);
            let _ = r.to_json_line();
        }
        let _ = s.parse::<QueryDescriptor>();
        let _ = s.parse::<MechanismName>();
    }
    if Report::from_bytes(bytes).is_ok() {
        stats.accepted += 1;
    }
    let _ = Report::from_frame(bytes);
    // The record decoder's fast path must agree with the serde decoder.
    if let Decoded::Report(fast) = decode_json_record(bytes) {
        let text = std::str::from_utf8(bytes).expect("accepted records are UTF-8");
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let slow = Report::from_json(text).expect("serde accepts what the fast path accepts");
        assert_eq!(fast, slow, "fast path and serde differ on {text}");
        assert_eq!(fast.value.to_bits(), slow.value.to_bits());
    }
    // The column decoder (header parse reused across records) must give
    // the plain decoder's result on every record, whatever came before.
    COLUMN.with(|c| {
        let column = c.borrow_mut().decode(bytes);
        assert_eq!(column, decode_json_record(bytes), "column decoder differs");
    });
    let stripped: Vec<u8> = bytes.iter().copied().filter(|&b| b != 0).collect();
    let _ = decode_binary_record(&stripped, true, &mut scratch);
    let _ = geopriv::report::frames(bytes).count();
}

std::thread_local! {
    /// One column decoder over the whole run: its header cache sees every
    /// input in turn (mutations of the same report share their headers).
    static COLUMN: std::cell::RefCell<geopriv::server::ingest::JsonColumnDecoder> =
        std::cell::RefCell::new(Default::default());
}

/// Restore paths on one input; a restored state must survive use.
fn restores(bytes: &[u8], stats: &mut Stats) {
    stats.inputs += 1;
    let mut states: Vec<Aggregator> = Vec::new();
    if let Ok(a) = serde_json::from_slice::<Aggregator>(bytes) {
        states.push(a);
    }
    if let Ok(a) = postcard::from_bytes::<Aggregator>(bytes) {
        states.push(a);
    }
    for mut a in states {
        stats.accepted += 1;
        let _ = a.estimate();
        let copy = a.clone();
        let n = a.n();
        if a.merge(&copy).is_err() {
            assert_eq!(a.n(), n, "a refused merge changed the state");
        }
        let before = a.n();
        if a.add(1.0).is_err() {
            assert_eq!(a.n(), before, "a refused add changed the state");
        }
        let _ = a.estimate();
    }
    if let Ok(mut g) = serde_json::from_slice::<GridAggregator>(bytes) {
        stats.accepted += 1;
        let copy = g.clone();
        let _ = g.merge(&copy);
        let _ = g.estimates();
    }
    let _ = read_allow_list(bytes, 1000);
}

/// A reader handing out the stream in random-sized pieces.
struct Chunked<'a> {
    data: &'a [u8],
    rng: SmallRng,
}

impl Read for Chunked<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        // Never 0 before the end: Ok(0) means end of input.
        let most = self.data.len().min(buf.len()).min(700);
        let n = if most == 0 {
            0
        } else {
            self.rng.random_range(1..=most)
        };
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

/// A stream of records with known kinds; checks the counting invariant.
fn stream(rng: &mut SmallRng, stats: &mut Stats) {
    let binary = rng.random_bool(0.5);
    let delim = if binary { 0u8 } else { b'\n' };
    let max_record = if rng.random_bool(0.3) { 64 } else { 4096 };
    let mut data = Vec::new();
    let mut pristine = Vec::new();
    let count = rng.random_range(1..40);
    for i in 0..count {
        // The first record is pristine so `auto` can decide.
        let kind = if i == 0 { 0 } else { rng.random_range(0..8) };
        let mut rec = match kind {
            0 | 1 => {
                let r = report(rng, true);
                if binary {
                    let mut f = r.to_frame();
                    f.pop();
                    f
                } else {
                    r.to_json_line().into_bytes()
                }
            }
            2 => {
                let pristine = rng.random_bool(0.5);
                let r = report(rng, pristine);
                let mut b = if binary {
                    let mut f = r.to_frame();
                    f.pop();
                    f
                } else {
                    r.to_json_line().into_bytes()
                };
                mutate(rng, &mut b);
                b
            }
            3 => random_bytes(rng, 300),
            4 if !binary => b"# header, comment".to_vec(),
            5 if !binary => b"\xEF\xBB\xBF".to_vec(),
            6 => vec![b'x'; rng.random_range(0..3 * max_record)],
            _ => Vec::new(),
        };
        rec.retain(|&b| b != delim);
        if !binary && kind <= 1 && rng.random_bool(0.2) {
            // BOM and CRLF around a good record must not cost it.
            let mut with = b"\xEF\xBB\xBF".to_vec();
            with.extend_from_slice(&rec);
            with.push(b'\r');
            rec = with;
        }
        let good = kind <= 1 && rec.len() <= max_record;
        if good {
            pristine.push(i as u64 + 1);
        }
        data.extend_from_slice(&rec);
        data.push(delim);
    }
    let records = count as u64;
    stats.inputs += records;
    stats.records += records;
    let choice = if rng.random_bool(0.5) {
        FormatChoice::Auto
    } else if binary {
        FormatChoice::Binary
    } else {
        FormatChoice::Json
    };
    let input = Chunked {
        data: &data,
        rng: SmallRng::seed_from_u64(rng.random()),
    };
    let mut reader =
        RecordReader::new(input, choice, max_record).expect("first record is pristine");
    let config = AggregationConfig {
        max_groups: 1 << 16,
        estimator: if rng.random_bool(0.3) {
            Estimator::MedianOfMeans { buckets: 3 }
        } else {
            Estimator::Mean
        },
        ..AggregationConfig::default()
    };
    let mut agg = ReportAggregator::new(policy(), config);
    let mut rejected = Vec::new();
    let counts = agg
        .ingest(&mut reader, |n, why| {
            let _ = why.to_string();
            rejected.push(n)
        })
        .expect("in-memory input");
    // `auto` decides each record by itself: a record of one format that
    // holds the other's delimiter is split there, so only the explicit
    // formats keep the writer's numbering.
    let auto = choice == FormatChoice::Auto;
    if !auto {
        assert_eq!(counts.records, records, "records counted");
    }
    assert_eq!(
        counts.accepted + counts.rejected + counts.skipped,
        counts.records,
        "every record counted exactly once"
    );
    if !auto {
        for p in &pristine {
            assert!(!rejected.contains(p), "pristine record {p} rejected");
        }
    }
    assert!(counts.accepted >= pristine.len() as u64);
    stats.accepted += counts.accepted;
    for e in agg.estimates() {
        if let Some(c) = e.clip {
            assert!(e.estimate.mean >= c.bounds[0] && e.estimate.mean <= c.bounds[1]);
        }
    }
}

/// A periodic policy (format 2: periods, memo keys, device secret).
fn ledger_policy() -> BudgetPolicy {
    BudgetPolicy::periodic(BudgetUnit::PerMetre, 0.005, 1e-6, 86_400, 0.01, 1e-6)
        .expect("valid policy")
}

/// The ledger's restore path on one input: a restored state must charge,
/// serialise and restore to itself; a refused charge changes nothing.
fn ledger(bytes: &[u8], file: Option<&std::path::Path>, stats: &mut Stats) {
    stats.inputs += 1;
    let policy = ledger_policy();
    let restored = match std::str::from_utf8(bytes) {
        Ok(s) => PrivacyBudget::restore(s, &policy).ok(),
        Err(_) => None,
    };
    if let Some(mut b) = restored {
        stats.accepted += 1;
        let again = PrivacyBudget::restore(&b.to_json(), &policy).expect("round trip");
        assert_eq!(again.to_json(), b.to_json(), "restore is not a fixed point");
        let charge = Charge::new(BudgetUnit::PerMetre, 1e-3, 1e-7).expect("valid charge");
        let before = b.to_json();
        if b.try_charge(&charge).is_err() {
            assert_eq!(b.to_json(), before, "a refused charge changed the ledger");
        } else {
            PrivacyBudget::restore(&b.to_json(), &policy).expect("a charged state restores");
        }
        let before = b.to_json();
        match b.commit_once([7; 32], &charge) {
            Ok(true) => {
                PrivacyBudget::restore(&b.to_json(), &policy).expect("a memo charge restores");
            }
            _ => assert_eq!(
                b.to_json(),
                before,
                "a refused or repeated memo charge changed the ledger"
            ),
        }
    }
    if let Some(path) = file {
        std::fs::write(path, bytes).expect("temp file");
        if let Ok(l) = FileLedger::open(path, &policy) {
            let _ = l.state().remaining();
        }
    }
}

/// Map aggregators for one small KDE set, one per mechanism.
fn map_servers() -> (Vec<MapRelease>, Vec<MapAggregator>) {
    let set = QuerySet::Kde(KdeGrid::square(20_000.0, 5).expect("valid grid"));
    let mut releases = Vec::new();
    let mut servers = Vec::new();
    for m in [
        MapMechanism::APriori,
        MapMechanism::Composition,
        MapMechanism::VectorLaplace,
        MapMechanism::Sampled { k: 3 },
    ] {
        releases.push(MapRelease::new(set.clone(), m, 1e-3).expect("valid release"));
        servers.push(MapAggregator::new(set.clone(), m, 1e-3).expect("valid server"));
    }
    (releases, servers)
}

/// The map report decoder and `MapAggregator::add` on one input: a
/// refused report changes nothing.
fn map_report(bytes: &[u8], servers: &mut [MapAggregator], stats: &mut Stats) {
    stats.inputs += 1;
    let Ok(r) = serde_json::from_slice::<MapReport>(bytes) else {
        return;
    };
    stats.accepted += 1;
    for s in servers.iter_mut() {
        let before = s.accepted();
        if s.add(&r).is_err() {
            assert_eq!(s.accepted(), before, "a refused map report was counted");
        }
    }
}

/// A stream of map reports for one mechanism through the hardened reader
/// (`ingest_map_reports`, issue 19 item 10): pristine reports interleaved
/// with mutated ones, random bytes, over-long records and forged values;
/// every pristine report is accepted, every record counted once, every
/// accepted value inside its cell's clipping bounds.
fn map_stream(
    rng: &mut SmallRng,
    releases: &[MapRelease],
    clips: &[Option<MapClip>],
    stats: &mut Stats,
) {
    let i = rng.random_range(0..releases.len());
    let rel = &releases[i];
    let (set, mech) = (rel.set().clone(), rel.mechanism());
    let clip = &clips[i];
    // Few bins: a noise-a-priori server allocates its bin grid up front.
    let mut agg = MapAggregator::with_max_bins(set, mech, 1e-3, 64).expect("valid server");
    let max_record = 4096;
    let mut data = Vec::new();
    let mut pristine = Vec::new();
    let count = rng.random_range(1..30);
    for n in 1..=count {
        let x = [rng.random_range(0.0..2e4), rng.random_range(0.0..2e4)];
        let r = rel.release_unmetered(&x, rng).expect("inside the box");
        let mut rec = serde_json::to_vec(&r).expect("serializable");
        match rng.random_range(0..6) {
            0 | 1 => pristine.push(n),
            2 => mutate(rng, &mut rec),
            3 => rec = random_bytes(rng, 200),
            4 => rec = vec![b'x'; rng.random_range(0..3 * max_record)],
            _ => {
                let mut f = r.clone();
                if let Some(v) = f.values.as_mut() {
                    v.iter_mut().for_each(|v| *v = float(rng));
                }
                rec = serde_json::to_vec(&f).unwrap_or_default();
            }
        }
        rec.retain(|&b| b != b'\n');
        if pristine.last() == Some(&n) && rec.len() > max_record {
            pristine.pop();
        }
        data.extend_from_slice(&rec);
        data.push(b'\n');
    }
    let input = Chunked {
        data: &data,
        rng: SmallRng::seed_from_u64(rng.random()),
    };
    let mut reader = RecordReader::new(input, FormatChoice::Json, max_record).expect("config");
    let mut rejected = Vec::new();
    let counts = ingest_map_reports(&mut agg, clip.as_ref(), &mut reader, |n, _, why| {
        assert!(!why.contains('\u{1b}'), "unescaped message");
        rejected.push(n)
    })
    .expect("in-memory input");
    assert_eq!(counts.records, count, "map records counted");
    assert_eq!(
        counts.accepted + counts.rejected + counts.skipped,
        counts.records
    );
    for p in &pristine {
        assert!(!rejected.contains(p), "pristine map record {p} rejected");
    }
    if let (Some(c), true) = (&clip, counts.accepted > 0) {
        let s = c.summary();
        if let Ok(est) = agg.estimate(None) {
            for v in est.values.iter().filter(|v| v.is_finite()) {
                assert!(
                    *v >= s.lower && *v <= s.upper,
                    "cell {v} outside the clip bounds"
                );
            }
        }
    }
    stats.inputs += count;
    stats.records += count;
    stats.accepted += counts.accepted;
}

/// Run `n` inputs from `seed`.
pub fn run(n: u64, seed: u64) -> Stats {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut stats = Stats::default();
    let mut case = 0u64;
    let (map_releases, mut servers) = map_servers();
    // The clipping bounds of each map (a root search per noise shape):
    // computed once.
    let map_clips: Vec<Option<MapClip>> = map_releases
        .iter()
        .map(|r| {
            MapClip::new(
                r.set(),
                r.mechanism(),
                1e-3,
                geopriv::server::clip::ClipLevel::default(),
            )
            .expect("clip bounds")
        })
        .collect();
    let dir = std::env::temp_dir().join(format!("geopriv-fuzz-{}-{seed}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let ledger_file = dir.join("ledger.json");
    while stats.inputs < n {
        case += 1;
        if rng.random_bool(0.25) {
            // Ledger and map paths (a quarter of the cases).
            match rng.random_range(0..6) {
                0 | 1 => {
                    // Structured: a real ledger state, charged, mutated.
                    let mut b = PrivacyBudget::new(ledger_policy());
                    for _ in 0..rng.random_range(0..4) {
                        let eps = if rng.random_bool(0.7) {
                            1e-3
                        } else {
                            float(&mut rng)
                        };
                        if let Ok(c) = Charge::new(BudgetUnit::PerMetre, eps, 0.0) {
                            if rng.random_bool(0.5) {
                                let _ = b.try_charge(&c);
                            } else {
                                let _ = b.commit_once([rng.random_range(0..3u8); 32], &c);
                            }
                        }
                    }
                    let mut bytes = b.to_json().into_bytes();
                    if rng.random_bool(0.9) {
                        mutate(&mut rng, &mut bytes);
                    }
                    // File I/O is slow: one case in 16 goes through a file.
                    let file = rng.random_bool(1.0 / 16.0).then_some(ledger_file.as_path());
                    ledger(&bytes, file, &mut stats);
                }
                2 => {
                    let b = random_bytes(&mut rng, 96);
                    let file = rng.random_bool(1.0 / 16.0).then_some(ledger_file.as_path());
                    ledger(&b, file, &mut stats);
                }
                3 | 4 => {
                    let i = rng.random_range(0..map_releases.len());
                    let x = [rng.random_range(-1e4..3e4), rng.random_range(-1e4..3e4)];
                    let mut b = match map_releases[i].release_unmetered(&x, &mut rng) {
                        Ok(r) => serde_json::to_vec(&r).expect("serializable"),
                        Err(_) => random_bytes(&mut rng, 64),
                    };
                    if rng.random_bool(0.8) {
                        mutate(&mut rng, &mut b);
                    }
                    map_report(&b, &mut servers, &mut stats);
                }
                5 if rng.random_bool(0.5) => {
                    map_stream(&mut rng, &map_releases, &map_clips, &mut stats)
                }
                _ => {
                    let b = random_bytes(&mut rng, 64);
                    map_report(&b, &mut servers, &mut stats);
                }
            }
            continue;
        }
        match case % 8 {
            0 => stream(&mut rng, &mut stats),
            1 | 2 => {
                let pristine = rng.random_bool(0.5);
                let r = report(&mut rng, pristine);
                let mut b = if rng.random_bool(0.5) {
                    r.to_json_line().into_bytes()
                } else {
                    r.to_frame()
                };
                mutate(&mut rng, &mut b);
                decoders(&b, &mut stats);
            }
            3 => {
                let b = random_bytes(&mut rng, 64);
                decoders(&b, &mut stats);
            }
            4 | 5 => {
                // Structured states: real ones, mutated.
                let mut a = Aggregator::new();
                for _ in 0..rng.random_range(0..5) {
                    let _ = a.add(float(&mut rng));
                }
                let mut b = if rng.random_bool(0.5) {
                    serde_json::to_vec(&a).expect("serializable")
                } else {
                    postcard::to_allocvec(&a).expect("serializable")
                };
                if rng.random_bool(0.8) {
                    mutate(&mut rng, &mut b);
                }
                restores(&b, &mut stats);
            }
            6 => {
                let mut b = br#"{"n":18446744073709551615,"sum":{"offset":67,"limbs":[1]},"sum_sq":{"offset":133,"limbs":[1]}}"#.to_vec();
                mutate(&mut rng, &mut b);
                restores(&b, &mut stats);
            }
            _ => {
                let b = random_bytes(&mut rng, 48);
                restores(&b, &mut stats);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    stats
}

#[allow(dead_code)]
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: u64 = args
        .get(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let seed: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    let start = std::time::Instant::now();
    let stats = run(n, seed);
    println!(
        "fuzz: {} inputs ({} decoded or restored, {} stream records checked) from seed {seed} in {:.1} s",
        stats.inputs,
        stats.accepted,
        stats.records,
        start.elapsed().as_secs_f64()
    );
}
