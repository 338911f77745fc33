//! Little-endian fixed ints, varints and a checked reader.
//!
//! Every decoder of on-disk or on-PM bytes goes through [`Reader`], whose
//! methods return `None` instead of panicking when the input is short;
//! callers turn that into a `Corruption` error naming file and offset.

/// Appends a varint-encoded u64 (LEB128).
pub fn put_varint(dst: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        dst.push((v as u8) | 0x80);
        v >>= 7;
    }
    dst.push(v as u8);
}

/// Bytes a varint of `v` takes.
pub fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Appends a length-prefixed byte string.
pub fn put_bytes(dst: &mut Vec<u8>, b: &[u8]) {
    put_varint(dst, b.len() as u64);
    dst.extend_from_slice(b);
}

/// Appends a little-endian u32.
pub fn put_u32(dst: &mut Vec<u8>, v: u32) {
    dst.extend_from_slice(&v.to_le_bytes());
}

/// Appends a little-endian u64.
pub fn put_u64(dst: &mut Vec<u8>, v: u64) {
    dst.extend_from_slice(&v.to_le_bytes());
}

/// Reads a little-endian u32 at `at`, if in bounds.
pub fn get_u32(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes(s.try_into().ok()?))
}

/// Reads a little-endian u64 at `at`, if in bounds.
pub fn get_u64(b: &[u8], at: usize) -> Option<u64> {
    let s = b.get(at..at.checked_add(8)?)?;
    Some(u64::from_le_bytes(s.try_into().ok()?))
}

/// A cursor over untrusted bytes; every read is bounds-checked.
#[derive(Clone, Copy, Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    /// Bytes consumed so far.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Whether everything was consumed.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// Next `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }

    /// One byte.
    pub fn u8(&mut self) -> Option<u8> {
        let b = *self.buf.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    /// A little-endian u32.
    pub fn u32(&mut self) -> Option<u32> {
        let v = get_u32(self.buf, self.pos)?;
        self.pos += 4;
        Some(v)
    }

    /// A little-endian u64.
    pub fn u64(&mut self) -> Option<u64> {
        let v = get_u64(self.buf, self.pos)?;
        self.pos += 8;
        Some(v)
    }

    /// A varint u64 (at most 10 bytes).
    pub fn varint(&mut self) -> Option<u64> {
        let mut v: u64 = 0;
        for i in 0..10 {
            let b = self.u8()?;
            if i == 9 && b > 1 {
                return None;
            }
            v |= ((b & 0x7f) as u64) << (7 * i);
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    /// A varint that must fit in a u32.
    pub fn varint32(&mut self) -> Option<u32> {
        u32::try_from(self.varint()?).ok()
    }

    /// A length-prefixed byte string.
    pub fn len_bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.varint()?).ok()?;
        self.bytes(n)
    }
}

/// CRC32C of `data`.
pub fn crc(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// CRC32C of `a` followed by `b`.
pub fn crc2(a: &[u8], b: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(a), b)
}

/// CRCs of data that itself contains CRCs are weak; store them masked (as LevelDB does).
pub fn mask_crc(c: u32) -> u32 {
    c.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// Inverse of [`mask_crc`].
pub fn unmask_crc(m: u32) -> u32 {
    m.wrapping_sub(0xa282_ead8).rotate_left(15)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_reject_overlong() {
        let mut b = Vec::new();
        let vals = [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX];
        for v in vals {
            put_varint(&mut b, v);
        }
        let mut r = Reader::new(&b);
        for v in vals {
            assert_eq!(r.varint(), Some(v));
        }
        assert!(r.is_empty());
        assert_eq!(Reader::new(&[0xff; 11]).varint(), None);
        assert_eq!(Reader::new(&[0x80]).varint(), None);
        assert_eq!(varint_len(300), 2);
    }

    #[test]
    fn reader_never_reads_past_the_end() {
        let mut r = Reader::new(&[1, 2, 3]);
        assert_eq!(r.u32(), None);
        assert_eq!(r.bytes(4), None);
        assert_eq!(r.bytes(3), Some(&[1u8, 2, 3][..]));
        assert_eq!(r.u8(), None);
        assert_eq!(Reader::new(&[5, 1]).len_bytes(), None);
    }

    #[test]
    fn crc_mask_round_trips() {
        let c = crc(b"hello");
        assert_ne!(mask_crc(c), c);
        assert_eq!(unmask_crc(mask_crc(c)), c);
        assert_eq!(crc2(b"hel", b"lo"), c);
    }
}
