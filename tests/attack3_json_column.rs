//! Fresh-eyes attack on `JsonColumnDecoder` (header reuse): every record of
//! a column, after any earlier records, decodes exactly as
//! `decode_json_record` decodes it alone. Columns are built from canonical
//! lines and byte-level mutations aimed at the cached header's boundary
//! (the ε/δ digits, `"value":`, escapes, duplicate keys, whitespace).

use geopriv::server::ingest::{decode_json_record, JsonColumnDecoder};
use geopriv::{MechanismName, QueryDescriptor, Report, ReportId};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn seeds() -> Vec<String> {
    let qs = [
        QueryDescriptor::Threshold {
            threshold: 100.0,
            width: 10.0,
        },
        QueryDescriptor::Interval {
            lower: 1.0,
            upper: 2.0,
            width: 0.5,
        },
        QueryDescriptor::Kde {
            center: vec![1.0, 2.0],
            bandwidth: 3.0,
        },
    ];
    let mut out = Vec::new();
    for q in qs {
        for (eps, delta) in [(1.0, 1e-6), (10.0, 1e-6), (1.0, 1e-60), (0.1, 0.0)] {
            for v in [0.5, -7.0, 1e300] {
                let r = Report::new(q.clone(), MechanismName::Polyplace, eps, delta, v);
                out.push(r.to_json_line());
                out.push(r.clone().with_report_id(ReportId([7; 16])).to_json_line());
            }
        }
    }
    out
}

/// Hand-written tricks around the header boundary.
fn tricks(line: &str) -> Vec<String> {
    vec![
        line.replace("\"value\":", "\"value\" :"),
        line.replace("\"value\":", "\"value\":1,\"value\":"),
        line.replace("\"value\":", "\"epsilon\":1000,\"value\":"),
        line.replace("}", ",\"epsilon\":1000}"),
        line.replacen("}", ",\"epsilon\":1000}", 1),
        line.replace("\"epsilon\"", "\"eps\\u0069lon\""),
        line.replace("\"value\"", "\"v\\u0061lue\""),
        line.replace("polyplace", "polyplac\\u0065"),
        line.replace(",\"value\":", ",\"value\":1e400,\"x\":"),
        line.replace("\"report_id\":\"", "\"report_id\":\"A"),
        line.to_uppercase(),
        format!("\u{feff}{line}"),
        format!(" {line}\r"),
        line.replace("\"value\":", "\"value\":\u{a0}"),
        line.replace("1e-6", "1e-6 "),
        line.replace("1e-6", "1e-60"),
        line.replace("1.0", "1.00"),
    ]
}

fn mutate(rng: &mut StdRng, line: &str) -> Vec<u8> {
    let mut b = line.as_bytes().to_vec();
    // Aim near "value": most of the time.
    let anchor = line.find("\"value\":").unwrap_or(0);
    for _ in 0..rng.random_range(1..4) {
        let at = if rng.random_bool(0.7) {
            (anchor + rng.random_range(0..16)).saturating_sub(8)
        } else {
            rng.random_range(0..=b.len())
        }
        .min(b.len());
        const ALPHABET: &[u8] = b"0123456789-+.eE,:\"{}[] \\u\tabx";
        match rng.random_range(0..3) {
            0 => b.insert(at, ALPHABET[rng.random_range(0..ALPHABET.len())]),
            1 if at < b.len() => {
                b.remove(at);
            }
            _ if at < b.len() => b[at] = ALPHABET[rng.random_range(0..ALPHABET.len())],
            _ => {}
        }
    }
    b
}

#[test]
fn column_decoder_equals_the_record_decoder_on_hostile_columns() {
    let seeds = seeds();
    let mut column: Vec<Vec<u8>> = Vec::new();
    for s in &seeds {
        column.push(s.clone().into_bytes());
        for t in tricks(s) {
            column.push(t.into_bytes());
            column.push(s.clone().into_bytes());
        }
    }
    let mut rng = StdRng::seed_from_u64(3);
    for _ in 0..40_000 {
        let s = &seeds[rng.random_range(0..seeds.len())];
        column.push(s.clone().into_bytes());
        column.push(mutate(&mut rng, s));
    }
    let mut d = JsonColumnDecoder::default();
    for (i, line) in column.iter().enumerate() {
        assert_eq!(
            d.decode(line),
            decode_json_record(line),
            "record {i}: {}",
            String::from_utf8_lossy(line)
        );
    }
    // The same column in a random order.
    for _ in 0..40_000 {
        let line = &column[rng.random_range(0..column.len())];
        assert_eq!(
            d.decode(line),
            decode_json_record(line),
            "{}",
            String::from_utf8_lossy(line)
        );
    }
}

/// Whatever the fast path accepts, serde reads the same report.
#[test]
fn fast_accepts_only_what_serde_reads_the_same() {
    let seeds = seeds();
    let mut rng = StdRng::seed_from_u64(4);
    for _ in 0..60_000 {
        let s = &seeds[rng.random_range(0..seeds.len())];
        let m = mutate(&mut rng, s);
        if let geopriv::server::ingest::Decoded::Report(r) = decode_json_record(&m) {
            let text = String::from_utf8(m.clone()).unwrap();
            let slow = Report::from_json(&text);
            assert_eq!(Ok(&r), slow.as_ref(), "{text}");
        }
    }
}
