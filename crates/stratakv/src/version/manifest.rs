//! Record framing of the MANIFEST:
//!
//! The byte layout is in FORMAT.md, "MANIFEST".
//!
//! The length has its own checksum, so a damaged length is told apart from
//! a record cut short at the end of the file by a crash while appending
//! (a torn tail, which is ignored). A power cut can also leave the file's
//! new size on disk without all of its data: the unsynced tail then reads
//! as zeros from some point inside the last record to the end of the file.
//! A bad record whose damage is exactly such a zero run is a torn tail too
//! (the engine syncs every record before relying on it, so only an
//! unacknowledged edit can be cut). Any other bad record is corruption.

use std::path::Path;

use crate::coding::{crc, get_u32, mask_crc, put_u32, unmask_crc};
use crate::error::{Error, Result};

const HEADER: usize = 12;

/// Frames one record.
pub fn encode_record(payload: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(payload.len() + HEADER);
    let len = payload.len() as u32;
    put_u32(&mut b, len);
    put_u32(&mut b, mask_crc(crc(&len.to_le_bytes())));
    put_u32(&mut b, mask_crc(crc(payload)));
    b.extend_from_slice(payload);
    b
}

/// Records with their file offsets, and whether a torn tail was dropped.
pub type Records<'a> = (Vec<(u64, &'a [u8])>, bool);

/// The records of a MANIFEST file's bytes, with their offsets, and whether
/// a torn tail was dropped.
pub fn decode_records<'a>(data: &'a [u8], path: &Path) -> Result<Records<'a>> {
    let mut out = Vec::new();
    let mut off = 0usize;
    while off < data.len() {
        let rest = data.get(off..).unwrap_or(&[]);
        // A zero-filled tail is what some file systems leave after a crash.
        if rest.iter().all(|b| *b == 0) {
            return Ok((out, true));
        }
        let (Some(len), Some(len_crc), Some(c)) = (get_u32(data, off), get_u32(data, off + 4), get_u32(data, off + 8))
        else {
            return Ok((out, true));
        };
        if unmask_crc(len_crc) != crc(&len.to_le_bytes()) {
            if zeros_from_inside(data, off, off + HEADER) {
                return Ok((out, true));
            }
            return Err(Error::corruption(path, off as u64, "MANIFEST record length is damaged"));
        }
        let start = off + HEADER;
        let Some(end) = start.checked_add(len as usize).filter(|e| *e <= data.len()) else {
            return Ok((out, true));
        };
        let payload = data.get(start..end).unwrap_or(&[]);
        if unmask_crc(c) != crc(payload) {
            if zeros_from_inside(data, off, end) {
                return Ok((out, true));
            }
            return Err(Error::corruption(path, off as u64, "MANIFEST record checksum mismatch"));
        }
        out.push((off as u64, payload));
        off = end;
    }
    Ok((out, false))
}

/// File systems write data in sectors: a size that reached the disk
/// before the data leaves zeros from a sector boundary (or from the old
/// end of the file, which the caller checks) onwards.
const SECTOR: usize = 512;

/// Whether the file reads as zeros from a sector boundary strictly inside
/// the record `[off, end)` to its end: a size that reached the disk before
/// the data did. Natural zero bytes at the end of a damaged record do not
/// count unless they span such a boundary.
fn zeros_from_inside(data: &[u8], off: usize, end: usize) -> bool {
    let nonzero_end = data.iter().rposition(|b| *b != 0).map_or(0, |p| p + 1);
    let z = nonzero_end.div_ceil(SECTOR) * SECTOR;
    z > off && z < end && z < data.len()
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
        // Damage in the last complete record is corruption too...
        let mut last = f.clone();
        let n = last.len();
        last[n - 1] ^= 1;
        assert!(decode_records(&last, p).unwrap_err().is_corruption());
        // ...but a zero-filled last record is a torn append.
        let mut zeroed = f.clone();
        let start = n - (HEADER + 14);
        for b in &mut zeroed[start..] {
            *b = 0;
        }
        let (recs, torn) = decode_records(&zeroed, p).unwrap();
        assert_eq!((recs.len(), torn), (4, true));
        // A tail zeroed from a sector boundary inside the last record's
        // header or payload is a torn append (the size reached the disk, the
        // data did not)...
        let mut big = Vec::new();
        for i in 0..4u8 {
            big.extend_from_slice(&encode_record(&vec![i + 1; 1000]));
        }
        let last_start = big.len() - (HEADER + 1000);
        for z in [3072usize, 3584] {
            let mut t = big.clone();
            for b in &mut t[z..] {
                *b = 0;
            }
            assert!(z > last_start && z < big.len());
            let (recs, torn) = decode_records(&t, p).unwrap();
            assert_eq!((recs.len(), torn), (3, true), "zeros from {z}");
        }
        // ...while damage in a last record that merely ends in zero bytes is
        // corruption.
        let mut natural = big.clone();
        let n2 = natural.len();
        for b in &mut natural[n2 - 5..] {
            *b = 0;
        }
        assert!(decode_records(&natural, p).unwrap_err().is_corruption());
        // ...but zeros inside an earlier record, with data after, are not.
        let mut mid = f.clone();
        for b in &mut mid[36..40] {
            *b = 0;
        }
        assert!(decode_records(&mid, p).unwrap_err().is_corruption());
    }
}
