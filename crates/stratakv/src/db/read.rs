//! The read path: point lookups, and the sources an iterator merges.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::DbInner;
use crate::engine::SuperVersion;
use crate::error::{Error, Result};
use crate::iterator::{InternalIterator, MergingIterator};
use crate::key::{internal_key, key_hash, range_prefix, KeyRange, Kind, Lookup, ParsedKey, SeqNo, KIND_FOR_SEEK};
use crate::version::RangeDels;

/// Cursors over the sources of a read, newest first.
type Sources = Vec<Box<dyn InternalIterator>>;

impl DbInner {
    /// The value of `key` at `seq`, which a registered snapshot protects.
    pub(crate) fn get_at(&self, key: &[u8], seq: SeqNo) -> Result<Option<Vec<u8>>> {
        self.get_in(&self.eng.sv.load(), key, seq)
    }

    /// The value of `key` at `seq` in the view `sv`: the memtables newest
    /// first, then level 0 and the tables.
    pub(crate) fn get_in(&self, sv: &SuperVersion, key: &[u8], seq: SeqNo) -> Result<Option<Vec<u8>>> {
        self.eng.counters.gets.fetch_add(1, Ordering::Relaxed);
        let cover = sv.version.range_dels.covering_seq(key, seq);
        if cover > 0 {
            return self.get_covered(sv, key, seq, cover);
        }
        let hash = key_hash(key);
        for m in std::iter::once(&sv.mem).chain(sv.imms.iter()) {
            match m.get(key, hash, seq)? {
                Lookup::Found(v) => return Ok(Some(v)),
                Lookup::Deleted => return Ok(None),
                Lookup::Missing => {}
            }
        }
        match sv.version.get(&self.eng.tables, key, hash, seq)? {
            Lookup::Found(v) => Ok(Some(v)),
            _ => Ok(None),
        }
    }

    /// The values of `keys` at `seq` in the view `sv`: the memtables key by
    /// key, then the rest in one batched lookup of the tables.
    pub(crate) fn multi_get_in<K: AsRef<[u8]>>(
        &self,
        sv: &SuperVersion,
        keys: &[K],
        seq: SeqNo,
    ) -> Result<Vec<Option<Vec<u8>>>> {
        self.eng.counters.gets.fetch_add(keys.len() as u64, Ordering::Relaxed);
        let mut out: Vec<Option<Vec<u8>>> = vec![None; keys.len()];
        let mut rest: Vec<(usize, (&[u8], u64))> = Vec::new();
        'keys: for (i, k) in keys.iter().enumerate() {
            let (key, hash) = (k.as_ref(), key_hash(k.as_ref()));
            let cover = sv.version.range_dels.covering_seq(key, seq);
            if cover > 0 {
                out[i] = self.get_covered(sv, key, seq, cover)?;
                continue;
            }
            for m in std::iter::once(&sv.mem).chain(sv.imms.iter()) {
                match m.get(key, hash, seq)? {
                    Lookup::Found(v) => {
                        out[i] = Some(v);
                        continue 'keys;
                    }
                    Lookup::Deleted => continue 'keys,
                    Lookup::Missing => {}
                }
            }
            rest.push((i, (key, hash)));
        }
        let probes: Vec<(&[u8], u64)> = rest.iter().map(|(_, p)| *p).collect();
        for ((i, _), r) in rest.iter().zip(sv.version.multi_get(&self.eng.tables, &probes, seq)?) {
            if let Lookup::Found(v) = r {
                out[*i] = Some(v);
            }
        }
        Ok(out)
    }

    /// The value of `key` at `seq` in `sv` when a range tombstone at
    /// `cover` covers it: the newest visible entry decides, unless it is
    /// older than the tombstone. Point lookups do not report sequences, so
    /// this reads the entry through a merged cursor: slower, and only for
    /// keys inside a deleted range.
    fn get_covered(&self, sv: &SuperVersion, key: &[u8], seq: SeqNo, cover: SeqNo) -> Result<Option<Vec<u8>>> {
        let mut it = MergingIterator::new(self.source_iters_in(sv, &KeyRange::prefix(key))?);
        it.seek(&internal_key(key, seq, KIND_FOR_SEEK))?;
        if !it.valid() {
            return Ok(None);
        }
        let p =
            ParsedKey::parse(it.key()).ok_or_else(|| Error::corruption("<iterator>", 0, "malformed internal key"))?;
        Ok((p.user_key == key && p.seq >= cover && p.kind == Kind::Put).then(|| it.value().to_vec()))
    }

    /// Cursors over every source that may hold keys of `range`, newest
    /// first, pinned by the current superversion; with its range tombstones.
    pub(crate) fn source_iters(&self, range: &KeyRange) -> Result<(Sources, Arc<RangeDels>)> {
        let sv = self.eng.sv.load_full();
        Ok((self.source_iters_in(&sv, range)?, sv.version.range_dels.clone()))
    }

    /// Cursors over every source of `sv` that may hold keys of `range`.
    pub(crate) fn source_iters_in(
        &self,
        sv: &SuperVersion,
        range: &KeyRange,
    ) -> Result<Vec<Box<dyn InternalIterator>>> {
        let mut out: Vec<Box<dyn InternalIterator>> = Vec::new();
        out.push(Box::new(sv.mem.iter()));
        for m in &sv.imms {
            out.push(Box::new(m.iter()));
        }
        let prefix = self.eng.opts.prefix_extractor.as_deref().and_then(|x| range_prefix(x, range));
        let skipped = sv.version.add_iterators(&self.eng.tables, &mut out, prefix.as_deref())?;
        self.eng.counters.prefix_skipped_rows.fetch_add(skipped as u64, Ordering::Relaxed);
        Ok(out)
    }

    /// One cursor over every source that may hold keys of `range`, with
    /// the range tombstones its entries are subject to.
    pub(crate) fn merged_iter(&self, range: &KeyRange) -> Result<(MergingIterator, Arc<RangeDels>)> {
        let (iters, dels) = self.source_iters(range)?;
        Ok((MergingIterator::new(iters), dels))
    }
}
