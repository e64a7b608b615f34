//! [`ReportId`]: the random 16-byte identity of one report, which a
//! collector uses to count a report once however often it is uploaded.

use core::fmt;
use rand::RngCore;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A report's random identity: 16 bytes from the same generator as the
/// noise (the secure generator by default; a seeded one in seeded runs), so
/// it is independent of the private input and says nothing about it.
///
/// A collector keeps a uniqueness constraint on it: the second upload of
/// the same report (a client retry after a lost acknowledgement) is counted
/// once and answered as a duplicate. With 128 random bits two honest
/// reports collide with probability about n²/2¹²⁹ (below 10⁻¹⁸ for n =
/// 10¹⁰ reports).
///
/// On the wire: 32 lowercase hex digits in JSON (`"report_id":"00ff.."`),
/// the 16 raw bytes in the binary form.
///
/// ```
/// use geopriv::ReportId;
/// let id = ReportId::from_hex("000102030405060708090a0b0c0d0e0f").unwrap();
/// assert_eq!(id.to_string(), "000102030405060708090a0b0c0d0e0f");
/// assert_eq!(id.as_bytes()[15], 15);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReportId(pub [u8; 16]);

impl ReportId {
    /// 16 bytes drawn from `rng`.
    pub fn random<R: RngCore + ?Sized>(rng: &mut R) -> Self {
        let mut b = [0u8; 16];
        rng.fill_bytes(&mut b);
        ReportId(b)
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// Parse exactly 32 hex digits (either case); `None` otherwise.
    pub fn from_hex(s: &str) -> Option<Self> {
        Self::from_hex_bytes(s.as_bytes())
    }

    /// [`from_hex`](Self::from_hex) on bytes (the readers' fast paths: no
    /// UTF-8 check needed, a non-hex byte is refused either way). One table
    /// look-up per digit (the digit match was 6-9% of the CPU of a map
    /// aggregate of 10^6 id-carrying reports, BENCHMARKS.md "Branch
    /// mapspeed3").
    pub fn from_hex_bytes(s: &[u8]) -> Option<Self> {
        if s.len() != 32 {
            return None;
        }
        let mut b = [0u8; 16];
        let mut bad = 0u8;
        for (out, pair) in b.iter_mut().zip(s.chunks_exact(2)) {
            let (hi, lo) = (HEX_DIGIT[pair[0] as usize], HEX_DIGIT[pair[1] as usize]);
            bad |= hi | lo;
            *out = (hi << 4) | (lo & 15);
        }
        // Invalid bytes map to 0x80 (a bit no digit value has).
        (bad & 0x80 == 0).then_some(ReportId(b))
    }

    /// The 32 lowercase hex digits, without allocating.
    pub fn to_hex(&self) -> [u8; 32] {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; 32];
        for (i, b) in self.0.iter().enumerate() {
            out[2 * i] = HEX[(b >> 4) as usize];
            out[2 * i + 1] = HEX[(b & 15) as usize];
        }
        out
    }
}

/// Value of each byte as a hex digit (either case), 0x80 for any other byte.
const HEX_DIGIT: [u8; 256] = {
    let mut t = [0x80u8; 256];
    let mut c = 0;
    while c < 256 {
        t[c] = match c as u8 {
            b'0'..=b'9' => c as u8 - b'0',
            b'a'..=b'f' => c as u8 - b'a' + 10,
            b'A'..=b'F' => c as u8 - b'A' + 10,
            _ => 0x80,
        };
        c += 1;
    }
    t
};

impl fmt::Display for ReportId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hex = self.to_hex();
        // Always ASCII.
        f.write_str(core::str::from_utf8(&hex).unwrap_or_default())
    }
}

impl fmt::Debug for ReportId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ReportId({self})")
    }
}

impl Serialize for ReportId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            let hex = self.to_hex();
            s.serialize_str(core::str::from_utf8(&hex).unwrap_or_default())
        } else {
            self.0.serialize(s)
        }
    }
}

impl<'de> Deserialize<'de> for ReportId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if d.is_human_readable() {
            struct V;
            impl serde::de::Visitor<'_> for V {
                type Value = ReportId;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("a report id of 32 hex digits")
                }
                fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ReportId, E> {
                    ReportId::from_hex(v).ok_or_else(|| E::custom("report_id is not 32 hex digits"))
                }
            }
            d.deserialize_str(V)
        } else {
            <[u8; 16]>::deserialize(d).map(ReportId)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn hex_round_trips_and_refuses_garbage() {
        let id = ReportId::random(&mut StdRng::seed_from_u64(3));
        let s = alloc::format!("{id}");
        assert_eq!(s.len(), 32);
        assert_eq!(ReportId::from_hex(&s), Some(id));
        assert_eq!(ReportId::from_hex(&s.to_uppercase()), Some(id));
        for bad in [
            "",
            "00",
            &s[..31],
            "zz0102030405060708090a0b0c0d0e0f",
            "é0102030405060708090a0b0c0d0e0",
        ] {
            assert_eq!(ReportId::from_hex(bad), None, "{bad}");
        }
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, alloc::format!("\"{s}\""));
        assert_eq!(serde_json::from_str::<ReportId>(&json).unwrap(), id);
        let bytes = postcard::to_allocvec(&id).unwrap();
        assert_eq!(bytes, id.0);
        assert_eq!(postcard::from_bytes::<ReportId>(&bytes).unwrap(), id);
    }

    /// The table decoder against the plain digit match, on every byte in
    /// every position (a valid id with one byte replaced).
    #[test]
    fn table_decoder_matches_the_digit_match_on_every_byte() {
        let digit = |c: u8| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        };
        let base = *b"0123456789abcdefABCDEF0f1e2d3c4b";
        for pos in 0..32 {
            for byte in 0..=255u8 {
                let mut s = base;
                s[pos] = byte;
                let want = (0..16)
                    .map(|i| Some((digit(s[2 * i])? << 4) | digit(s[2 * i + 1])?))
                    .collect::<Option<alloc::vec::Vec<u8>>>();
                let got = ReportId::from_hex_bytes(&s).map(|id| id.0.to_vec());
                assert_eq!(got, want, "byte {byte} at {pos}");
            }
        }
        assert_eq!(ReportId::from_hex_bytes(&base[..31]), None);
    }
}
