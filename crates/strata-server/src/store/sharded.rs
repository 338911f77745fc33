//! The sharded front end (p2KVS, `stratakv::Sharded`) as the server's
//! store (`--shards N`): the keyspace hash-partitioned over N engine
//! instances. An event loop's blocking call hands its request to the
//! shard's queue; when the queue is idle the loop applies it at once, and
//! requests that arrive meanwhile (other loops', the front end's async
//! callers') are folded into the same engine batch.
//!
//! A Redis key's meta and members hash to different shards, so a write of
//! a collection is a cross-shard batch (a coordinator record first, all or
//! nothing after a crash) and a collection scan merges every shard at one
//! consistent cut. One database (db 0). FLUSHALL deletes key by key: it is
//! not atomic across a crash here, unlike `--storage engine` without
//! shards (the front end has no range tombstone spanning shards yet).

use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use stratakv::{KeyRange, Sharded, ShardedOptions, WriteBatch, MAX_KEY_LEN};

use super::group::GroupSync;
use super::view::{take_batch, Batch, SnapshotView};
use super::{Backend, Op, Pending, ShutdownSave, StoreError, StoreResult};

/// A [`Backend`] over a [`Sharded`] database.
pub struct ShardedStore {
    db: Sharded,
    group: GroupSync,
    /// A sync failed: later writes' durability is unknown, so they are refused.
    failed: AtomicBool,
}

impl ShardedStore {
    /// Opens (creating if needed) the sharded database in `dir`.
    pub fn open(dir: &Path, opts: ShardedOptions) -> StoreResult<ShardedStore> {
        Ok(ShardedStore { db: Sharded::open(dir, opts)?, group: GroupSync::default(), failed: AtomicBool::new(false) })
    }

    /// The front end (for tests and statistics).
    pub fn sharded(&self) -> &Sharded {
        &self.db
    }

    fn check_writable(&self) -> StoreResult<()> {
        if self.failed.load(Ordering::Acquire) {
            return Err(StoreError("refusing writes after a failed sync of a shard (restart the server)".into()));
        }
        Ok(())
    }
}

/// A read view of every shard at one consistent cut
/// ([`Sharded::snapshot`]: whole cross-shard batches, every completed
/// write), merged in key order as collection scans are.
struct ShardedView {
    snap: stratakv::ShardedSnapshot,
}

impl SnapshotView for ShardedView {
    fn get(&self, key: &[u8]) -> StoreResult<Option<Vec<u8>>> {
        if key.len() > MAX_KEY_LEN {
            return Ok(None);
        }
        Ok(self.snap.get(key)?)
    }

    fn scan(&self, start: &[u8], end: Option<&[u8]>, batch: Batch) -> StoreResult<Vec<(Vec<u8>, Vec<u8>)>> {
        if start.len() > MAX_KEY_LEN {
            return Ok(Vec::new());
        }
        let range = KeyRange {
            start: Bound::Included(start.to_vec()),
            end: end.map(|e| Bound::Excluded(e.to_vec())).unwrap_or(Bound::Unbounded),
        };
        let mut it = self.snap.iter(range)?;
        take_batch(batch, || Ok(it.try_next()?))
    }
}

impl Backend for ShardedStore {
    fn get(&self, key: &[u8]) -> StoreResult<Option<Vec<u8>>> {
        // No key over the engine's limit is stored (writes skip deleting one).
        if key.len() > MAX_KEY_LEN {
            return Ok(None);
        }
        Ok(self.db.get(key)?)
    }

    fn multi_get(&self, keys: &[Vec<u8>]) -> StoreResult<Vec<Option<Vec<u8>>>> {
        let fits: Vec<&Vec<u8>> = keys.iter().filter(|k| k.len() <= MAX_KEY_LEN).collect();
        let mut found = self.db.multi_get(&fits)?.into_iter();
        Ok(keys.iter().map(|k| if k.len() <= MAX_KEY_LEN { found.next().flatten() } else { None }).collect())
    }

    fn scan(&self, start: &[u8], end: Option<&[u8]>, limit: usize) -> StoreResult<Vec<(Vec<u8>, Vec<u8>)>> {
        if start.len() > MAX_KEY_LEN {
            return Ok(Vec::new());
        }
        let range = KeyRange {
            start: Bound::Included(start.to_vec()),
            end: end.map(|e| Bound::Excluded(e.to_vec())).unwrap_or(Bound::Unbounded),
        };
        let mut it = self.db.iter(range)?;
        super::take_pairs(limit, || it.try_next())
    }

    fn write(&self, ops: Vec<Op>, durable: bool) -> StoreResult<Pending> {
        self.check_writable()?;
        let mut batch = WriteBatch::new();
        for (k, v) in &ops {
            match v {
                // Nothing to delete: no key over the limit is ever stored.
                None if k.len() > MAX_KEY_LEN => continue,
                Some(v) => batch.put(k, v),
                None => batch.delete(k),
            };
        }
        // As the plain engine store: applied without sync, made durable by
        // one shared sync of every shard in `wait_durable`; the ticket
        // exists before the write is visible.
        if !durable {
            self.db.write_opt(batch, false)?;
            return Ok(Pending(None));
        }
        let ticket = self.group.begin();
        let res = self.db.write_opt(batch, false);
        self.group.end(ticket);
        res?;
        Ok(Pending(Some(ticket)))
    }

    fn last_ticket(&self) -> Pending {
        Pending(Some(self.group.last_applied()))
    }

    /// One cut across every shard (a marker through every shard's queue),
    /// no copy of the data.
    fn snapshot(&self) -> StoreResult<Box<dyn SnapshotView>> {
        Ok(Box::new(ShardedView { snap: self.db.snapshot()? }))
    }

    fn wait_durable(&self, pending: Pending) -> StoreResult<()> {
        let Some(ticket) = pending.0 else { return Ok(()) };
        self.group.wait(ticket, || {
            self.db.sync().map_err(|e| {
                self.failed.store(true, Ordering::Release);
                StoreError::from(e)
            })
        })
    }

    fn save(&self) -> StoreResult<()> {
        self.db.sync()?;
        Ok(self.db.flush()?)
    }

    fn info(&self) -> Vec<(String, String)> {
        let s = self.db.stats();
        let sum = |f: fn(&stratakv::Stats) -> u64| s.shards.iter().map(f).sum::<u64>();
        vec![
            ("storage".to_string(), "engine".to_string()),
            ("engine_shards".into(), s.shards.len().to_string()),
            ("engine_shard_write_batches".into(), s.write_batches.to_string()),
            ("engine_shard_writes".into(), s.writes.to_string()),
            ("engine_shard_multi_gets".into(), s.multi_gets.to_string()),
            ("engine_shard_gets".into(), s.gets.to_string()),
            ("engine_cross_shard_batches".into(), s.cross_batches.to_string()),
            ("engine_gsn".into(), s.gsn.to_string()),
            ("engine_pm_allocated_bytes".into(), sum(|x| x.pm_allocated_bytes).to_string()),
            ("engine_pm_syncs".into(), sum(|x| x.pm_syncs).to_string()),
            ("engine_pm_write_throughs".into(), sum(|x| x.pm_write_throughs).to_string()),
            ("engine_memtable_bytes".into(), sum(|x| x.memtable_bytes).to_string()),
            ("engine_writes".into(), sum(|x| x.writes).to_string()),
            ("engine_flushes".into(), sum(|x| x.flushes).to_string()),
            ("engine_compactions".into(), sum(|x| x.compactions).to_string()),
        ]
    }

    fn used_memory(&self) -> u64 {
        self.db
            .stats()
            .shards
            .iter()
            .map(|s| s.memtable_bytes + s.block_cache_bytes + s.table_index_bytes + s.matrix_dram_bytes)
            .sum()
    }

    fn shutdown(&self, _save: ShutdownSave) -> StoreResult<()> {
        // The shards are the data: every mode syncs them.
        self.db.sync().map_err(StoreError::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(k: &str, v: &str) -> Op {
        (k.as_bytes().to_vec(), Some(v.as_bytes().to_vec()))
    }

    /// Writes spread over the shards read back, scan in order across them,
    /// survive a reopen, and the default clear removes all but `keep`.
    #[test]
    fn writes_scans_clear_and_reopen_across_shards() {
        let dir = tempfile::tempdir().unwrap();
        let opts = || {
            let o = stratakv::Options { pm_size: 64 << 20, write_buffer_size: 256 << 10, ..Default::default() };
            ShardedOptions::new(3, o)
        };
        let s = ShardedStore::open(dir.path(), opts()).unwrap();
        let ops: Vec<Op> = (0..200).map(|i| put(&format!("k{i:03}"), &format!("v{i}"))).collect();
        let p = s.write(ops, true).unwrap();
        s.wait_durable(p).unwrap();
        assert_eq!(s.get(b"k007").unwrap(), Some(b"v7".to_vec()));
        let got = s.scan(b"k010", Some(b"k020"), 100).unwrap();
        let keys: Vec<String> = got.iter().map(|(k, _)| String::from_utf8(k.clone()).unwrap()).collect();
        assert_eq!(keys, (10..20).map(|i| format!("k{i:03}")).collect::<Vec<_>>());
        assert_eq!(s.multi_get(&[b"k001".to_vec(), b"nope".to_vec()]).unwrap(), vec![Some(b"v1".to_vec()), None]);
        assert!(s.sharded().stats().cross_batches >= 1, "200 keys over 3 shards are one cross-shard batch");
        drop(s);
        let s = ShardedStore::open(dir.path(), opts()).unwrap();
        assert_eq!(s.scan(b"", None, 1000).unwrap().len(), 200);
        let _ = s.clear(b"k100", vec![put("z", "1")], false).unwrap();
        let left: Vec<Vec<u8>> = s.scan(b"", None, 1000).unwrap().into_iter().map(|(k, _)| k).collect();
        assert_eq!(left, vec![b"k100".to_vec(), b"z".to_vec()]);
    }
}
