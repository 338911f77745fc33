//! Record framing of the MANIFEST: `masked crc32c u32 | length u32 | payload`.
//!
//! A record cut short at the end of the file (a crash while appending) is a
//! torn tail and is ignored; a bad record followed by more data is
//! corruption.

use std::path::Path;

use crate::coding::{crc, get_u32, mask_crc, put_u32, unmask_crc};
use crate::error::{Error, Result};

/// Frames one record.
pub fn encode_record(payload: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(payload.len() + 8);
    put_u32(&mut b, mask_crc(crc(payload)));
    put_u32(&mut b, payload.len() as u32);
    b.extend_from_slice(payload);
    b
}

/// The records of a MANIFEST file's bytes, with their offsets, and whether
/// a torn tail was dropped.
pub fn decode_records<'a>(data: &'a [u8], path: &Path) -> Result<(Vec<(u64, &'a [u8])>, bool)> {
    let mut out = Vec::new();
    let mut off = 0usize;
    while off < data.len() {
        let (Some(c), Some(len)) = (get_u32(data, off), get_u32(data, off + 4)) else {
            return Ok((out, true));
        };
        let start = off + 8;
        let Some(end) = start.checked_add(len as usize).filter(|e| *e <= data.len()) else {
            return Ok((out, true));
        };
        let payload = data.get(start..end).unwrap_or(&[]);
        if unmask_crc(c) != crc(payload) {
            if end == data.len() {
                return Ok((out, true));
            }
            return Err(Error::corruption(path, off as u64, "MANIFEST record checksum mismatch"));
        }
        out.push((off as u64, payload));
        off = end;
    }
    Ok((out, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torn_tail_is_dropped_middle_damage_is_corruption() {
        let mut f = Vec::new();
        for i in 0..5u8 {
            f.extend_from_slice(&encode_record(&vec![i; 10 + i as usize]));
        }
        let p = Path::new("MANIFEST-1");
        let (recs, torn) = decode_records(&f, p).unwrap();
        assert_eq!((recs.len(), torn), (5, false));
        for cut in 1..f.len() {
            let (recs, _) = decode_records(&f[..cut], p).unwrap();
            assert!(recs.len() <= 5);
        }
        let mut bad = f.clone();
        bad[12] ^= 1;
        assert!(decode_records(&bad, p).unwrap_err().is_corruption());
        let mut last = f.clone();
        let n = last.len();
        last[n - 1] ^= 1;
        let (recs, torn) = decode_records(&last, p).unwrap();
        assert_eq!((recs.len(), torn), (4, true));
    }
}
