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
