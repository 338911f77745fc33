//! Opening a database, step by step: lock the directory, replay the
//! MANIFEST, open the PM region, rebuild level 0, replay the log into a
//! memtable, remove what a crash left behind, start the threads.

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use strata_pmem::{Backing, Region, RegionOptions};

use super::DbInner;
use crate::engine::{Engine, EngineParts};
use crate::error::{Error, Result};
use crate::fs::{FileLock, Fs};
use crate::l0::{self, RecoverCx};
use crate::log::{next_log_number, replay, split_logs};
use crate::memtable::MemBuffers;
use crate::options::Options;
use crate::version::filename::{self, lock_path, FileKind};
use crate::version::{VersionEdit, VersionSet};

/// Name of the region file inside the PM directory.
pub const REGION_FILE: &str = "strata.pm";

pub(crate) fn open(dir: &Path, mut opts: Options) -> Result<Arc<DbInner>> {
    let started = Instant::now();
    opts.validate().map_err(Error::InvalidArgument)?;
    let fs = opts.fs.clone();
    let lock = lock_dir(&*fs, dir, &opts)?;
    let mut vs = open_versions(&fs, dir, &opts)?;
    // A database keeps the level 0 it was created with.
    let level0 = l0::for_manifest(&mut opts, vs.l0_kind);
    let (region, region_path) = open_region(dir, &opts, &mut vs)?;
    let region_path = Arc::new(region_path);

    let heads = region.heads().map_err(|e| Error::from_pm(&region_path, e))?;
    // Log numbers that may have been used are never handed out again; see
    // `next_log_number`. Recorded before recovery erases any log head.
    let next_log = next_log_number(&heads, vs.log_number, vs.next_log_number);
    if next_log > vs.next_log_number {
        vs.log_and_apply(VersionEdit { next_log_number: Some(next_log), ..Default::default() })?;
    }

    // Level 0 adopts its PM structures and the older log extents they
    // point into; the other older log extents hold nothing any more.
    let (live_logs, mut older_logs) = split_logs(&heads, vs.log_number);
    let manifest_path = vs.manifest_path();
    let cx = RecoverCx {
        region: &region,
        region_path: &region_path,
        manifest_path: &manifest_path,
        record: vs.l0_record(),
        heads: &heads,
    };
    let l0_state = level0.recover(&cx, &mut older_logs)?;
    for h in older_logs {
        region.retire(h).map_err(|e| Error::from_pm(&region_path, e))?;
    }
    if let Some(s) = l0_state {
        vs.install_l0(s);
    }

    // Rebuild the memtable from the live log extents.
    let buffers = MemBuffers::new(opts.write_buffer_size);
    buffers.prefault();
    let replayed = replay(&region, &region_path, live_logs, vs.last_sequence, vs.log_number, buffers)?;

    remove_orphans(&*fs, dir, &vs);
    let partitioned = vs.next_partition > 1;
    let eng = Engine::new(EngineParts {
        dir: dir.to_path_buf(),
        opts,
        fs,
        region,
        region_path,
        versions: vs,
        mem: replayed.mem,
        next_log_number: next_log,
        last_seq: replayed.last_seq,
        stall_policy: level0.stall_policy(),
    });
    let inner = Arc::new(DbInner {
        eng,
        l0: level0,
        threads: Mutex::new(Vec::new()),
        _lock: lock,
        recovery_micros: started.elapsed().as_micros() as u64,
        recovery_anomalies: replayed.anomalies,
        partitioned: std::sync::atomic::AtomicBool::new(partitioned),
        partition_ops: Mutex::new(()),
        retire_checked: Mutex::new(std::sync::Weak::new()),
        tombstone_clean: Mutex::new(Default::default()),
        live_partitions: Mutex::new(Default::default()),
    });
    {
        let mut w = inner.eng.log.lock();
        if w.mem.approximate_bytes() >= inner.eng.opts.write_buffer_size {
            inner.eng.switch_memtable(&mut w);
        }
    }
    if let Err(e) = inner.start_threads() {
        let _ = inner.shutdown();
        return Err(e);
    }
    Ok(inner)
}

/// Creates `dir` if allowed and locks it against other processes.
fn lock_dir(fs: &dyn Fs, dir: &Path, opts: &Options) -> Result<Box<dyn FileLock>> {
    if !fs.exists(dir) && !opts.create_if_missing {
        return Err(Error::InvalidArgument(format!("{} does not exist (create_if_missing is off)", dir.display())));
    }
    fs.create_dir_all(dir).map_err(|e| Error::io(dir, "create dir", e))?;
    let lpath = lock_path(dir);
    fs.lock(&lpath).map_err(|e| match e.kind() {
        io::ErrorKind::WouldBlock => Error::Locked { path: dir.to_path_buf() },
        _ => Error::io(&lpath, "lock", e),
    })
}

/// Replays the MANIFEST of the database in `dir`, or creates one.
fn open_versions(fs: &Arc<dyn Fs>, dir: &Path, opts: &Options) -> Result<VersionSet> {
    let exists = VersionSet::exists(&**fs, dir);
    if exists && opts.error_if_exists {
        return Err(Error::InvalidArgument(format!("{} already holds a database", dir.display())));
    }
    if !exists && !opts.create_if_missing {
        return Err(Error::InvalidArgument(format!("{} holds no database", dir.display())));
    }
    if exists {
        VersionSet::recover(fs.clone(), dir)
    } else {
        VersionSet::create(fs.clone(), dir, opts.l0.code())
    }
}

/// Opens (creating) the PM region, and records its id in a new database.
fn open_region(dir: &Path, opts: &Options, vs: &mut VersionSet) -> Result<(Region, std::path::PathBuf)> {
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
    Ok((region, region_path))
}

/// Removes files a crash left behind: tables no version references,
/// temporary files, old MANIFESTs. Best effort.
fn remove_orphans(fs: &dyn Fs, dir: &Path, vs: &VersionSet) {
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
