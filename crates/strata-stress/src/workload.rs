//! Random workloads shared by the modes: keys, unique values, operations.

use std::ops::Bound;

use rand::Rng;
use stratakv::{Db, KeyRange, Partition, WriteBatch, WriteOptions};

use crate::oracle::Update;

/// One step of a workload.
#[derive(Clone, Debug)]
pub enum Op {
    /// A put, a delete, a batch of them, a range deletion or a dropped
    /// partition: to an oracle, updates applied all or nothing.
    Write {
        /// The updates, applied atomically (oracle keys: see [`PARTITION_KEY`]).
        updates: Vec<Update>,
        /// Ask for durability against power loss.
        sync: bool,
        /// How the database is asked to apply them.
        how: How,
    },
    /// `Db::flush`: seal the memtable, wait for the row or table.
    Flush,
    /// `Db::compact_range`.
    Compact(KeyRange),
    /// Close (or drop) and reopen the database.
    Reopen {
        /// `Db::close` (true) or just drop (false).
        clean: bool,
    },
    /// `Db::sync`.
    Sync,
}

/// How a write reaches the database ([`write`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum How {
    /// One `WriteBatch` (spanning both partitions if its keys do).
    Batch,
    /// `delete_range(start, end)` of oracle keys in one partition; the
    /// updates delete every key of the range.
    DeleteRange {
        /// First oracle key.
        start: Vec<u8>,
        /// First oracle key after the range.
        end: Vec<u8>,
    },
    /// `drop_partition` of [`PARTITION`]; the updates delete every key it can hold.
    DropPartition,
}

/// The partition the workloads use besides the default one.
pub const PARTITION: &str = "p";

/// How oracles name a key `k` of [`PARTITION`]: `@p/k`.
pub const PARTITION_KEY: &[u8] = b"@p/";

/// The key of [`PARTITION`] an oracle key names, if it names one.
pub fn partition_key(k: &[u8]) -> Option<&[u8]> {
    k.strip_prefix(PARTITION_KEY)
}

/// The oracle key of key index `i`, in [`PARTITION`] or the default partition.
pub fn oracle_key(partition: bool, i: u32) -> Vec<u8> {
    if partition {
        [PARTITION_KEY, key(i).as_slice()].concat()
    } else {
        key(i)
    }
}

/// Applies a write op to `db` as `how` says.
pub fn write(db: &Db, updates: &[Update], sync: bool, how: &How) -> Result<(), stratakv::Error> {
    let part = || db.partition_or_create(PARTITION);
    match how {
        How::Batch => {
            let p: Option<Partition> =
                if updates.iter().any(|(k, _)| partition_key(k).is_some()) { Some(part()?) } else { None };
            let mut b = WriteBatch::new();
            for (k, v) in updates {
                match (partition_key(k).zip(p.as_ref()), v) {
                    (Some((pk, p)), Some(v)) => b.put_in(p, pk, v),
                    (Some((pk, p)), None) => b.delete_in(p, pk),
                    (None, Some(v)) => b.put(k, v),
                    (None, None) => b.delete(k),
                };
            }
            db.write_opt(&b, &WriteOptions { sync })
        }
        How::DeleteRange { start, end } => match (partition_key(start), partition_key(end)) {
            (Some(s), Some(e)) => part()?.delete_range(s, e),
            _ => db.delete_range(start, end),
        },
        How::DropPartition => match db.drop_partition(PARTITION) {
            // Not created yet (or dropped already): nothing to drop.
            Err(stratakv::Error::InvalidArgument(_)) => Ok(()),
            r => r,
        },
    }
}

/// Every key of an open database as oracle keys: the default partition's
/// as they are, [`PARTITION`]'s with [`PARTITION_KEY`] in front.
pub fn read_all(db: &Db) -> Result<crate::oracle::Kvs, stratakv::Error> {
    let mut out = crate::read_all(db)?;
    if db.list_partitions().iter().any(|p| p == PARTITION) {
        let mut it = db.partition(PARTITION)?.iter(..)?;
        while let Some((k, v)) = it.try_next()? {
            out.push(([PARTITION_KEY, k.as_slice()].concat(), v));
        }
    }
    out.sort();
    Ok(out)
}

/// Relative weights of the operations.
#[derive(Clone, Copy, Debug)]
pub struct Mix {
    /// Single puts.
    pub put: u32,
    /// Single deletes.
    pub delete: u32,
    /// Batches of 2..=8 updates.
    pub batch: u32,
    /// Flushes.
    pub flush: u32,
    /// Range compactions.
    pub compact: u32,
    /// Reopens.
    pub reopen: u32,
    /// Explicit syncs.
    pub sync: u32,
    /// Range deletions.
    pub range_delete: u32,
    /// Drops of [`PARTITION`].
    pub drop_partition: u32,
}

impl Default for Mix {
    fn default() -> Self {
        Mix {
            put: 60,
            delete: 12,
            batch: 14,
            flush: 4,
            compact: 2,
            reopen: 1,
            sync: 2,
            range_delete: 2,
            drop_partition: 1,
        }
    }
}

/// Generates operations over `keys` keys with values unique per write.
#[derive(Clone, Debug)]
pub struct Gen {
    /// Size of the key space.
    pub keys: u32,
    /// Largest value (bytes).
    pub max_value: usize,
    /// Share of writes with `sync` (0..=1).
    pub sync_share: f64,
    /// Operation weights.
    pub mix: Mix,
    writes: u64,
}

/// The key with index `i`.
pub fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// A value unique to write `op` and key `k`, `len` bytes or a little more.
pub fn value(op: u64, k: &[u8], len: usize) -> Vec<u8> {
    let mut v = format!("v{op}.{}.", String::from_utf8_lossy(k)).into_bytes();
    let fill = b'a' + (op % 26) as u8;
    while v.len() < len {
        v.push(fill);
    }
    v
}

impl Gen {
    /// A generator over `keys` keys.
    pub fn new(keys: u32, max_value: usize) -> Gen {
        Gen { keys: keys.max(1), max_value, sync_share: 0.5, mix: Mix::default(), writes: 0 }
    }

    /// Writes generated so far.
    pub fn writes(&self) -> u64 {
        self.writes
    }

    fn value_len(&self, rng: &mut impl Rng) -> usize {
        let max = self.max_value.max(1);
        match rng.gen_range(0..100) {
            0..=59 => rng.gen_range(0..=max.min(64)),
            60..=94 => rng.gen_range(0..=max.min(600)),
            _ => rng.gen_range(0..=max),
        }
    }

    fn update(&self, rng: &mut impl Rng, op: u64, delete: bool) -> Update {
        // A quarter of the keys are in the partition.
        let k = oracle_key(rng.gen_bool(0.25), rng.gen_range(0..self.keys));
        if delete {
            (k, None)
        } else {
            let len = self.value_len(rng);
            let v = value(op, &k, len);
            (k, Some(v))
        }
    }

    /// A random key range.
    pub fn range(&self, rng: &mut impl Rng) -> KeyRange {
        let mut b = || -> Bound<Vec<u8>> {
            let k = key(rng.gen_range(0..self.keys));
            match rng.gen_range(0..3) {
                0 => Bound::Unbounded,
                1 => Bound::Included(k),
                _ => Bound::Excluded(k),
            }
        };
        KeyRange { start: b(), end: b() }
    }

    /// The next write (only writes).
    pub fn next_write(&mut self, rng: &mut impl Rng) -> Op {
        let m = self.mix;
        let total = m.put + m.delete + m.batch;
        let pick = rng.gen_range(0..total.max(1));
        self.writes += 1;
        let op = self.writes;
        let updates = if pick < m.put {
            vec![self.update(rng, op, false)]
        } else if pick < m.put + m.delete {
            vec![self.update(rng, op, true)]
        } else {
            let n = rng.gen_range(2..=8);
            (0..n)
                .map(|_| {
                    let del = rng.gen_bool(0.2);
                    self.update(rng, op, del)
                })
                .collect()
        };
        Op::Write { updates, sync: rng.gen_bool(self.sync_share), how: How::Batch }
    }

    /// A range deletion over random keys of one partition.
    fn range_delete(&mut self, rng: &mut impl Rng) -> Op {
        self.writes += 1;
        let part = rng.gen_bool(0.3);
        let (a, b) = (rng.gen_range(0..self.keys), rng.gen_range(0..=self.keys));
        let (a, b) = (a.min(b), a.max(b));
        let updates = (a..b).map(|i| (oracle_key(part, i), None)).collect();
        let how = How::DeleteRange { start: oracle_key(part, a), end: oracle_key(part, b) };
        Op::Write { updates, sync: false, how }
    }

    /// A drop of the partition.
    fn drop_partition(&mut self) -> Op {
        self.writes += 1;
        let updates = (0..self.keys).map(|i| (oracle_key(true, i), None)).collect();
        Op::Write { updates, sync: false, how: How::DropPartition }
    }

    /// The next operation of any kind.
    pub fn next(&mut self, rng: &mut impl Rng) -> Op {
        let m = self.mix;
        let writes = m.put + m.delete + m.batch;
        let total = writes + m.flush + m.compact + m.reopen + m.sync + m.range_delete + m.drop_partition;
        let mut pick = rng.gen_range(0..total.max(1));
        if pick < writes {
            return self.next_write(rng);
        }
        pick -= writes;
        if pick < m.range_delete {
            return self.range_delete(rng);
        }
        pick -= m.range_delete;
        if pick < m.drop_partition {
            return self.drop_partition();
        }
        pick -= m.drop_partition;
        if pick < m.flush {
            return Op::Flush;
        }
        pick -= m.flush;
        if pick < m.compact {
            return Op::Compact(if rng.gen_bool(0.5) { KeyRange::all() } else { self.range(rng) });
        }
        pick -= m.compact;
        if pick < m.reopen {
            return Op::Reopen { clean: rng.gen_bool(0.5) };
        }
        Op::Sync
    }
}

/// The batch that applies `updates`.
pub fn to_batch(updates: &[Update]) -> WriteBatch {
    let mut b = WriteBatch::new();
    for (k, v) in updates {
        match v {
            Some(v) => b.put(k, v),
            None => b.delete(k),
        };
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn values_are_unique_per_write_and_key() {
        assert_ne!(value(1, b"k", 10), value(2, b"k", 10));
        assert_ne!(value(1, b"k1", 0), value(1, b"k2", 0));
        assert!(value(3, b"k", 100).len() >= 100);
    }

    #[test]
    fn generator_makes_every_kind() {
        let mut g = Gen::new(10, 100);
        let mut rng = StdRng::seed_from_u64(1);
        let (mut w, mut f, mut c, mut r, mut s) = (0, 0, 0, 0, 0);
        for _ in 0..5000 {
            match g.next(&mut rng) {
                Op::Write { .. } => w += 1,
                Op::Flush => f += 1,
                Op::Compact(_) => c += 1,
                Op::Reopen { .. } => r += 1,
                Op::Sync => s += 1,
            }
        }
        assert!(w > 0 && f > 0 && c > 0 && r > 0 && s > 0);
        assert_eq!(g.writes(), w);
    }
}
