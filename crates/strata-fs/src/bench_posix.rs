//! The mdtest-style phases through the POSIX file API (std::fs), run on a
//! FUSE mount of the service and on a local directory, to show the cost of
//! the FUSE hop (`strata-fs bench --mode fuse`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::cpu::cpu_seconds;

fn tree(root: &Path, depth: usize, fanout: usize) -> Vec<PathBuf> {
    let mut out = vec![root.to_path_buf()];
    let mut level = vec![root.to_path_buf()];
    for _ in 0..depth {
        let next: Vec<PathBuf> = level.iter().flat_map(|d| (0..fanout).map(move |b| d.join(format!("d{b}")))).collect();
        out.extend(next.iter().cloned());
        level = next;
    }
    out
}

fn phase(
    label: &str,
    name: &str,
    threads: usize,
    f: impl Fn(usize) -> std::io::Result<usize> + Sync,
) -> std::io::Result<()> {
    let c0 = cpu_seconds("self").unwrap_or(0.0);
    let t0 = Instant::now();
    let results: Vec<std::io::Result<usize>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|i| {
                let f = &f;
                s.spawn(move || f(i))
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(std::io::Error::other("thread panicked")))).collect()
    });
    let mut ops = 0;
    for r in results {
        ops += r?;
    }
    let secs = t0.elapsed().as_secs_f64().max(1e-9);
    let cpu = cpu_seconds("self").unwrap_or(0.0) - c0;
    println!(
        "| {label} | {threads} | {name} | {ops} | {:.0} | {:.1} |",
        ops as f64 / secs,
        cpu * 1e6 / ops.max(1) as f64
    );
    Ok(())
}

/// Runs create/stat/readdir/rename/remove phases under `root` (T threads,
/// each its own tree of depth D, fan-out B, I files per directory).
pub fn run(label: &str, root: &Path, threads: usize, depth: usize, fanout: usize, items: usize) -> std::io::Result<()> {
    let trees: Vec<Vec<PathBuf>> = (0..threads).map(|i| tree(&root.join(format!("t{i}")), depth, fanout)).collect();
    let files = |i: usize| -> Vec<PathBuf> {
        trees[i].iter().flat_map(|d| (0..items).map(move |k| d.join(format!("f{k}")))).collect()
    };
    phase(label, "dir create", threads, |i| {
        for d in &trees[i] {
            std::fs::create_dir(d)?;
        }
        Ok(trees[i].len())
    })?;
    phase(label, "file create", threads, |i| {
        let fs = files(i);
        for f in &fs {
            std::fs::File::create(f)?;
        }
        Ok(fs.len())
    })?;
    phase(label, "file stat", threads, |i| {
        let fs = files((i + 1) % threads);
        for f in &fs {
            std::fs::metadata(f)?;
        }
        Ok(fs.len())
    })?;
    phase(label, "dir readdir", threads, |i| {
        for d in &trees[i] {
            for e in std::fs::read_dir(d)? {
                e?;
            }
        }
        Ok(trees[i].len())
    })?;
    phase(label, "file rename", threads, |i| {
        let fs = files(i);
        for f in &fs {
            std::fs::rename(f, f.with_extension("r"))?;
        }
        Ok(fs.len())
    })?;
    phase(label, "file remove", threads, |i| {
        let fs = files(i);
        for f in &fs {
            std::fs::remove_file(f.with_extension("r"))?;
        }
        Ok(fs.len())
    })?;
    phase(label, "dir remove", threads, |i| {
        for d in trees[i].iter().rev() {
            std::fs::remove_dir(d)?;
        }
        Ok(trees[i].len())
    })?;
    Ok(())
}
