//! `geopriv sensitivity <family>`: f(x), L(x) and S(x) for points on stdin.

use geopriv::server::escape::Untrusted;
use geopriv::{Growth, Query};
use std::io::{self, BufRead, Write};

/// What a run saw.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    /// Lines answered on the output.
    pub answered: u64,
    /// Malformed lines (reported on the error stream, not answered).
    pub malformed: u64,
}

/// Reads points from `input`, one per line, coordinates separated by
/// commas (whitespace around each is allowed). For each well-formed line
/// writes `value,pointwise_lipschitz,smooth_sensitivity` to `out`, each
/// number in Rust's shortest round-trip form (parsing it back gives the
/// same f64). Each malformed line (empty, wrong number of coordinates, not
/// a number, NaN or infinite, rejected by the query) gets
/// `line N: <reason>` (1-based) on `err` and no output line; the following
/// lines are still processed. A final newline at the end of the input does
/// not start an extra line.
///
/// Returns early with the error if reading or writing fails (e.g.
/// `BrokenPipe` when the reader of `out` went away).
pub fn run<Q: Query + ?Sized, R: BufRead, W: Write, E: Write>(
    query: &Q,
    growth: Growth,
    input: R,
    mut out: W,
    err: E,
) -> io::Result<Summary> {
    let (answered, malformed) = for_each_point(input, query.dimension(), err, |point| {
        let answer = (|| {
            let value = query.value(point).map_err(|e| e.to_string())?;
            let lipschitz = query
                .pointwise_lipschitz(point)
                .map_err(|e| e.to_string())?;
            let smooth = query
                .smooth_sensitivity(point, growth)
                .map_err(|e| e.to_string())?;
            Ok((value, lipschitz, smooth))
        })();
        Ok(match answer {
            Ok((value, lipschitz, smooth)) => {
                writeln!(out, "{value},{lipschitz},{smooth}")?;
                Ok(())
            }
            Err(reason) => Err(reason),
        })
    })?;
    out.flush()?;
    Ok(Summary {
        answered,
        malformed,
    })
}

/// The line loop shared by the commands that read points: for each input
/// line, parse `dim` comma-separated coordinates and call `handle`, which
/// returns `Ok(Err(reason))` to reject the point. Each parse failure or
/// rejection is written as `line N: <reason>` to `err` and the loop goes
/// on. Returns (handled, malformed); an I/O error ends the loop.
pub(crate) fn for_each_point<R, E, H>(
    mut input: R,
    dim: usize,
    mut err: E,
    mut handle: H,
) -> io::Result<(u64, u64)>
where
    R: BufRead,
    E: Write,
    H: FnMut(&mut Vec<f64>) -> io::Result<Result<(), String>>,
{
    let (mut handled, mut malformed) = (0u64, 0u64);
    let mut line = Vec::with_capacity(256);
    let mut point = Vec::with_capacity(dim);
    let mut number = 0u64;
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        number += 1;
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        let outcome = match parse_point(&line, dim, &mut point) {
            Ok(()) => handle(&mut point)?,
            Err(reason) => Err(reason),
        };
        match outcome {
            Ok(()) => handled += 1,
            Err(reason) => {
                writeln!(err, "line {number}: {reason}")?;
                malformed += 1;
            }
        }
    }
    err.flush()?;
    Ok((handled, malformed))
}

/// Parses one input line (without its newline) into `point`.
fn parse_point(line: &[u8], dim: usize, point: &mut Vec<f64>) -> Result<(), String> {
    let text = std::str::from_utf8(line).map_err(|_| "not valid UTF-8".to_string())?;
    if text.trim().is_empty() {
        return Err(format!(
            "empty line (expected {dim} comma-separated coordinate(s))"
        ));
    }
    point.clear();
    for (i, field) in text.split(',').enumerate() {
        let field = field.trim();
        let v: f64 = field.parse().map_err(|_| {
            format!(
                "coordinate {}: `{}` is not a number",
                i + 1,
                Untrusted(field)
            )
        })?;
        if !v.is_finite() {
            return Err(format!(
                "coordinate {} is {v}: coordinates must be finite",
                i + 1
            ));
        }
        point.push(v);
    }
    if point.len() != dim {
        return Err(format!(
            "expected {dim} comma-separated coordinate(s), found {}",
            point.len()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use geopriv::SoftThreshold;

    fn run_str(input: &str) -> (String, String, Summary) {
        let q = SoftThreshold::new(0.0, 2.0).unwrap();
        let g = Growth::exponential(0.5).unwrap();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let s = run(&q, g, input.as_bytes(), &mut out, &mut err).unwrap();
        (
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
            s,
        )
    }

    #[test]
    fn answers_good_lines_and_reports_bad_ones() {
        let (out, err, s) = run_str("0\n 3 \r\n\nx\n1,2\nNaN\n-1e400\n5");
        assert_eq!(out.lines().count(), 3);
        assert!(out.starts_with("0.5,0.5,0.5\n"));
        assert_eq!(
            s,
            Summary {
                answered: 3,
                malformed: 5
            }
        );
        let lines: Vec<&str> = err.lines().collect();
        assert!(lines[0].starts_with("line 3: empty line"), "{err}");
        assert!(lines[1].starts_with("line 4: coordinate 1: `x`"), "{err}");
        assert!(lines[2].starts_with("line 5: expected 1"), "{err}");
        assert!(lines[3].starts_with("line 6: coordinate 1 is NaN"), "{err}");
        assert!(
            lines[4].starts_with("line 7: coordinate 1 is -inf"),
            "{err}"
        );
    }

    #[test]
    fn a_final_newline_is_not_an_empty_line() {
        let (out, err, s) = run_str("1\n2\n");
        assert_eq!(out.lines().count(), 2);
        assert_eq!(err, "");
        assert_eq!(s.malformed, 0);
        let (_, err, _) = run_str("1\n2\n\n");
        assert!(err.starts_with("line 3: empty line"));
    }
}
