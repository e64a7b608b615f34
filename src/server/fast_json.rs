//! A fast path for the JSON reports this crate writes.
//!
//! `Report::to_json_line` writes one fixed layout (field order, no
//! whitespace). [`parse_canonical`] recognises exactly that layout and
//! nothing else; for any other input it returns `None` and the caller falls
//! back to the full serde decoder, which also produces every rejection. On
//! the inputs it accepts it returns the same report as the serde decoder
//! (numbers follow the JSON grammar and are parsed with correct rounding by
//! `str::parse`, as serde_json's `float_roundtrip` does; the one spelling
//! where the two differ, an integer `-0`, is left to serde). The fuzz
//! harness and a property test check this equivalence.

use crate::report::{MechanismName, QueryDescriptor, Report};
use alloc::vec::Vec;

/// A position in a line being parsed (shared with the map reports' fast
/// path, `map::ingest`).
pub(crate) struct Cursor<'a> {
    pub(crate) s: &'a [u8],
    pub(crate) i: usize,
}

impl<'a> Cursor<'a> {
    /// The literal bytes `l` at the cursor (then past them), or None.
    #[inline]
    pub(crate) fn lit(&mut self, l: &[u8]) -> Option<()> {
        if self.s.get(self.i..self.i + l.len())? == l {
            self.i += l.len();
            Some(())
        } else {
            None
        }
    }

    /// A JSON number token, parsed with correct rounding; None for
    /// anything outside the JSON grammar, for `-0` and for overflow.
    ///
    /// Short decimals (significant digits forming an integer m <= 2^53,
    /// decimal exponent within ±22) take Clinger's fast path: m and
    /// 10^|e| are exact doubles, so m·10^e or m/10^|e| is one correctly
    /// rounded operation, the bits `str::parse` gives. Everything else
    /// goes to `str::parse`. (Until branch speed07 the test was at most
    /// 15 digits; the map reports' dyadic locations, e.g.
    /// 1359.347412109375, have 16 to 17 digits with m < 2^53, and 59 % of
    /// them took the slow path at εh 1.)
    #[inline]
    pub(crate) fn number(&mut self) -> Option<f64> {
        const POW10: [f64; 23] = [
            1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
            1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
        ];
        let s = self.s;
        let start = self.i;
        let mut i = start;
        let negative = s.get(i) == Some(&b'-');
        if negative {
            i += 1;
        }
        let int_start = i;
        let mut mantissa: u64 = 0;
        let mut digits = 0u32; // significant digits accumulated
        let push = |d: u8, digits: &mut u32, mantissa: &mut u64| {
            if *mantissa != 0 || d != b'0' {
                *digits += 1;
            }
            *mantissa = mantissa.wrapping_mul(10).wrapping_add((d - b'0') as u64);
        };
        match s.get(i)? {
            b'0' => i += 1,
            b'1'..=b'9' => {
                while let Some(&d) = s.get(i).filter(|d| d.is_ascii_digit()) {
                    push(d, &mut digits, &mut mantissa);
                    i += 1;
                }
            }
            _ => return None,
        }
        let int_end = i;
        let mut plain_integer = true;
        let mut exp10: i64 = 0;
        if s.get(i) == Some(&b'.') {
            plain_integer = false;
            i += 1;
            let d = i;
            while let Some(&c) = s.get(i).filter(|d| d.is_ascii_digit()) {
                push(c, &mut digits, &mut mantissa);
                exp10 -= 1;
                i += 1;
            }
            if i == d {
                return None;
            }
        }
        if matches!(s.get(i), Some(b'e' | b'E')) {
            plain_integer = false;
            i += 1;
            let minus = s.get(i) == Some(&b'-');
            if matches!(s.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            let d = i;
            let mut e: i64 = 0;
            while let Some(&c) = s.get(i).filter(|d| d.is_ascii_digit()) {
                e = (e * 10 + (c - b'0') as i64).min(1 << 40);
                i += 1;
            }
            if i == d {
                return None;
            }
            exp10 += if minus { -e } else { e };
        }
        if plain_integer && negative && &s[int_start..int_end] == b"0" {
            return None; // "-0": serde reads the integer 0, i.e. +0.0
        }
        // At most 19 digits: m < 10^19 < 2^64 was accumulated exactly.
        let v = if digits <= 19 && mantissa <= 1 << 53 && (-22..=22).contains(&exp10) {
            let m = mantissa as f64;
            let p = POW10[exp10.unsigned_abs() as usize];
            let magnitude = if exp10 >= 0 { m * p } else { m / p };
            if negative {
                -magnitude
            } else {
                magnitude
            }
        } else {
            let text = core::str::from_utf8(&s[start..i]).ok()?;
            text.parse().ok()?
        };
        if !v.is_finite() {
            return None; // serde refuses out-of-range numbers
        }
        self.i = i;
        Some(v)
    }

    fn numbers(&mut self) -> Option<Vec<f64>> {
        self.lit(b"[")?;
        let mut out = Vec::new();
        if self.lit(b"]").is_some() {
            return Some(out);
        }
        loop {
            out.push(self.number()?);
            if self.lit(b",").is_none() {
                self.lit(b"]")?;
                return Some(out);
            }
        }
    }
}

/// The report in `line` if it is in the exact layout of
/// `Report::to_json_line` (format version 1, or 2 with an optional
/// `report_id`; either with an optional `"seeded":true`), else `None`.
pub(crate) fn parse_canonical(line: &[u8]) -> Option<Report> {
    let (template, header) = parse_header(line)?;
    parse_tail(line, header, template)
}

/// The last header [`parse_canonical_cached`] parsed: its bytes (up to and
/// including `"value":`) and the report they describe (value 0, no id, not
/// seeded).
#[derive(Clone, Debug, Default)]
pub(crate) struct HeaderCache {
    header: Vec<u8>,
    template: Option<Report>,
}

/// [`parse_canonical`] for a column of reports, most of which repeat the
/// previous record's header (the same query, mechanism, ε and δ; only the
/// value and the id differ): when `line` starts with the cached header
/// bytes, only its tail is parsed. The same result as `parse_canonical`:
/// the header is everything up to and including `"value":`, its parse
/// reads no byte after it (every number in it ends at a literal of the
/// header), so equal header bytes give an equal parse.
pub(crate) fn parse_canonical_cached(line: &[u8], cache: &mut HeaderCache) -> Option<Report> {
    if let Some(template) = &cache.template {
        if line.starts_with(&cache.header) {
            return parse_tail(line, cache.header.len(), template.clone());
        }
    }
    let (template, header) = parse_header(line)?;
    cache.header.clear();
    cache.header.extend_from_slice(&line[..header]);
    cache.template = Some(template.clone());
    parse_tail(line, header, template)
}

/// The report of `line`'s header (everything before the value) and the
/// header's length in bytes.
fn parse_header(line: &[u8]) -> Option<(Report, usize)> {
    let mut c = Cursor { s: line, i: 0 };
    c.lit(b"{\"version\":")?;
    let version = match c.s.get(c.i)? {
        b'1' => 1,
        b'2' => 2,
        _ => return None,
    };
    c.i += 1;
    c.lit(b",\"query\":{\"")?;
    let query = if c.lit(b"threshold\":{\"threshold\":").is_some() {
        let threshold = c.number()?;
        c.lit(b",\"width\":")?;
        QueryDescriptor::Threshold {
            threshold,
            width: c.number()?,
        }
    } else if c.lit(b"interval\":{\"lower\":").is_some() {
        let lower = c.number()?;
        c.lit(b",\"upper\":")?;
        let upper = c.number()?;
        c.lit(b",\"width\":")?;
        QueryDescriptor::Interval {
            lower,
            upper,
            width: c.number()?,
        }
    } else if c.lit(b"two-way\":{\"thresholds\":[").is_some() {
        let t1 = c.number()?;
        c.lit(b",")?;
        let t2 = c.number()?;
        c.lit(b"],\"width\":")?;
        QueryDescriptor::TwoWay {
            thresholds: [t1, t2],
            width: c.number()?,
        }
    } else if c.lit(b"kde\":{\"center\":").is_some() {
        let center = c.numbers()?;
        c.lit(b",\"bandwidth\":")?;
        QueryDescriptor::Kde {
            center,
            bandwidth: c.number()?,
        }
    } else {
        return None;
    };
    c.lit(b"}},\"mechanism\":\"")?;
    let rest = &c.s[c.i..];
    let end = rest.iter().position(|&b| b == b'"')?;
    let name = &rest[..end];
    let mechanism = MechanismName::ALL
        .into_iter()
        .find(|m| m.as_str().as_bytes() == name)?;
    c.i += end;
    c.lit(b"\",\"epsilon\":")?;
    let epsilon = c.number()?;
    c.lit(b",\"delta\":")?;
    let delta = c.number()?;
    c.lit(b",\"value\":")?;
    let mut report = Report::new(query, mechanism, epsilon, delta, 0.0);
    report.version = version;
    Some((report, c.i))
}

/// The value, optional id and optional seeded flag after a header of
/// `header` bytes, filled into `report` (the header's template).
#[inline]
fn parse_tail(line: &[u8], header: usize, mut report: Report) -> Option<Report> {
    let mut c = Cursor { s: line, i: header };
    report.value = c.number()?;
    if c.lit(b",\"report_id\":\"").is_some() {
        let hex = c.s.get(c.i..c.i + 32)?;
        report.report_id = Some(crate::ReportId::from_hex_bytes(hex)?);
        c.i += 32;
        c.lit(b"\"")?;
    }
    if c.lit(b",\"seeded\":true").is_some() {
        report.seeded = true;
    }
    c.lit(b"}")?;
    if c.i != line.len() {
        return None;
    }
    Some(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::{String, ToString};
    use alloc::vec;

    /// A column mixing repeated headers, headers that share all but their
    /// last bytes (δ 1e-6 vs 1e-60, ε 1 vs 10), tails that are wrong after a
    /// good header, and ids and seeded flags on and off.
    fn column_lines() -> Vec<String> {
        let q = QueryDescriptor::Threshold {
            threshold: 100.0,
            width: 10.0,
        };
        let mut out = Vec::new();
        for (k, (eps, delta)) in [(1.0, 1e-6), (1.0, 1e-6), (10.0, 1e-6), (1.0, 1e-60)]
            .into_iter()
            .enumerate()
        {
            for v in [0.5, -3.25e-7, 1e300] {
                let r = Report::new(q.clone(), MechanismName::ALL[k % 3], eps, delta, v);
                let line = r.to_json_line();
                out.push(line.clone());
                let mut seeded = r.clone().with_report_id(crate::ReportId([k as u8; 16]));
                seeded.seeded = true;
                out.push(seeded.to_json_line());
                out.push(line.replace("}", "} "));
                out.push(line.replace(&alloc::format!("{v:?}"), "01"));
                out.push(line.replace("\"value\":", "\"value\":-"));
                out.push(line[..line.len() - 1].to_string());
                out.push(line.replace("}", ",\"seeded\":false}"));
            }
        }
        out
    }

    #[test]
    fn agrees_with_serde_on_every_family_and_refuses_the_rest() {
        let queries = [
            QueryDescriptor::Threshold {
                threshold: 100_000.0,
                width: 20_000.0,
            },
            QueryDescriptor::Interval {
                lower: -1e-300,
                upper: 5e-324,
                width: 0.1,
            },
            QueryDescriptor::TwoWay {
                thresholds: [1e22, -0.0],
                width: 8.5,
            },
            QueryDescriptor::Kde {
                center: vec![1.0, -2.5e-7, 3.0],
                bandwidth: 150.0,
            },
            QueryDescriptor::Kde {
                center: vec![],
                bandwidth: 1.0,
            },
        ];
        for q in queries {
            for m in MechanismName::ALL {
                for v in [0.0, -0.0, 0.1 + 0.2, f64::MAX, -1e-310, 123456789.0] {
                    let r = Report::new(q.clone(), m, 1e-4, 1e-6, v);
                    let mut v1 = r.clone();
                    v1.version = 1;
                    let with_id = r.clone().with_report_id(crate::ReportId([0xa5; 16]));
                    let mut seeded = with_id.clone();
                    seeded.seeded = true;
                    let mut seeded_v1 = v1.clone();
                    seeded_v1.seeded = true;
                    for r in [r, v1, with_id, seeded, seeded_v1] {
                        let line = r.to_json_line();
                        let fast = parse_canonical(line.as_bytes()).expect(&line);
                        let slow = Report::from_json(&line).unwrap();
                        assert_eq!(fast, slow, "{line}");
                        assert_eq!(fast.value.to_bits(), slow.value.to_bits(), "{line}");
                    }
                }
            }
        }
        // The cached parse of a column equals the plain one, record by
        // record, whatever the previous record's header was.
        let mut cache = HeaderCache::default();
        for (i, line) in column_lines().iter().enumerate() {
            let cached = parse_canonical_cached(line.as_bytes(), &mut cache);
            assert_eq!(
                cached,
                parse_canonical(line.as_bytes()),
                "record {i}: {line}"
            );
            if let Some(r) = cached {
                assert_eq!(r, Report::from_json(line).unwrap(), "{line}");
            }
        }
        for bad in [
            "",
            "{\"version\":2,\"query\":{}}",
            "{\"version\":3,\"query\":{\"threshold\":{\"threshold\":1,\"width\":1}},\"mechanism\":\"ldp\",\"epsilon\":1,\"delta\":0,\"value\":0}",
            "{\"version\":2,\"query\":{\"threshold\":{\"threshold\":1,\"width\":1}},\"mechanism\":\"ldp\",\"epsilon\":1,\"delta\":0,\"value\":0,\"report_id\":\"0g000000000000000000000000000000\"}",
            "{\"version\":2,\"query\":{\"threshold\":{\"threshold\":1,\"width\":1}},\"mechanism\":\"ldp\",\"epsilon\":1,\"delta\":0,\"value\":0,\"report_id\":\"00\"}",
            "{\"version\":1,\"query\":{\"threshold\":{\"threshold\":1,\"width\":-0},\"mechanism\":\"ldp\",\"epsilon\":1,\"delta\":0,\"value\":0}",
            "{\"version\":1,\"query\":{\"threshold\":{\"threshold\":01,\"width\":1}},\"mechanism\":\"ldp\",\"epsilon\":1,\"delta\":0,\"value\":0}",
            "{\"version\":1,\"query\":{\"threshold\":{\"threshold\":1.,\"width\":1}},\"mechanism\":\"ldp\",\"epsilon\":1,\"delta\":0,\"value\":0}",
            "{\"version\":1,\"query\":{\"threshold\":{\"threshold\":1,\"width\":1}},\"mechanism\":\"ldp\",\"epsilon\":1e999,\"delta\":0,\"value\":0}",
            "{\"version\":1,\"query\":{\"threshold\":{\"threshold\":1,\"width\":1}},\"mechanism\":\"ldp\",\"epsilon\":1,\"delta\":0,\"value\":0} ",
            "{\"version\":1,\"query\":{\"threshold\":{\"threshold\":1,\"width\":1}},\"mechanism\":\"nope\",\"epsilon\":1,\"delta\":0,\"value\":0}",
        ] {
            assert!(parse_canonical(bad.as_bytes()).is_none(), "{bad}");
        }
    }

    /// The fast path gives `str::parse`'s bits on every number it takes:
    /// integers around 2^53 (the fast path's edge), dyadic decimals of 16
    /// to 17 digits as the map reports carry, random doubles in Rust's
    /// shortest spelling, and exponents around ±22.
    #[test]
    fn numbers_are_parsed_with_str_parse_bits() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut texts: Vec<String> = Vec::new();
        for m in [
            9_007_199_254_740_990u64,
            9_007_199_254_740_991,
            9_007_199_254_740_992,
            9_007_199_254_740_993,
            9_007_199_254_740_995,
            9_999_999_999_999_999,
            1_000_000_000_000_000_000,
            18_446_744_073_709_551_615,
        ] {
            for e in [-23i32, -22, -5, 0, 5, 22, 23] {
                texts.push(std::format!("{m}e{e}"));
                texts.push(std::format!("-{m}e{e}"));
                let t = m.to_string();
                texts.push(std::format!("{}.{}", &t[..4], &t[4..]));
                texts.push(std::format!("0.{t}"));
            }
        }
        for _ in 0..20_000 {
            // Dyadic: k / 2^j, as snapped locations are.
            let k: u64 = rng.random_range(0..1u64 << 40);
            let j: i32 = rng.random_range(0..40);
            texts.push(std::format!("{}", k as f64 / 2f64.powi(j)));
            let x: f64 = f64::from_bits(rng.random::<u64>() >> 2);
            if x.is_finite() {
                texts.push(std::format!("{x}"));
                texts.push(std::format!("{x:e}"));
            }
            let y: f64 = rng.random_range(-1e6..1e6);
            texts.push(std::format!("{y}"));
        }
        let mut fast = 0;
        for t in &texts {
            let mut c = Cursor {
                s: t.as_bytes(),
                i: 0,
            };
            let want: Option<f64> = t.parse::<f64>().ok().filter(|v| v.is_finite());
            let got = c.number();
            if got.is_some() {
                assert_eq!(c.i, t.len(), "{t}");
                fast += 1;
            }
            assert_eq!(got.map(f64::to_bits), want.map(f64::to_bits), "{t}");
        }
        assert!(fast > texts.len() / 2, "{fast}");
    }

    /// attack8: adversarial decimals against `str::parse`, bit for bit,
    /// on whole tokens: 1-25 digit mantissas (leading and trailing zeros,
    /// around 2^53 and 10^19), exponents near ±22, ±308 and ±324
    /// (subnormals, overflow), signs, `-0` and `-0.0`, and spellings
    /// outside the JSON grammar (`.5`, `5.`, `1e`, `+1`, `01`, `1e+`),
    /// which must be refused. A token is taken iff it is a JSON number,
    /// not the integer `-0`, and finite; then with `str::parse`'s bits.
    #[test]
    fn attack8_adversarial_decimals_match_str_parse() {
        use rand::{Rng, SeedableRng};
        fn json_number(t: &[u8]) -> bool {
            // The end of the digit run at i, if it holds a digit.
            let digits = |i: usize| {
                let run = t.get(i..).unwrap_or_default();
                let n = run.iter().take_while(|c| c.is_ascii_digit()).count();
                (n > 0).then_some(i + n)
            };
            let end = || -> Option<usize> {
                let mut i = usize::from(t.first() == Some(&b'-'));
                i = match t.get(i)? {
                    b'0' => i + 1,
                    b'1'..=b'9' => digits(i)?,
                    _ => return None,
                };
                if t.get(i) == Some(&b'.') {
                    i = digits(i + 1)?;
                }
                if matches!(t.get(i), Some(b'e' | b'E')) {
                    i += 1;
                    if matches!(t.get(i), Some(b'+' | b'-')) {
                        i += 1;
                    }
                    i = digits(i)?;
                }
                Some(i)
            };
            end() == Some(t.len())
        }
        let mut rng = rand::rngs::StdRng::seed_from_u64(8);
        let digits = |rng: &mut rand::rngs::StdRng, n: usize| -> String {
            (0..n)
                .map(|_| {
                    let c: u32 = rng.random_range(0..14);
                    // Bias to 0 and 9 (carries, trailing/leading zeros).
                    (b'0'
                        + match c {
                            10 | 11 => 0,
                            12 | 13 => 9,
                            d => d as u8,
                        }) as char
                })
                .collect()
        };
        let (mut taken, mut refused, mut n) = (0u64, 0u64, 0u64);
        let mut check = |t: &str| {
            n += 1;
            let mut c = Cursor {
                s: t.as_bytes(),
                i: 0,
            };
            let got = c.number().filter(|_| c.i == t.len());
            let want = if json_number(t.as_bytes()) && t != "-0" {
                t.parse::<f64>().ok().filter(|v| v.is_finite())
            } else {
                None
            };
            assert_eq!(got.map(f64::to_bits), want.map(f64::to_bits), "{t}");
            if got.is_some() {
                taken += 1;
            } else {
                refused += 1;
            }
        };
        for t in [
            "-0",
            "-0.0",
            "0",
            "0.0",
            "-0e5",
            "0e-999999999999",
            "1e",
            ".5",
            "5.",
            "+1",
            "01",
            "1e+",
            "-",
            "",
            "1e400",
            "-1e400",
            "1e-400",
            "2.4703282292062327e-324",
            "2.4703282292062328e-324",
            "4.9406564584124654e-324",
            "1.7976931348623157e308",
            "1.7976931348623158e308",
            "1.7976931348623159e308",
            "9007199254740993",
            "9007199254740993e-22",
            "9007199254740992e22",
            "9007199254740993e22",
            "1E22",
            "1e23",
            "8.98846567431158e307",
            "1e-22",
            "123456789012345678901234567890e-30",
        ] {
            check(t);
        }
        for _ in 0..400_000 {
            let lead = if rng.random_range(0..4) == 0 { "0" } else { "" };
            let int_len = rng.random_range(0..21usize);
            let frac_len = rng.random_range(0..21usize);
            let mut t = String::new();
            if rng.random_range(0..3) == 0 {
                t.push('-');
            }
            t.push_str(lead);
            t.push_str(&digits(&mut rng, int_len));
            if rng.random_range(0..3) != 0 {
                t.push('.');
                t.push_str(&digits(&mut rng, frac_len));
            }
            if rng.random_range(0..2) == 0 {
                t.push(if rng.random() { 'e' } else { 'E' });
                match rng.random_range(0..3) {
                    0 => t.push('-'),
                    1 => t.push('+'),
                    _ => {}
                }
                let centre = [0i32, 22, 23, 290, 308, 309, 324, 343][rng.random_range(0..8)];
                let e = (centre + rng.random_range(-25..=25)).max(0);
                if rng.random_range(0..50) != 0 {
                    t.push_str(&e.to_string());
                }
            }
            check(&t);
            // Around 2^53 with a decimal point somewhere and an exponent.
            let m: u64 = (1u64 << 53) + rng.random_range(0..64) - 32;
            let ms = m.to_string();
            let k = rng.random_range(1..ms.len());
            let e: i32 = rng.random_range(-30..=30);
            check(&std::format!("{}.{}e{e}", &ms[..k], &ms[k..]));
            check(&std::format!("{m}e{e}"));
        }
        std::eprintln!("{n} tokens: {taken} taken with str::parse bits, {refused} refused");
        assert!(taken > n / 3, "{taken} of {n}");
    }
}
