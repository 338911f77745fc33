//! Opening a database: lock, MANIFEST replay, PM log recovery.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::io;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex};
use strata_pmem::{Backing, Extent, Region, RegionOptions};

use super::pipeline::Pipeline;
use super::{Counters, DbInner, State, SuperVersion, WriteState, LOG_HEADS_IN_FLIGHT};
use crate::error::{Error, Result};
use crate::key::key_prefix;
use crate::log::{scan_extent, ScanEnd, EXTENT_KIND_LOG};
use crate::matrix::build::EXTENT_KIND_ROW;
use crate::matrix::row::Row;
use crate::matrix::{LiveRow, MatrixRecord, MatrixState};
use crate::memtable::{MemBuffers, Memtable};
use crate::options::{L0Kind, Options};
use crate::sstable::{BlockCache, TableOptions};
use crate::version::filename::{self, lock_path, FileKind};
use crate::version::{TableCache, VersionEdit, VersionSet};

/// Name of the region file inside the PM directory.
pub const REGION_FILE: &str = "strata.pm";

pub(crate) fn open(dir: &Path, mut opts: Options) -> Result<Arc<DbInner>> {
    let started = Instant::now();
    opts.validate().map_err(Error::InvalidArgument)?;
    let fs = opts.fs.clone();
    if !fs.exists(dir) && !opts.create_if_missing {
        return Err(Error::InvalidArgument(format!("{} does not exist (create_if_missing is off)", dir.display())));
    }
    fs.create_dir_all(dir).map_err(|e| Error::io(dir, "create dir", e))?;
    let lpath = lock_path(dir);
    let lock = fs.lock(&lpath).map_err(|e| match e.kind() {
        io::ErrorKind::WouldBlock => Error::Locked { path: dir.to_path_buf() },
        _ => Error::io(&lpath, "lock", e),
    })?;
    let exists = VersionSet::exists(&*fs, dir);
    if exists && opts.error_if_exists {
        return Err(Error::InvalidArgument(format!("{} already holds a database", dir.display())));
    }
    if !exists && !opts.create_if_missing {
        return Err(Error::InvalidArgument(format!("{} holds no database", dir.display())));
    }
    let mut vs = if exists {
        VersionSet::recover(fs.clone(), dir)?
    } else {
        VersionSet::create(fs.clone(), dir, opts.l0.code())?
    };
    // A database keeps the L0 layout it was created with.
    opts.l0 = match vs.l0_kind {
        Some(1) => L0Kind::Matrix,
        _ => L0Kind::Sstable,
    };

    let pm_dir = opts.pm_dir.clone().unwrap_or_else(|| dir.join("pm"));
    let region_path = pm_dir.join(REGION_FILE);
    let backing = match &opts.pm_sim {
        Some(sim) => Backing::Sim(sim.clone()),
        None => {
            std::fs::create_dir_all(&pm_dir).map_err(|e| Error::io(&pm_dir, "create dir", e))?;
            Backing::File(region_path.clone())
        }
    };
    let ropts = RegionOptions {
        len: opts.pm_size,
        slot_bytes: opts.slot_bytes(),
        write_latency_ns: opts.pm_write_latency_ns,
        create: true,
        expect_id: vs.pm_region_id,
    };
    let (region, _outcome) = Region::open(backing, &ropts).map_err(|e| Error::from_pm(&region_path, e))?;
    if vs.pm_region_id.is_none() {
        vs.log_and_apply(VersionEdit { pm_region_id: Some(region.id()), ..Default::default() })?;
    }

    // Matrix rows: adopt the row extents the MANIFEST names, and the log
    // extents their elements point into.
    let mpath = vs.manifest_path();
    let record = match &vs.matrix {
        Some(b) => MatrixRecord::decode(b).map_err(|why| Error::corruption(&mpath, 0, why))?,
        None => MatrixRecord { next_row_id: 1, rows: Vec::new() },
    };
    let heads = region.heads().map_err(|e| Error::from_pm(&region_path, e))?;
    let max_number = heads.iter().filter(|h| h.kind == EXTENT_KIND_LOG).map(|h| h.number).max().unwrap_or(0);
    // Recovery below may erase log heads (extents with no entry that
    // continues the log). Their numbers must never be handed out again: a
    // reused number would make their stale entries look like a valid
    // continuation of a later log. So record the high-water mark first.
    // The last process may also have allocated up to LOG_HEADS_IN_FLIGHT
    // more log extents whose heads never became durable (a head's msync
    // comes after the writer starts filling its extent): numbers right
    // after the newest durable head, or from the MANIFEST's log number (if
    // the extents before it were flushed), or from the number it started
    // at. Those numbers are skipped too.
    let in_flight = LOG_HEADS_IN_FLIGHT as u64;
    let next_log_number =
        (max_number + 1 + in_flight).max(vs.log_number + in_flight).max(vs.next_log_number + in_flight);
    if next_log_number > vs.next_log_number {
        vs.log_and_apply(VersionEdit { next_log_number: Some(next_log_number), ..Default::default() })?;
    }
    let pm = |e| Error::from_pm(&region_path, e);
    let mut row_extents = Vec::new();
    for m in &record.rows {
        let h = heads
            .iter()
            .find(|h| h.kind == EXTENT_KIND_ROW && h.slot == m.slot && h.number == m.id && h.slots == m.slots)
            .copied()
            .ok_or_else(|| {
                Error::corruption(&region_path, m.slot, format!("matrix row {} is missing from the PM region", m.id))
            })?;
        row_extents.push(region.adopt(h).map_err(pm)?);
    }
    let mut row_logs: Vec<Vec<Extent>> = vec![Vec::new(); record.rows.len()];
    for h in heads.iter().filter(|h| h.kind == EXTENT_KIND_ROW) {
        if !record.rows.iter().any(|m| m.id == h.number && m.slot == h.slot) {
            // Built but never published (crash before its MANIFEST edit), or merged away.
            region.retire(*h).map_err(pm)?;
        }
    }
    let mut logs: Vec<_> = heads.iter().filter(|h| h.kind == EXTENT_KIND_LOG).copied().collect();
    logs.sort_by_key(|h| h.number);
    let mut live_logs = Vec::new();
    for h in logs {
        if h.number >= vs.log_number {
            live_logs.push(h);
        } else if let Some(i) = record.rows.iter().position(|m| (m.first_log..=m.last_log).contains(&h.number)) {
            if let Some(v) = row_logs.get_mut(i) {
                v.push(region.adopt(h).map_err(pm)?);
            }
        } else {
            // Its data is in tables; forget it.
            region.retire(h).map_err(pm)?;
        }
    }
    let shared_path = Arc::new(region_path.clone());
    let mut live_rows = Vec::new();
    for ((m, ext), logs) in record.rows.iter().zip(row_extents).zip(row_logs) {
        let row = Row::open(ext, logs, shared_path.clone())?;
        live_rows.push(LiveRow::new(
            row,
            m.start,
            m.compactor,
            m.first_log,
            m.last_log,
            opts.matrix_hash_index,
            opts.prefix_extractor.as_deref(),
        )?);
    }
    let matrix = MatrixState::recovered(record.next_row_id, live_rows, opts.rows_per_segment, opts.matrix_hash_index);

    // Rebuild the memtable from the live log extents, in log order. The
    // records are collected first and inserted in key order: sorted inserts
    // walk a cache-hot path of the skiplist (several times faster for a big log).
    let buffers = MemBuffers::new(opts.write_buffer_size);
    buffers.prefault();
    let mem = Arc::new(Memtable::with_buffers(1, region.clone(), region_path.clone(), vs.log_number, buffers));
    let mut next_seq = Some(vs.last_sequence + 1);
    let mut anomalies: Vec<(u64, String)> = Vec::new();
    let mut found: Vec<Recovered> = Vec::new();
    for h in live_logs {
        let ext = region.adopt(h).map_err(pm)?;
        let mut accepted = 0u64;
        let end = scan_extent(&ext, h.number, &mut next_seq, &region_path, |entry| {
            for (i, rec) in entry.records.iter().enumerate() {
                found.push(Recovered {
                    prefix: key_prefix(rec.key),
                    key_off: rec.key_off,
                    key_len: rec.key.len() as u32,
                    trailer: (entry.seq + i as u64) << 8 | rec.kind as u64,
                    value_off: rec.value_off,
                    value_len: rec.value.len() as u32,
                });
            }
            mem.charge(entry.len as usize);
            accepted += 1;
            Ok(())
        })?;
        if let ScanEnd::Torn { offset, valid_after: true } = end {
            anomalies.push((
                offset,
                format!(
                    "log extent {} has a damaged entry followed by valid ones; \
                     recovery kept the log up to it (point-in-time)",
                    h.number
                ),
            ));
        }
        if accepted > 0 {
            // Read back from the page cache after a process crash, neither
            // its entries nor its head may ever have been msynced, and no
            // log sync of this process covers the extent: make both durable
            // now, before a sync write after it (or a row pointing into it)
            // can be acknowledged.
            region.sync(ext.offset(), ext.len()).map_err(pm)?;
            ext.sync_head().map_err(pm)?;
            mem.hold_extent(ext);
        } else {
            // Nothing here continues the log: never written, or written after
            // a gap (never acknowledged, or past a damaged entry). Erase its
            // head so it cannot be taken for part of a later memtable's log.
            drop(ext);
            region.retire(h).map_err(pm)?;
        }
    }
    let key_of = |r: &Recovered| region.read(r.key_off, r.key_len as u64).unwrap_or(&[]);
    found.sort_unstable_by(|a, b| {
        a.prefix.cmp(&b.prefix).then_with(|| key_of(a).cmp(key_of(b))).then_with(|| b.trailer.cmp(&a.trailer))
    });
    for r in &found {
        let key = region.read(r.key_off, r.key_len as u64).map_err(pm)?;
        let kind = crate::key::Kind::from_u8(r.trailer as u8)
            .ok_or_else(|| Error::corruption(&region_path, r.key_off, "bad record kind"))?;
        mem.add(r.trailer >> 8, kind, key, r.value_off, r.value_len)?;
    }
    drop(found);
    let last_seq = next_seq.map(|s| s - 1).unwrap_or(vs.last_sequence).max(vs.last_sequence);
    mem.note_seq(last_seq);

    remove_orphans(&*fs, dir, &vs);

    let blocks = (opts.block_cache_bytes > 0).then(|| Arc::new(BlockCache::new(opts.block_cache_bytes)));
    let tables = Arc::new(TableCache::new(fs.clone(), dir, blocks));
    let version = vs.current();
    let write = WriteState {
        mem: mem.clone(),
        writer: None,
        pending_heads: VecDeque::new(),
        log_tail: Arc::new(std::sync::atomic::AtomicU64::new(0)),
        log_number: 0,
        next_log_number,
        next_seq: last_seq + 1,
        next_mem_id: 2,
    };
    let view = matrix.view();
    let state = State {
        mem: mem.clone(),
        imms: VecDeque::new(),
        version: version.clone(),
        matrix_data_bytes: matrix.data_bytes(),
        matrix_pm_bytes: matrix.pm_bytes(),
        matrix: view.clone(),
        column_busy: false,
        busy: HashSet::new(),
        obsolete: Vec::new(),
        poisoned: None,
        bg_error: None,
        pm_wait_since: None,
        bg_error_retry: 0,
        bg_retries: 0,
        compactions_running: 0,
        installs: 0,
    };
    let sv = SuperVersion { mem: mem.clone(), imms: Vec::new(), matrix: view, version };
    let inner = Arc::new(DbInner {
        dir: dir.to_path_buf(),
        fs,
        _lock: lock,
        region,
        shared_region_path: Arc::new(region_path.clone()),
        region_path,
        tables,
        write: Mutex::new(write),
        pipeline: Pipeline::new(last_seq),
        state: Mutex::new(state),
        state_cv: Condvar::new(),
        versions: Mutex::new(vs),
        matrix: Mutex::new(matrix),
        sv: ArcSwap::from_pointee(sv),
        snapshots: Mutex::new(BTreeMap::new()),
        unsynced: Mutex::new(Vec::new()),
        shutting_down: AtomicBool::new(false),
        poisoned_flag: AtomicBool::new(false),
        throttle_rate: std::sync::atomic::AtomicU64::new(0),
        throttle_next: Mutex::new(std::time::Instant::now()),
        counters: Counters::default(),
        threads: Mutex::new(Vec::new()),
        prefault: Mutex::new(None),
        spare_mem: Arc::new(Mutex::new(None)),
        recovery_micros: started.elapsed().as_micros() as u64,
        recovery_anomalies: anomalies,
        table_opts: TableOptions {
            block_size: opts.block_size,
            restart_interval: opts.block_restart_interval,
            bloom_bits_per_key: opts.bloom_bits_per_key,
            compression: opts.compression,
        },
        opts,
    });
    {
        let mut w = inner.write.lock();
        if w.mem.approximate_bytes() >= inner.opts.write_buffer_size {
            inner.switch_memtable(&mut w);
        }
    }
    if let Err(e) = inner.start_threads() {
        let _ = inner.shutdown();
        return Err(e);
    }
    Ok(inner)
}

/// A record found in the log during recovery, located in PM.
struct Recovered {
    prefix: u64,
    key_off: u64,
    key_len: u32,
    trailer: u64,
    value_off: u64,
    value_len: u32,
}

/// Removes files a crash left behind: tables no version references,
/// temporary files, old MANIFESTs. Best effort.
fn remove_orphans(fs: &dyn crate::fs::Fs, dir: &Path, vs: &VersionSet) {
    let live = vs.live_files();
    let Ok(names) = fs.list(dir) else { return };
    for name in names {
        let remove = match filename::parse(&name) {
            Some(FileKind::Table(n)) => !live.contains(&n),
            Some(FileKind::Temp) => true,
            Some(FileKind::Manifest(n)) => n != vs.manifest_number(),
            _ => false,
        };
        if remove {
            let _ = fs.remove(&dir.join(&name));
        }
    }
}
