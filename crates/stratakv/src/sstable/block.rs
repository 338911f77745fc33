//! Data and index blocks: prefix-compressed entries with restart points.
//!
//! The byte layout is in FORMAT.md, "SSTable (data/index block)".
//! Every `restart_interval`-th entry stores its whole key (shared = 0) and
//! its offset is listed in the restart array, so seeks binary-search the
//! restarts and then scan forward.

use std::cmp::Ordering;
use std::path::PathBuf;
use std::sync::Arc;

use crate::coding::{get_u32, put_u32, put_varint, Reader};
use crate::error::{Error, Result};
use crate::iterator::InternalIterator;
use crate::key::compare_internal;

/// Builds one block.
#[derive(Debug)]
pub struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    counter: usize,
    interval: usize,
    last_key: Vec<u8>,
    entries: usize,
}

impl BlockBuilder {
    /// A builder with a restart point every `interval` entries.
    pub fn new(interval: usize) -> BlockBuilder {
        BlockBuilder {
            buf: Vec::new(),
            restarts: vec![0],
            counter: 0,
            interval: interval.max(1),
            last_key: Vec::new(),
            entries: 0,
        }
    }

    /// Appends an entry; keys must arrive in increasing order.
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        let mut shared = 0;
        if self.counter < self.interval {
            shared = self.last_key.iter().zip(key).take_while(|(a, b)| a == b).count();
        } else {
            self.restarts.push(self.buf.len() as u32);
            self.counter = 0;
        }
        put_varint(&mut self.buf, shared as u64);
        put_varint(&mut self.buf, (key.len() - shared) as u64);
        put_varint(&mut self.buf, value.len() as u64);
        self.buf.extend_from_slice(&key[shared..]);
        self.buf.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(&key[shared..]);
        self.counter += 1;
        self.entries += 1;
    }

    /// Size the finished block would have.
    pub fn size_estimate(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len() + 4
    }

    /// Whether no entry was added.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// The last key added.
    pub fn last_key(&self) -> &[u8] {
        &self.last_key
    }

    /// Finishes the block and resets the builder.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        for r in &self.restarts {
            put_u32(&mut out, *r);
        }
        put_u32(&mut out, self.restarts.len() as u32);
        self.restarts = vec![0];
        self.counter = 0;
        self.last_key.clear();
        self.entries = 0;
        out
    }
}

/// A decoded (uncompressed, checksum-verified) block.
#[derive(Debug)]
pub struct Block {
    data: Vec<u8>,
    /// Where the restart array starts (= end of the entries).
    restarts_off: usize,
    num_restarts: usize,
    /// For error messages: the file and the block's offset in it.
    file: Arc<PathBuf>,
    offset: u64,
}

impl Block {
    /// Wraps block contents, checking the restart array.
    pub fn new(data: Vec<u8>, file: Arc<PathBuf>, offset: u64) -> Result<Block> {
        let bad = |why: &str| Error::corruption(&*file, offset, format!("block: {why}"));
        let n = data.len().checked_sub(4).ok_or_else(|| bad("too short"))?;
        let num = get_u32(&data, n).ok_or_else(|| bad("too short"))? as usize;
        let restarts_off = num
            .checked_mul(4)
            .and_then(|b| n.checked_sub(b))
            .ok_or_else(|| bad("restart array larger than the block"))?;
        if num == 0 && restarts_off != 0 {
            return Err(bad("no restart points"));
        }
        Ok(Block { data, restarts_off, num_restarts: num, file, offset })
    }

    /// Bytes held.
    pub fn size(&self) -> usize {
        self.data.len()
    }

    fn restart(&self, i: usize) -> usize {
        get_u32(&self.data, self.restarts_off + 4 * i).unwrap_or(0) as usize
    }

    fn corrupt(&self, at: usize, why: &str) -> Error {
        Error::corruption(&*self.file, self.offset, format!("block entry at {at}: {why}"))
    }

    /// Decodes the entry at `off`: (shared, unshared key bytes, value range, next offset).
    fn decode_at(&self, off: usize) -> Result<(usize, std::ops::Range<usize>, std::ops::Range<usize>, usize)> {
        let entries = self.data.get(..self.restarts_off).unwrap_or(&[]);
        let tail = entries.get(off..).ok_or_else(|| self.corrupt(off, "offset past the entries"))?;
        let mut r = Reader::new(tail);
        let (shared, unshared, vlen) = match (r.varint(), r.varint(), r.varint()) {
            (Some(a), Some(b), Some(c)) => (a as usize, b as usize, c as usize),
            _ => return Err(self.corrupt(off, "truncated header")),
        };
        let kstart = off + r.pos();
        let kend = kstart.checked_add(unshared).ok_or_else(|| self.corrupt(off, "length overflow"))?;
        let vend = kend.checked_add(vlen).ok_or_else(|| self.corrupt(off, "length overflow"))?;
        if vend > self.restarts_off {
            return Err(self.corrupt(off, "entry runs past the entries"));
        }
        Ok((shared, kstart..kend, kend..vend, vend))
    }
}

/// A cursor over one block.
pub struct BlockIter {
    block: Arc<Block>,
    /// Offset of the current entry; == restarts_off when not valid.
    cur: usize,
    next_off: usize,
    key: Vec<u8>,
    value: std::ops::Range<usize>,
    restart_index: usize,
}

impl BlockIter {
    /// A cursor that is not yet positioned.
    pub fn new(block: Arc<Block>) -> BlockIter {
        let end = block.restarts_off;
        BlockIter { block, cur: end, next_off: end, key: Vec::new(), value: 0..0, restart_index: 0 }
    }

    fn invalidate(&mut self) {
        self.cur = self.block.restarts_off;
        self.next_off = self.cur;
    }

    /// Parses the entry at `off`, extending the current key.
    fn parse_at(&mut self, off: usize) -> Result<()> {
        let (shared, k, v, next) = match self.block.decode_at(off) {
            Ok(x) => x,
            Err(e) => {
                self.invalidate();
                return Err(e);
            }
        };
        if shared > self.key.len() {
            self.invalidate();
            return Err(self.block.corrupt(off, "shares more bytes than the previous key has"));
        }
        self.key.truncate(shared);
        self.key.extend_from_slice(self.block.data.get(k).unwrap_or(&[]));
        self.value = v;
        self.cur = off;
        self.next_off = next;
        Ok(())
    }

    fn seek_to_restart(&mut self, i: usize) {
        self.key.clear();
        self.restart_index = i;
        let off = self.block.restart(i);
        self.cur = off;
        self.next_off = off;
    }

    /// Steps to the entry after the current one (or to the first, after seek_to_restart).
    fn advance(&mut self) -> Result<bool> {
        if self.next_off >= self.block.restarts_off {
            self.invalidate();
            return Ok(false);
        }
        while self.restart_index + 1 < self.block.num_restarts
            && self.block.restart(self.restart_index + 1) <= self.next_off
        {
            self.restart_index += 1;
        }
        let off = self.next_off;
        self.parse_at(off)?;
        Ok(true)
    }
}

impl InternalIterator for BlockIter {
    fn valid(&self) -> bool {
        self.cur < self.block.restarts_off
    }

    fn seek_to_first(&mut self) -> Result<()> {
        if self.block.num_restarts == 0 {
            self.invalidate();
            return Ok(());
        }
        self.seek_to_restart(0);
        self.advance().map(|_| ())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        if self.block.num_restarts == 0 {
            self.invalidate();
            return Ok(());
        }
        self.seek_to_restart(self.block.num_restarts - 1);
        while self.advance()? && self.next_off < self.block.restarts_off {}
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        if self.block.num_restarts == 0 {
            self.invalidate();
            return Ok(());
        }
        // Last restart point whose key is < target.
        let (mut lo, mut hi) = (0usize, self.block.num_restarts - 1);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            let off = self.block.restart(mid);
            let (shared, k, _, _) = self.block.decode_at(off)?;
            if shared != 0 {
                return Err(self.block.corrupt(off, "restart entry shares a prefix"));
            }
            let key = self.block.data.get(k).unwrap_or(&[]);
            if compare_internal(key, target) == Ordering::Less {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        self.seek_to_restart(lo);
        while self.advance()? {
            if compare_internal(&self.key, target) != Ordering::Less {
                return Ok(());
            }
        }
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        self.advance().map(|_| ())
    }

    fn prev(&mut self) -> Result<()> {
        let original = self.cur;
        // Find the restart point before the current entry, then scan up to it.
        while self.block.restart(self.restart_index) >= original {
            if self.restart_index == 0 {
                self.invalidate();
                return Ok(());
            }
            self.restart_index -= 1;
        }
        let ri = self.restart_index;
        self.seek_to_restart(ri);
        while self.advance()? && self.next_off < original {}
        Ok(())
    }

    fn key(&self) -> &[u8] {
        if self.valid() {
            &self.key
        } else {
            &[]
        }
    }

    fn value(&self) -> &[u8] {
        if self.valid() {
            self.block.data.get(self.value.clone()).unwrap_or(&[])
        } else {
            &[]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{internal_key, Kind};

    fn build(n: usize, interval: usize) -> (Arc<Block>, Vec<Vec<u8>>) {
        let mut b = BlockBuilder::new(interval);
        let mut keys = Vec::new();
        for i in 0..n {
            let k = internal_key(format!("key{:05}", i * 3).as_bytes(), 1, Kind::Put);
            b.add(&k, format!("v{i}").as_bytes());
            keys.push(k);
        }
        let data = b.finish();
        (Arc::new(Block::new(data, Arc::new("t".into()), 0).unwrap()), keys)
    }

    #[test]
    fn iterates_both_ways_and_seeks() {
        for interval in [1, 2, 16] {
            let (blk, keys) = build(100, interval);
            let mut it = BlockIter::new(blk.clone());
            let (got, back) = crate::test_util::keys_both_ways(&mut it);
            assert_eq!(got, keys);
            assert_eq!(back, keys);
            // Seek between keys lands on the next one.
            it.seek(&internal_key(b"key00004", 1, Kind::Put)).unwrap();
            assert_eq!(it.key(), &keys[2][..]);
            assert_eq!(it.value(), b"v2");
            it.seek(&internal_key(b"zzz", 1, Kind::Put)).unwrap();
            assert!(!it.valid());
            it.seek(&internal_key(b"a", 1, Kind::Put)).unwrap();
            assert_eq!(it.key(), &keys[0][..]);
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let (blk, _) = build(50, 4);
        let data = blk.data.clone();
        for i in 0..data.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut d = data.clone();
                d[i] ^= flip;
                let Ok(b) = Block::new(d, Arc::new("t".into()), 0) else { continue };
                let mut it = BlockIter::new(Arc::new(b));
                let mut steps = 0;
                if it.seek_to_first().is_ok() {
                    while it.valid() && steps < 1000 {
                        if it.next().is_err() {
                            break;
                        }
                        steps += 1;
                    }
                }
                let _ = it.seek(&internal_key(b"key00050", 1, Kind::Put));
                let _ = it.seek_to_last();
            }
        }
    }
}
