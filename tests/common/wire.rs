//! Binary report oracles, written from the layout in the README ("Report
//! format") and not from the codec: the bitwise CRC-16/IBM-3740, the
//! legacy binary version 2 writer and the version 3 body. One copy for the
//! codec's unit tests (`#[path]` from src/report/codec.rs) and for the
//! integration tests (`#[path = "common/wire.rs"] mod wire;`). The module
//! that includes this file must have `Report` in scope (`crate::Report` in
//! the library, `geopriv::Report` in a test crate).
#![allow(dead_code)]

use super::Report;

/// CRC-16/IBM-3740 bit by bit (polynomial 0x1021, initial value 0xFFFF,
/// not reflected, no final xor): the definition the codec's sliced table
/// is held to.
pub fn crc16_bitwise(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0xFFFF;
    for &b in bytes {
        crc ^= (b as u16) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The postcard tuple of a report's fields under binary `version`: what
/// both layouts below start with (postcard writes a tuple as its fields
/// one after another).
fn fields(version: u16, r: &Report) -> Vec<u8> {
    postcard::to_allocvec(&(
        version,
        &r.query,
        r.mechanism,
        r.epsilon,
        r.delta,
        r.value,
        r.report_id,
    ))
    .unwrap()
}

/// A legacy binary version 2 report as geopriv wrote it before binary
/// version 3 (devices in the field): the fields, then `0x01` if seeded
/// (no check).
pub fn legacy_v2_bytes(r: &Report) -> Vec<u8> {
    let mut b = fields(2, r);
    if r.seeded {
        b.push(1);
    }
    b
}

/// The body of a binary version 3 report: the fields, then the seeded
/// byte, always there (`0x00` or `0x01`, postcard's bool); its CRC-16
/// follows on the wire.
pub fn v3_body(r: &Report) -> Vec<u8> {
    let mut b = fields(3, r);
    b.push(u8::from(r.seeded));
    b
}
