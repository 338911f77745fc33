//! Batched point lookups in the tables (TridentKV's asynchronous reads):
//! every key's next table probe is found first (filter, then index), then
//! the data blocks of all of them are read in one batch, deduplicated, so
//! one thread keeps many block reads in flight. Keys whose block did not
//! hold them go on to their next table in the next round.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::{FileMeta, TableCache, Version};
use crate::error::{Error, Result};
use crate::iterator::InternalIterator;
use crate::key::{compare_internal, make_internal_key, user_key, Kind, Lookup, ParsedKey, SeqNo, KIND_FOR_SEEK};
use crate::sstable::{Block, BlockHandle, BlockIter, Table};

/// One key's walk through the tables.
struct Probe<'a> {
    ukey: &'a [u8],
    hash: u64,
    seek: Vec<u8>,
    /// The tables that may hold the key, newest first.
    files: Vec<&'a Arc<FileMeta>>,
    /// The next of `files` to try.
    next: usize,
    /// A block of the current table to read next (the block after one the
    /// key's seek ran off the end of).
    block: Option<usize>,
}

/// A block a probe wants: (probe, table, block number, handle).
type Want = (usize, Arc<Table>, usize, BlockHandle);

impl Version {
    /// Looks up each of `keys` (user key, hash) at `seq` in level 0's state
    /// and the tables, as [`Version::get`] does, reading the data blocks of
    /// a batch together.
    pub fn multi_get(&self, tables: &TableCache, keys: &[(&[u8], u64)], seq: SeqNo) -> Result<Vec<Lookup>> {
        let mut out: Vec<Lookup> = Vec::with_capacity(keys.len());
        let mut probes: Vec<(usize, Probe<'_>)> = Vec::new();
        for (i, &(ukey, hash)) in keys.iter().enumerate() {
            if let Some(l0) = &self.l0 {
                let r = l0.get(ukey, seq, hash, tables, self.files(0))?;
                if !matches!(r, Lookup::Missing) {
                    out.push(r);
                    continue;
                }
            }
            out.push(Lookup::Missing);
            let mut seek = Vec::with_capacity(ukey.len() + 8);
            make_internal_key(&mut seek, ukey, seq, KIND_FOR_SEEK);
            let files = self.candidates(ukey, &seek);
            probes.push((i, Probe { ukey, hash, seek, files, next: 0, block: None }));
        }
        while !probes.is_empty() {
            let mut wants: Vec<Want> = Vec::new();
            let mut live: Vec<(usize, Probe<'_>)> = Vec::new();
            for (i, mut probe) in probes.drain(..) {
                // A key with no table left is Missing.
                if let Some((t, b, h)) = next_block(tables, &mut probe)? {
                    wants.push((live.len(), t, b, h));
                    live.push((i, probe));
                }
            }
            let blocks = read_blocks(tables, &wants)?;
            let mut done = vec![false; live.len()];
            for (slot, t, b, h) in &wants {
                let (Some((i, probe)), Some(block)) = (live.get_mut(*slot), blocks.get(&(t.number(), h.offset))) else {
                    return Err(Error::corruption(t.path(), h.offset, "multi-get lost a block it read"));
                };
                let mut it = BlockIter::new(block.clone());
                it.seek(&probe.seek)?;
                if it.valid() && user_key(it.key()) == probe.ukey {
                    out[*i] = match ParsedKey::parse(it.key()).map(|p| p.kind) {
                        Some(Kind::Put) => Lookup::Found(it.value().to_vec()),
                        Some(Kind::Delete) => Lookup::Deleted,
                        None => return Err(Error::corruption(t.path(), h.offset, "malformed internal key")),
                    };
                    done[*slot] = true;
                } else if !it.valid() && probe.block.is_none() {
                    // A separator past the block's last key: the answer may
                    // be the first entry of the next block.
                    probe.block = Some(b + 1);
                } else {
                    probe.next += 1;
                    probe.block = None;
                }
            }
            probes = live.into_iter().zip(done).filter(|(_, d)| !d).map(|(p, _)| p).collect();
        }
        Ok(out)
    }

    /// The tables that may hold `ukey`, newest first: overlapping level-0
    /// tables, then the one table of each run and level whose range has it.
    fn candidates(&self, ukey: &[u8], seek: &[u8]) -> Vec<&Arc<FileMeta>> {
        let mut files: Vec<&Arc<FileMeta>> =
            self.files(0).iter().filter(|f| ukey >= f.smallest_user() && ukey <= f.largest_user()).collect();
        let sorted = self.runs.iter().map(|r| &r.files).chain(self.levels.iter().skip(1));
        for level in sorted {
            let i = level.partition_point(|f| compare_internal(&f.largest, seek) == std::cmp::Ordering::Less);
            if let Some(f) = level.get(i).filter(|f| ukey >= f.smallest_user()) {
                files.push(f);
            }
        }
        files
    }
}

/// The next block `probe` must read, skipping tables its filter or index
/// rules out (and moving `probe.next` past them).
fn next_block(tables: &TableCache, probe: &mut Probe<'_>) -> Result<Option<(Arc<Table>, usize, BlockHandle)>> {
    while let Some(f) = probe.files.get(probe.next) {
        let t = tables.get(f.number)?;
        let found = match probe.block {
            Some(b) => t.block_handle(b).map(|h| (b, h)),
            None if t.may_contain(probe.hash) => t.find_block(&probe.seek),
            None => None,
        };
        if let Some((b, h)) = found {
            return Ok(Some((t, b, h)));
        }
        probe.block = None;
        probe.next += 1;
    }
    Ok(None)
}

/// The blocks `wants` name, each read once: from the block cache, or all
/// the misses in one batch.
fn read_blocks(tables: &TableCache, wants: &[Want]) -> Result<HashMap<(u64, u64), Arc<Block>>> {
    let mut got: HashMap<(u64, u64), Arc<Block>> = HashMap::new();
    let mut missed: HashSet<(u64, u64)> = HashSet::new();
    let mut misses: Vec<(&Arc<Table>, BlockHandle)> = Vec::new();
    for (_, t, _, h) in wants {
        let key = (t.number(), h.offset);
        if got.contains_key(&key) || missed.contains(&key) {
            continue;
        }
        match t.cached_block(*h) {
            Some(b) => {
                got.insert(key, b);
            }
            None => {
                missed.insert(key);
                misses.push((t, *h));
            }
        }
    }
    let reqs: Vec<_> = misses.iter().map(|(t, h)| t.block_request(*h)).collect();
    for ((t, h), raw) in misses.iter().zip(tables.batch_reader().read(&reqs)) {
        got.insert((t.number(), h.offset), t.block_from_read(*h, raw)?);
    }
    Ok(got)
}
