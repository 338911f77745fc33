//! Mode `limits`: limits are enforced with clear errors and nothing
//! acknowledged is lost — keys and values at and over the limits, a full
//! PM region (both L0 kinds), a full disk on a size-limited tmpfs, a
//! sparse PM region file on a full tmpfs and on a full loopback ext4
//! (skipped with a message where mounting is not allowed), and, with a
//! `strata-server` binary, maxclients, thousands of connections and
//! over-limit requests. The checks run once, then the PM-full and
//! disk-full rounds repeat while time is left; with `--shards N` each
//! round also checks the sharded front end (refusals, a full shard region).

pub mod disk;
pub mod engine;
pub mod server;
pub mod sharded;

use std::time::Instant;

use stratakv::L0Kind;

use crate::report::{Report, Value};
use crate::RunCfg;

/// Runs the mode.
pub fn run(cfg: &RunCfg) -> anyhow::Result<Report> {
    let mut rep = Report::new("limits", cfg.seed);
    let deadline = cfg.deadline();
    let root = tempfile::Builder::new().prefix("strata-stress-limits").tempdir()?;
    // 256 MiB values take a few seconds: only with a budget for them.
    let huge = cfg.seconds >= 20.0;
    if !huge {
        rep.set("max_value", Value::Text("skipped: needs --seconds >= 20".into()));
    }
    let fail = |rep: &mut Report, r: Result<(), String>| {
        if let Err(e) = r {
            rep.violation(cfg.seed, e);
        }
    };
    let r = engine::key_value_limits(&root.path().join("kv"), huge, &mut rep);
    fail(&mut rep, r);
    match crate::kill::server::find_binary() {
        Some(bin) => {
            let r = server::server_limits(&bin, root.path(), 3000, &mut rep);
            fail(&mut rep, r);
        }
        None => rep.set("server", Value::Text("skipped: no strata-server binary".into())),
    }
    let mut round = 0u64;
    loop {
        let l0 = [L0Kind::Matrix, L0Kind::Sstable, L0Kind::SingleLevel, L0Kind::PmOnly][(round % 4) as usize];
        if cfg.shards > 0 {
            let d = root.path().join(format!("sharded{round}"));
            let r = sharded::sharded_limits(&d, cfg.shards, l0, &mut rep);
            fail(&mut rep, r);
            let _ = std::fs::remove_dir_all(&d);
        }
        let d = root.path().join(format!("pmfull{round}"));
        let r = engine::pm_full(&d, l0, &mut rep);
        fail(&mut rep, r);
        let _ = std::fs::remove_dir_all(&d);
        let d = root.path().join(format!("disk{round}"));
        let r = disk::disk_full(&d, &mut rep);
        fail(&mut rep, r);
        let _ = std::fs::remove_dir_all(&d);
        let d = root.path().join(format!("pmtmpfs{round}"));
        let r = disk::pm_tmpfs_full(&d, &mut rep);
        fail(&mut rep, r);
        let _ = std::fs::remove_dir_all(&d);
        let d = root.path().join(format!("pmext4{round}"));
        let r = disk::pm_ext4_full(&d, &mut rep);
        fail(&mut rep, r);
        let _ = std::fs::remove_dir_all(&d);
        rep.add("rounds", 1);
        round += 1;
        if Instant::now() >= deadline || rep.violations() > 0 {
            break;
        }
    }
    Ok(rep)
}
