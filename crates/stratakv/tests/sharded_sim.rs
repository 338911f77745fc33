//! The sharded front end on simulated PM (one device per shard) and an
//! in-memory file system: the shard-count file and the coordinator log live
//! in the file system, and a crash image taken with every device and the
//! file system held still recovers every acknowledged cross-shard batch.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use rand::rngs::StdRng;
use rand::SeedableRng;
use strata_pmem::{CrashModel, SimPm};
use stratakv::fs::{FsCrashMode, MemFs};
use stratakv::{Error, Options, Sharded, ShardedOptions, WriteBatch};

const DIR: &str = "/db";

fn opts(mem: &MemFs, sims: &[Arc<SimPm>]) -> ShardedOptions {
    let mut o = Options::for_tests();
    o.pm_slot_bytes = 8 << 10;
    o.fs = Arc::new(mem.clone());
    let mut s = ShardedOptions::new(sims.len(), o);
    s.pm_sims = sims.to_vec();
    s
}

fn sims(n: usize) -> Vec<Arc<SimPm>> {
    (0..n).map(|_| Arc::new(SimPm::new(2 << 20))).collect()
}

#[test]
fn sharded_power_cut_keeps_acknowledged_cross_shard_batches() {
    let mem = MemFs::new();
    let devs = sims(3);
    let db = Sharded::open(DIR, opts(&mem, &devs)).unwrap();
    for i in 0..40u32 {
        let mut b = WriteBatch::new();
        for j in 0..6u32 {
            b.put(format!("k{j}"), format!("{i}"));
        }
        db.write_opt(b, i % 2 == 0).unwrap();
    }
    assert!(db.stats().cross_batches > 0);
    // One instant: the file system's lock, then every device held.
    let (snap, states) = mem.snapshot_with(|| {
        let held: Vec<_> = devs.iter().map(|d| d.hold()).collect();
        held.iter().map(|h| h.crash_state()).collect::<Vec<_>>()
    });
    drop(db);
    let paths: Vec<String> = mem.paths().iter().map(|p| p.display().to_string()).collect();
    assert!(paths.contains(&"/db/SHARDS".to_string()) && paths.contains(&"/db/COORD".to_string()), "{paths:?}");
    let mut rng = StdRng::seed_from_u64(7);
    for _ in 0..4 {
        let fs = snap.restore(FsCrashMode::DropUnsynced, &mut rng);
        let imgs: Vec<Arc<SimPm>> = states
            .iter()
            .map(|cs| Arc::new(SimPm::from_image(cs.random_image(CrashModel::LinePrefix, &mut rng))))
            .collect();
        let db = Sharded::open(DIR, opts(&fs, &imgs)).unwrap();
        for j in 0..6u32 {
            assert_eq!(db.get(format!("k{j}")).unwrap(), Some(b"39".to_vec()), "k{j}");
        }
        db.close().unwrap();
    }
}

#[test]
fn sharded_devices_must_match_the_shards() {
    let mem = MemFs::new();
    let mut o = opts(&mem, &sims(2));
    o.shards = 3;
    assert!(matches!(Sharded::open(DIR, o), Err(Error::InvalidArgument(_))));
    let mut o = opts(&mem, &[]);
    o.shards = 2;
    o.db.pm_sim = Some(Arc::new(SimPm::new(2 << 20)));
    assert!(matches!(Sharded::open(DIR, o), Err(Error::InvalidArgument(_))));
}
