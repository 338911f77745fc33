//! Seed corpora for the fuzz targets, made from real files the engine
//! writes (`strata-stress --gen-corpus DIR`, also used by `cargo test`):
//! data blocks, table files, MANIFESTs and PM region images of small
//! databases on an in-memory file system and simulated PM, and RESP requests.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use strata_pmem::SimPm;
use stratakv::fs::{Fs, MemFs};
use stratakv::tooling::BlockBuilder;
use stratakv::tooling::{internal_key, Kind};
use stratakv::{Db, L0Kind};

use crate::fuzz_targets::{fuzz_options, join_matrix_input, FUZZ_DIR, FUZZ_PM_SIZE};

fn put(dir: &Path, target: &str, name: &str, data: &[u8], n: &mut usize) -> anyhow::Result<()> {
    let d = dir.join(target);
    std::fs::create_dir_all(&d)?;
    std::fs::write(d.join(name), data).with_context(|| format!("writing {target}/{name}"))?;
    *n += 1;
    Ok(())
}

fn value(i: u32) -> Vec<u8> {
    format!("value-{i}-{}", "x".repeat((i % 37) as usize)).into_bytes()
}

/// A small database; returns its file system, PM device and the MANIFEST bytes.
fn build(l0: L0Kind, writes: u32, compact: bool) -> anyhow::Result<(MemFs, Arc<SimPm>, Vec<u8>)> {
    let sim = Arc::new(SimPm::new(FUZZ_PM_SIZE));
    let mem = MemFs::new();
    let mut o = fuzz_options(l0);
    o.pm_sim = Some(sim.clone());
    o.fs = Arc::new(mem.clone());
    let db = Db::open(FUZZ_DIR, o).map_err(|e| anyhow::anyhow!("{e}"))?;
    for i in 0..writes {
        let k = format!("key{:04}", (i * 7) % (writes / 2 + 1));
        if i % 11 == 5 {
            db.delete(&k).map_err(|e| anyhow::anyhow!("{e}"))?;
        } else {
            db.put(&k, value(i)).map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        if compact && i == writes / 2 {
            db.compact_range(..).map_err(|e| anyhow::anyhow!("{e}"))?;
        }
    }
    db.close().map_err(|e| anyhow::anyhow!("{e}"))?;
    let current = mem.read(&Path::new(FUZZ_DIR).join("CURRENT"))?;
    let name = String::from_utf8_lossy(&current).trim().to_string();
    let manifest = mem.read(&Path::new(FUZZ_DIR).join(name))?;
    Ok((mem, sim, manifest))
}

/// Writes the seed corpora under `dir/<target>/`; returns the file count.
pub fn generate(dir: &Path) -> anyhow::Result<usize> {
    let mut n = 0;
    // Blocks with several restart intervals.
    for (i, interval) in [1usize, 4, 16].into_iter().enumerate() {
        let mut b = BlockBuilder::new(interval);
        for j in 0..40u32 {
            b.add(&internal_key(format!("key{j:04}").as_bytes(), 100 - j as u64, Kind::Put), &value(j));
        }
        put(dir, "block_decode", &format!("block-{i}"), &b.finish(), &mut n)?;
    }
    // Tables, MANIFEST, log images from an SSTable-L0 database.
    let (mem, sim, manifest) = build(L0Kind::Sstable, 300, true)?;
    for (i, p) in mem.paths().iter().filter(|p| p.extension().is_some_and(|e| e == "sst")).enumerate().take(4) {
        put(dir, "sstable_open", &format!("table-{i}"), &mem.read(p)?, &mut n)?;
    }
    put(dir, "manifest_replay", "manifest-sstable", &manifest, &mut n)?;
    put(dir, "log_recover", "region-sstable", &sim.visible_image(), &mut n)?;
    let (_, sim, _) = build(L0Kind::Sstable, 60, false)?;
    put(dir, "log_recover", "region-log-only", &sim.visible_image(), &mut n)?;
    // A matrix database: rows in PM named by the MANIFEST.
    let (_, sim, manifest) = build(L0Kind::Matrix, 250, false)?;
    put(dir, "manifest_replay", "manifest-matrix", &manifest, &mut n)?;
    put(dir, "matrix_row", "matrix", &join_matrix_input(&manifest, &sim.visible_image()), &mut n)?;
    put(dir, "log_recover", "region-matrix", &sim.visible_image(), &mut n)?;
    // RESP requests, well formed and not.
    let resp: [&[u8]; 8] = [
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n",
        b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPING\r\n",
        b"PING\r\nSET a \"b c\"\r\n",
        b"*-10\r\n",
        b"*3000000000\r\n",
        b"*1\r\n$2000000000\r\n",
        b"*1\r\nfoo\r\n",
        b"\r\n\r\n*0\r\n",
    ];
    for (i, r) in resp.iter().enumerate() {
        put(dir, "resp_frame", &format!("req-{i}"), r, &mut n)?;
    }
    // Values as redis-server 7.0 dumped them (without version and
    // checksum, which the target adds): an integer string, a listpack
    // hash, a quicklist of a listpack, an LZF-compressed intset, a set.
    let values: [&[u8]; 5] = [
        b"\x00\xc1\x39\x30",
        b"\x10\x32\x32\x00\x00\x00\x0a\x00\x81a\x02\x01\x01\x81b\x02\x85hello\x06\x81c\x02\xf1\x78\xec\x03\x81d\x02\xf2\x70\x11\x01\x04\x81e\x02\xf4\x00\xe6\x8e\xe7\xfd\xff\xff\xff\x09\xff",
        b"\x12\x01\x02\x15\x15\x00\x00\x00\x04\x00\x81a\x02\x0c\x01\xf2\x60\x79\xfe\x04\x82bb\x03\xff",
        b"\x0b\xc3\x21\x28\x04\x08\x00\x00\x00\x04\x20\x03\x02\xd4\xfe\xff\x60\x00\x00\x01\x20\x0b\x40\x00\x01\x70\x11\xa0\x09\x02\xf2\x05\x2a\x20\x09\x00\x00",
        b"\x02\x02\x01y\x01x",
    ];
    for (i, v) in values.iter().enumerate() {
        put(dir, "restore_payload", &format!("value-{i}"), v, &mut n)?;
    }
    Ok(n)
}
