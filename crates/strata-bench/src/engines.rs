//! The engines behind the [`Engine`] seam, by the name `--engine` gives:
//! StrataKV, fjall, and RocksDB (with the `rocksdb` feature).

use anyhow::{anyhow, Result};

use crate::engine::{destroy_strata, Engine, StrataEngine};
use crate::flags::Flags;

/// Opens the engine `--engine` names at `--db`.
pub fn open(f: &Flags) -> Result<Box<dyn Engine>> {
    match f.engine.as_str() {
        "strata" if f.shards > 0 => Ok(Box::new(crate::sharded_engine::ShardedEngine::open(&f.db, f)?)),
        "strata" => Ok(Box::new(StrataEngine::open(&f.db, f)?)),
        "fjall" => Ok(Box::new(crate::fjall_engine::FjallEngine::open(&f.db, f)?)),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => Ok(Box::new(crate::rocks::RocksEngine::open(&f.db, f)?)),
        #[cfg(not(feature = "rocksdb"))]
        "rocksdb" => Err(anyhow!(
            "--engine=rocksdb is not available in this build: build strata-bench with --features rocksdb \
             (bench/compare does, into target/rocksdb-release)"
        )),
        other => Err(anyhow!("unknown --engine={other}")),
    }
}

/// Removes the database `--db` (and, for StrataKV, its PM region file;
/// for RocksDB, the WAL directory `--wal_dir`, whose old logs a new
/// database must not find).
pub fn destroy(f: &Flags) -> Result<()> {
    if let Some(w) = &f.rocks.wal_dir {
        if w.exists() {
            std::fs::remove_dir_all(w).map_err(|e| anyhow!("removing {}: {e}", w.display()))?;
        }
    }
    if let (Some(p), true) = (&f.pm_dir, f.shards > 0) {
        // Each shard's PM region is in its own subdirectory of --pm_dir.
        for i in 0..f.shards {
            destroy_strata(&p.join(format!("shard-{i:03}")), None)?;
        }
    }
    destroy_strata(&f.db, f.pm_dir.as_deref())
}
