//! Binary streams: each report's postcard bytes COBS-encoded and ended by a
//! `0x00`, so a reader resynchronizes after a damaged frame; in-memory
//! ([`frames`]) and streaming (`read_frames`, with `std`) readers.

use super::Report;
use crate::server::Rejection;
use alloc::string::ToString;
use alloc::vec::Vec;

impl Report {
    /// One frame of a binary stream: COBS(postcard bytes) followed by `0x00`.
    pub fn to_frame(&self) -> Vec<u8> {
        let raw = self.to_bytes();
        let mut out = Vec::with_capacity(raw.len() + raw.len() / 254 + 2);
        cobs_encode(&raw, &mut out);
        out.push(0);
        out
    }

    /// Decode one frame (with or without its final `0x00`).
    pub fn from_frame(frame: &[u8]) -> core::result::Result<Report, Rejection> {
        let frame = frame.strip_suffix(&[0]).unwrap_or(frame);
        let mut scratch = Vec::new();
        decode_frame(frame, &mut scratch, false)
    }

    /// Write one binary frame.
    #[cfg(feature = "std")]
    pub fn write_frame<W: std::io::Write>(&self, mut w: W) -> std::io::Result<()> {
        w.write_all(&self.to_frame())
    }
}

/// COBS-encode `src` (no terminator) onto `out`.
fn cobs_encode(src: &[u8], out: &mut Vec<u8>) {
    let mut code_at = out.len();
    out.push(0);
    let mut code: u8 = 1;
    for &b in src {
        if b == 0 {
            out[code_at] = code;
            code_at = out.len();
            out.push(0);
            code = 1;
        } else {
            out.push(b);
            code += 1;
            if code == 0xff {
                out[code_at] = code;
                code_at = out.len();
                out.push(0);
                code = 1;
            }
        }
    }
    out[code_at] = code;
}

/// Decode one COBS frame given without its terminator and the report in
/// it. `zero_free` says the caller already knows the frame has no `0x00`.
///
/// In-place COBS decoding: the frame is copied once into `scratch`; each
/// block's code byte (after the first) sits exactly where the zero it
/// encodes belongs, so it is overwritten with 0 and the decoded bytes are
/// `scratch[1..w]`. Only blocks after a full 254-byte block (code `0xff`,
/// no implied zero) need their data moved.
pub(crate) fn decode_frame(
    frame: &[u8],
    scratch: &mut Vec<u8>,
    zero_free: bool,
) -> core::result::Result<Report, Rejection> {
    if frame.is_empty() {
        return Err(Rejection::Empty);
    }
    Report::from_bytes(cobs_decode(frame, scratch, zero_free)?)
}

/// The COBS layer of [`decode_frame`]: the decoded bytes, in `scratch`.
fn cobs_decode<'s>(
    frame: &[u8],
    scratch: &'s mut Vec<u8>,
    zero_free: bool,
) -> core::result::Result<&'s [u8], Rejection> {
    if !zero_free && frame.contains(&0) {
        return Err(Rejection::Malformed {
            detail: "zero byte inside a COBS frame".to_string(),
        });
    }
    scratch.clear();
    scratch.extend_from_slice(frame);
    let len = scratch.len();
    let (mut r, mut w) = (0usize, 1usize);
    let mut implied_zero = false;
    while r < len {
        let code = scratch[r] as usize;
        let end = r + code;
        if end > len {
            return Err(Rejection::Truncated {
                detail: "COBS block runs past the end of the frame".to_string(),
            });
        }
        if implied_zero {
            scratch[w] = 0;
            w += 1;
        }
        if w != r + 1 {
            scratch.copy_within(r + 1..end, w);
        }
        w += code - 1;
        implied_zero = code != 0xff;
        r = end;
    }
    Ok(&scratch[1..w])
}

/// Iterator over the frames of an in-memory binary stream (see [`frames`]).
#[derive(Debug)]
pub struct Frames<'a> {
    rest: &'a [u8],
    scratch: Vec<u8>,
}

/// Decode a binary stream held in memory: one item per `0x00`-terminated
/// frame, each a report or the rejection of that frame (the next frame is
/// read normally). Empty frames (repeated zeros) are skipped; bytes after the
/// last zero are one frame refused as [`Rejection::Truncated`].
pub fn frames(stream: &[u8]) -> Frames<'_> {
    Frames {
        rest: stream,
        scratch: Vec::new(),
    }
}

/// Index of the `0x00` that ends the frame at the start of `stream`.
/// Follows the COBS code bytes (a few jumps per frame), then confirms with a
/// fast zero search that no zero hides inside the blocks; if one does (a
/// corrupted frame), that zero is the end, so the reader resynchronizes.
fn frame_end(stream: &[u8]) -> Option<usize> {
    let mut r = 0;
    while let Some(&code) = stream.get(r) {
        if code == 0 {
            if !stream[..r].contains(&0) {
                return Some(r);
            }
            break;
        }
        r += code as usize;
    }
    stream.iter().position(|&b| b == 0)
}

impl Iterator for Frames<'_> {
    type Item = core::result::Result<Report, Rejection>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            match self.rest.first() {
                None => return None,
                Some(0) => self.rest = &self.rest[1..],
                Some(_) => match frame_end(self.rest) {
                    Some(end) => {
                        let frame = &self.rest[..end];
                        self.rest = &self.rest[end + 1..];
                        return Some(decode_frame(frame, &mut self.scratch, true));
                    }
                    None => {
                        self.rest = &[];
                        return Some(Err(Rejection::Truncated {
                            detail: "stream ends inside a frame (no 0x00 terminator)".to_string(),
                        }));
                    }
                },
            }
        }
    }
}

/// Read a binary stream of frames: one item per frame; an I/O error is the
/// outer error, a bad frame the inner one (reading goes on after it).
#[cfg(feature = "std")]
pub fn read_frames<R: std::io::BufRead>(
    mut reader: R,
) -> impl Iterator<Item = std::io::Result<core::result::Result<Report, Rejection>>> {
    let mut buf = Vec::new();
    let mut scratch = Vec::new();
    core::iter::from_fn(move || loop {
        buf.clear();
        match reader.read_until(0, &mut buf) {
            Err(e) => return Some(Err(e)),
            Ok(0) => return None,
            Ok(_) => {
                let Some(frame) = buf.strip_suffix(&[0]) else {
                    return Some(Ok(Err(Rejection::Truncated {
                        detail: "stream ends inside a frame (no 0x00 terminator)".to_string(),
                    })));
                };
                if frame.is_empty() {
                    continue;
                }
                return Some(Ok(decode_frame(frame, &mut scratch, true)));
            }
        }
    })
}

/// Read JSON lines: one item per non-blank line; an I/O error is the outer
/// error, a bad line the inner one (reading goes on after it).
#[cfg(feature = "std")]
pub fn read_json_lines<R: std::io::BufRead>(
    reader: R,
) -> impl Iterator<Item = std::io::Result<core::result::Result<Report, Rejection>>> {
    reader.lines().filter_map(|line| match line {
        Err(e) => Some(Err(e)),
        Ok(l) if l.trim().is_empty() => None,
        Ok(l) => Some(Ok(Report::from_json(&l))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::threshold_report;

    #[test]
    fn cobs_matches_postcard() {
        // Byte strings of every interesting length, with and without zeros
        // (runs of 254+ non-zero bytes exercise the 0xff blocks), wrapped as
        // postcard byte strings: encoding matches postcard, decoding inverts it.
        for len in [0usize, 1, 5, 252, 253, 254, 255, 300, 508, 600] {
            let data: Vec<u8> = (0..len).map(|i| (i % 7) as u8).collect();
            let data2: Vec<u8> = (0..len).map(|i| (i % 250) as u8 + 1).collect();
            for d in [data, data2] {
                let raw = postcard::to_allocvec(&d.as_slice()).unwrap();
                let mut mine = Vec::new();
                cobs_encode(&raw, &mut mine);
                let theirs = postcard::to_allocvec_cobs(&d.as_slice()).unwrap();
                assert_eq!(&theirs[..theirs.len() - 1], &mine[..], "len {len}");
                let mut scratch = Vec::new();
                assert_eq!(cobs_decode(&mine, &mut scratch, false).unwrap(), &raw[..]);
            }
        }
    }

    #[test]
    fn frames_match_postcard_cobs() {
        // The binary version 3 body is the postcard tuple of its fields,
        // then its CRC-16; the frame is postcard's COBS of those bytes.
        let r = threshold_report()
            .with_report_id(crate::ReportId([9; 16]))
            .with_seeded(true);
        let mut raw = crate::report::codec::wire_oracles::v3_body(&r);
        assert_eq!(raw.len(), 61);
        let check = r.to_bytes()[61..].to_vec();
        raw.extend_from_slice(&check);
        assert_eq!(r.to_bytes(), raw);
        let mut mine = Vec::new();
        cobs_encode(&raw, &mut mine);
        mine.push(0);
        assert_eq!(r.to_frame(), mine);
        assert_eq!(Report::from_frame(&mine).unwrap(), r);
        // A frame cut anywhere is refused; only the frame without its
        // terminator (which `from_frame` accepts) is the same report.
        let f = r.to_frame();
        for n in 0..f.len() - 1 {
            assert!(Report::from_frame(&f[..n]).is_err(), "{n}");
            assert!(frames(&f[..n]).all(|x| x.is_err()), "{n}");
        }
        assert_eq!(Report::from_frame(&f[..f.len() - 1]).unwrap(), r);
        assert_eq!(
            frames(&f[..f.len() - 1])
                .next()
                .unwrap()
                .unwrap_err()
                .code(),
            "truncated"
        );
    }
}
