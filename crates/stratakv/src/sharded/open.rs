//! Opening a sharded database: the shard count check, the shards, the
//! coordinator log's redo, the GSN counter, the workers.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

use parking_lot::Mutex;
use strata_pmem::SimPm;

use crate::db::Db;
use crate::error::{Error, Result};
use crate::options::{Options, WriteOptions};

use super::coord::CoordLog;
use super::layout::{check_or_create, gsn_key, shard_dir};
use super::queue::Queue;
use super::worker::{spawn, Applier, WorkerCounters};
use super::{Sharded, ShardedOptions};

/// The options shard `i` of `n` opens with: its own PM region (in its own
/// directory, or `pm_dir/shard-XXX`; a simulated device is set by `open`),
/// and an n-th of the PM and block-cache budgets, so N shards use what one
/// `Db` would.
pub(crate) fn shard_options(o: &Options, i: usize, n: usize) -> Options {
    let mut s = o.clone();
    s.pm_sim = None;
    if n > 1 {
        s.pm_size = (o.pm_size / n as u64).max(16 << 20);
        s.block_cache_bytes = o.block_cache_bytes / n as u64;
        // The memtable budget too: N full-size memtables would hold N times
        // the DRAM of one `Db` with these options (and their larger working
        // set costs every insert more cache misses).
        s.write_buffer_size = (o.write_buffer_size / n).max(o.write_buffer_size.min(1 << 20));
        if o.matrix_bytes != 0 {
            s.matrix_bytes = o.matrix_bytes / n as u64;
        }
        s.pm_dir = o.pm_dir.as_ref().map(|d| d.join(format!("shard-{i:03}")));
    }
    s
}

/// The largest GSN shard `db` applied (0 for a new shard).
fn applied_gsn(db: &Db) -> Result<u64> {
    match db.get(gsn_key())? {
        None => Ok(0),
        Some(v) => {
            let b: [u8; 8] = v.as_slice().try_into().map_err(|_| {
                Error::corruption(db.path(), 0, format!("shard meta key holds {} bytes, not a GSN", v.len()))
            })?;
            Ok(u64::from_be_bytes(b))
        }
    }
}

pub(crate) fn open(dir: &Path, opts: ShardedOptions) -> Result<Sharded> {
    let n = opts.shards;
    if n == 0 {
        return Err(Error::InvalidArgument("a sharded database needs at least one shard".into()));
    }
    let sims: Vec<Option<Arc<SimPm>>> = match (&opts.db.pm_sim, opts.pm_sims.len()) {
        (None, 0) => vec![None; n],
        (Some(sim), 0) if n == 1 => vec![Some(sim.clone())],
        (Some(_), 0) => {
            return Err(Error::InvalidArgument(
                "a simulated PM device serves one shard only: give one per shard in ShardedOptions::pm_sims".into(),
            ))
        }
        (None, k) if k == n => opts.pm_sims.iter().cloned().map(Some).collect(),
        (_, k) => {
            return Err(Error::InvalidArgument(format!(
                "{k} simulated PM devices for {n} shards (and none in the shard options)"
            )))
        }
    };
    let fs = opts.db.fs.clone();
    check_or_create(&*fs, dir, n, opts.db.create_if_missing)?;
    // Opening every shard first takes every shard's directory lock, so a
    // second process fails before it could touch the coordinator log.
    let dbs = sims
        .into_iter()
        .enumerate()
        .map(|(i, sim)| {
            let mut o = shard_options(&opts.db, i, n);
            if let Some(sim) = sim {
                if n > 1 {
                    // The shard's region is its device.
                    o.pm_size = sim.len() as u64;
                }
                o.pm_sim = Some(sim);
            }
            Db::open(shard_dir(dir, i), o)
        })
        .collect::<Result<Vec<_>>>()?;
    let mut applied = dbs.iter().map(applied_gsn).collect::<Result<Vec<_>>>()?;
    let (mut coord, records) = CoordLog::open(fs, dir, n)?;
    let mut max = applied.iter().copied().max().unwrap_or(0);
    let mut redone = 0u64;
    // Redo: records are in GSN order, and a shard applies its parts in GSN
    // order, so a shard whose applied GSN is below a record's lacks exactly
    // that record's part. The part is applied with the record's GSN in the
    // same engine batch, so a crash during the redo redoes only the rest.
    for rec in &records {
        for (s, part) in &rec.parts {
            let (Some(db), Some(a)) = (dbs.get(*s), applied.get_mut(*s)) else { continue };
            if *a < rec.gsn {
                let mut b = part.clone();
                b.put_raw(&gsn_key(), &rec.gsn.to_be_bytes());
                db.write_opt(&b, &WriteOptions { sync: true })?;
                *a = rec.gsn;
                redone += 1;
            }
        }
        max = max.max(rec.gsn);
    }
    if !records.is_empty() {
        // Every record's parts are in their shards: make them durable
        // (also those applied before the crash without sync), then drop
        // the records. A crash before the truncation redoes nothing new.
        for db in &dbs {
            db.sync()?;
        }
        coord.truncate()?;
    }
    let cores = std::thread::available_parallelism().map(|c| c.get()).unwrap_or(1);
    // Pinned only when every worker gets a core of its own and one core is
    // left for callers and background work; otherwise (2 cores and 2+
    // shards) pinning would tie workers to cores the callers and
    // compactions also need, so the scheduler places them.
    let pin = opts.pin_workers && cores > n;
    let queues: Vec<Arc<Queue>> = (0..n).map(|_| Queue::new()).collect();
    let counters: Vec<Arc<WorkerCounters>> = (0..n).map(|_| Arc::default()).collect();
    let appliers: Vec<Arc<Applier>> = dbs
        .iter()
        .zip(&counters)
        .map(|(db, c)| Arc::new(Applier::new(db.clone(), opts.batch_cap, c.clone())))
        .collect();
    let mut workers = Vec::with_capacity(n);
    for i in 0..n {
        let core = pin.then_some(i + 1);
        match spawn(i, appliers[i].clone(), queues[i].clone(), core) {
            Ok(h) => workers.push(h),
            Err(e) => {
                for q in &queues {
                    q.close();
                }
                for h in workers {
                    let _ = h.join();
                }
                return Err(e);
            }
        }
    }
    Ok(Sharded {
        dir: dir.to_path_buf(),
        dbs,
        queues,
        appliers,
        callers_apply: opts.callers_apply,
        workers: Mutex::new(workers),
        counters,
        gsn: AtomicU64::new(max),
        coord: Mutex::new(coord),
        trim: Mutex::new(None),
        poisoned: AtomicBool::new(false),
        coord_limit: opts.coord_log_limit,
        cross_batches: AtomicU64::new(0),
        redone,
        pinned: pin,
    })
}
