//! Full PM region and full disk: back-pressure, then a clear error; no
//! acknowledged write lost; the database reopens and resumes once room is made.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use stratakv::fs::{FileLock, Fs, RandomAccessFile, StdFs, WritableFile};
use stratakv::{Db, Error, Options};

fn value(i: u32) -> Vec<u8> {
    format!("value-{i}-{}", "v".repeat(200)).into_bytes()
}

#[test]
fn full_pm_region_is_back_pressure_then_an_error_then_recovers_sstable_l0() {
    full_pm(stratakv::L0Kind::Sstable);
}

#[test]
fn full_pm_region_is_back_pressure_then_an_error_then_recovers_matrix_l0() {
    full_pm(stratakv::L0Kind::Matrix);
}

fn full_pm(l0: stratakv::L0Kind) {
    let dir = tempfile::tempdir().unwrap();
    let mut o = Options::for_tests();
    o.l0 = l0;
    o.pm_size = 2 << 20;
    o.matrix_bytes = 1 << 20;
    o.write_buffer_size = 256 << 10;
    o.pm_full_timeout_ms = 300;
    let db = Db::open(dir.path(), o.clone()).unwrap();
    // An open iterator pins every memtable it saw, so flushes cannot free PM.
    let mut acked = 0u32;
    let mut pin = Vec::new();
    let err = loop {
        if acked.is_multiple_of(500) {
            let mut it = db.iter(..).unwrap();
            it.next(); // the first step builds the cursor, which pins the memtables
            pin.push(it);
        }
        match db.put(format!("k{acked:06}"), value(acked)) {
            Ok(()) => acked += 1,
            Err(e) => break e,
        }
        assert!(acked < 100_000, "PM never filled up");
    };
    assert!(matches!(err, Error::PmFull(_)), "{err}");
    // Releasing the pins lets flushes free PM; writes resume.
    drop(pin);
    for i in acked..acked + 2000 {
        db.put(format!("k{i:06}"), value(i)).unwrap();
    }
    let total = acked + 2000;
    drop(db);
    let db = Db::open(dir.path(), o).unwrap();
    for i in 0..total {
        assert_eq!(db.get(format!("k{i:06}")).unwrap(), Some(value(i)), "k{i:06} lost");
    }
}

/// A file system that fails appends with ENOSPC once `budget` bytes are used.
#[derive(Debug)]
struct LimitFs {
    used: Arc<AtomicU64>,
    budget: Arc<AtomicU64>,
}

struct LimitFile {
    inner: Box<dyn WritableFile>,
    used: Arc<AtomicU64>,
    budget: Arc<AtomicU64>,
}

impl WritableFile for LimitFile {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        let now = self.used.fetch_add(data.len() as u64, Ordering::SeqCst) + data.len() as u64;
        if now > self.budget.load(Ordering::SeqCst) {
            self.used.fetch_sub(data.len() as u64, Ordering::SeqCst);
            return Err(io::Error::from_raw_os_error(28));
        }
        self.inner.append(data)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
    fn sync(&mut self) -> io::Result<()> {
        self.inner.sync()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
}

impl Fs for LimitFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        StdFs.create_dir_all(dir)
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        Ok(Box::new(LimitFile { inner: StdFs.create(path)?, used: self.used.clone(), budget: self.budget.clone() }))
    }
    fn append(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        Ok(Box::new(LimitFile { inner: StdFs.append(path)?, used: self.used.clone(), budget: self.budget.clone() }))
    }
    fn open(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        StdFs.open(path)
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        StdFs.read(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        StdFs.rename(from, to)
    }
    fn truncate(&self, path: &Path, len: u64, sync: bool) -> io::Result<()> {
        StdFs.truncate(path, len, sync)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        StdFs.remove(path)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        StdFs.list(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        StdFs.exists(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        StdFs.sync_dir(dir)
    }
    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        StdFs.lock(path)
    }
}

#[test]
fn full_disk_is_back_pressure_then_an_error_then_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let budget = Arc::new(AtomicU64::new(400 << 10));
    let fs = LimitFs { used: Arc::new(AtomicU64::new(0)), budget: budget.clone() };
    let mut o = Options::for_tests();
    o.fs = Arc::new(fs);
    o.pm_full_timeout_ms = 300;
    let db = Db::open(dir.path(), o.clone()).unwrap();
    let mut acked = 0u32;
    let err = loop {
        match db.put(format!("k{acked:06}"), value(acked)) {
            Ok(()) => acked += 1,
            Err(e) => break e,
        }
        assert!(acked < 200_000, "the disk never filled up");
    };
    assert!(matches!(err, Error::DiskFull { .. }), "{err}");
    assert!(db.stats().poisoned.is_none(), "a full disk must not poison the database");
    // Make room: background work retries and writes resume.
    budget.store(u64::MAX, Ordering::SeqCst);
    for i in acked..acked + 3000 {
        db.put(format!("k{i:06}"), value(i)).unwrap();
    }
    let total = acked + 3000;
    db.flush().unwrap();
    drop(db);
    let db = Db::open(dir.path(), o).unwrap();
    for i in 0..total {
        assert_eq!(db.get(format!("k{i:06}")).unwrap(), Some(value(i)), "k{i:06} lost");
    }
    db.verify_checksums().unwrap();
}

/// A cross-shard batch whose part meets a full PM region: the caller gets
/// `PmFull`, and once room is made the batch is completed whole (its shard
/// applies the owed part before its next write), later batches are
/// accepted without a reopen, and all of them are whole after one. The
/// front end used to refuse every write until a reopen, while writes
/// already queued behind the failed part went on and could raise the
/// shard's GSN past it (the reopen then skipped the part's redo).
#[test]
fn a_cross_shard_batch_that_meets_a_full_pm_region_is_completed_once_room_is_made() {
    use stratakv::{Sharded, ShardedOptions, WriteBatch};
    const KEYS: usize = 8;
    let dir = tempfile::tempdir().unwrap();
    let mut o = Options::for_tests();
    // 16 MiB per shard (the front end's floor).
    o.pm_size = 32 << 20;
    o.matrix_bytes = 16 << 20;
    o.write_buffer_size = 4 << 20;
    o.pm_full_timeout_ms = 300;
    let opts = ShardedOptions::new(2, o);
    let db = Sharded::open(dir.path(), opts.clone()).unwrap();
    let big = |i: usize| format!("{i}-{}", "v".repeat(4000)).into_bytes();
    // Eight keys per batch: with two shards, nearly every batch spans both.
    let batch = |i: usize| {
        let mut b = WriteBatch::new();
        for j in 0..KEYS {
            b.put(format!("c{i:06}-{j}"), big(i));
        }
        b
    };
    // Every key of batch `i` there, or (`whole_or_none`) none of them.
    let check = |db: &Sharded, i: usize, whole_or_none: bool| {
        let keys: Vec<String> = (0..KEYS).map(|j| format!("c{i:06}-{j}")).collect();
        let vals = db.multi_get(&keys).unwrap();
        let there = vals.iter().filter(|v| v.as_deref() == Some(&big(i)[..])).count();
        let ok = there == KEYS || (whole_or_none && there == 0);
        assert!(ok, "batch {i}: {there} of {KEYS} keys there");
    };
    let mut pins = Vec::new();
    let mut i = 0;
    let failed = loop {
        if i % 100 == 0 {
            // Open iterators pin memtables and PM, so the regions fill.
            let mut it = db.iter(..).unwrap();
            it.next();
            pins.push(it);
        }
        match db.write(batch(i)) {
            Ok(()) => i += 1,
            Err(e) => {
                assert!(matches!(e, Error::PmFull(_)), "a full shard gave {e}, not PmFull");
                break i;
            }
        }
        assert!(i < 20_000, "the shards' PM regions never filled up");
    };
    drop(pins);
    for k in failed + 1..failed + 20 {
        db.write(batch(k)).unwrap_or_else(|e| panic!("batch {k} after room was made: {e}"));
    }
    for k in 0..failed + 20 {
        check(&db, k, false);
    }
    db.close().unwrap();
    let db = Sharded::open(dir.path(), opts).unwrap();
    for k in 0..failed + 20 {
        check(&db, k, false);
    }
}
