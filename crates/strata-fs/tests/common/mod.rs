#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use strata_fs::cluster::LocalCluster;

pub fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_strata-fs-server"))
}

/// A cluster of `n` servers with small engines in a fresh tempdir.
pub fn cluster(n: usize) -> (tempfile::TempDir, LocalCluster) {
    let dir = tempfile::tempdir().unwrap();
    let c = LocalCluster::start(bin(), dir.path(), n, false, true).unwrap();
    (dir, c)
}

/// Like `cluster`, with a coordinator that sleeps before each participant step.
pub fn slow_cluster(n: usize, step_delay_us: u64) -> (tempfile::TempDir, LocalCluster) {
    let dir = tempfile::tempdir().unwrap();
    let env = vec![(strata_fs::coord::STEP_DELAY_ENV.to_string(), step_delay_us.to_string())];
    let c = LocalCluster::start_with_env(bin(), dir.path(), n, false, true, env).unwrap();
    (dir, c)
}
