//! The bodies of the cargo-fuzz targets in `fuzz/` (libFuzzer calls them
//! with arbitrary bytes; none may panic, hang or allocate by a length it
//! read). Kept here so `cargo test` replays the seed corpora and committed
//! regressions on stable.
//!
//! | target | input |
//! | --- | --- |
//! | `block_decode` | a data/index block's contents |
//! | `sstable_open` | a whole table file: open, iterate both ways, get, verify |
//! | `log_recover` | a PM region image: recovery of its log (and extents) |
//! | `manifest_replay` | a MANIFEST file: replay of its version edits |
//! | `matrix_row` | `len u32 | MANIFEST | PM image`: open a matrix database, read every row |
//!
//! (`resp_frame`, RESP request parsing, calls `strata_server::resp` directly.)

use std::path::{Path, PathBuf};
use std::sync::Arc;

use strata_pmem::SimPm;
use stratakv::fs::{Fs, MemFs};
use stratakv::tooling::InternalIterator;
use stratakv::tooling::VersionSet;
use stratakv::tooling::{internal_key, KIND_FOR_SEEK};
use stratakv::tooling::{key_hash, Block, BlockIter, Table};
use stratakv::{Db, L0Kind, Options};

/// Size of the PM region of the `log_recover` and `matrix_row` targets.
pub const FUZZ_PM_SIZE: usize = 192 << 10;
/// Directory of the fuzzed database inside its in-memory file system.
pub const FUZZ_DIR: &str = "/fuzz";

/// Options of the databases the PM targets open (tiny: 4 KiB slots).
pub fn fuzz_options(l0: L0Kind) -> Options {
    let mut o = Options::for_tests();
    o.l0 = l0;
    o.pm_size = FUZZ_PM_SIZE as u64;
    o.pm_slot_bytes = 4096;
    o.write_buffer_size = 4096;
    o.matrix_bytes = 64 << 10;
    o.column_bytes = 8 << 10;
    o.target_file_size = 4096;
    o.block_size = 256;
    o.rows_per_segment = 2;
    o.max_receiver_rows = 3;
    o.pm_full_timeout_ms = 50;
    o.disable_auto_compaction = true;
    o
}

/// Walks an iterator a bounded number of steps both ways.
fn walk(it: &mut dyn InternalIterator, probe: &[u8]) {
    let mut n = 0;
    if it.seek_to_first().is_ok() {
        while it.valid() && n < 10_000 {
            let _ = (it.key().len(), it.value().len());
            if it.next().is_err() {
                break;
            }
            n += 1;
        }
    }
    if it.seek_to_last().is_ok() {
        n = 0;
        while it.valid() && n < 10_000 {
            if it.prev().is_err() {
                break;
            }
            n += 1;
        }
    }
    let _ = it.seek(probe);
    let _ = it.seek_for_prev(probe);
}

/// `block_decode`.
pub fn block_decode(data: &[u8]) {
    let Ok(block) = Block::new(data.to_vec(), Arc::new(PathBuf::from("fuzz-block")), 0) else {
        return;
    };
    let mut it = BlockIter::new(Arc::new(block));
    walk(&mut it, &internal_key(b"key0005", 100, KIND_FOR_SEEK));
}

/// `sstable_open`.
pub fn sstable_open(data: &[u8]) {
    let fs = MemFs::new();
    let path = Path::new("/t/000007.sst");
    if fs.write_file(path, data).is_err() {
        return;
    }
    let Ok(t) = Table::open(&fs, path, 7, None) else {
        return;
    };
    let t = Arc::new(t);
    let mut it = t.iter();
    walk(&mut it, &internal_key(b"key0005", 100, KIND_FOR_SEEK));
    for k in [&b"key0005"[..], b"", b"zzz"] {
        let _ = t.get(&internal_key(k, u64::MAX >> 8, KIND_FOR_SEEK), k, key_hash(k));
    }
    let _ = t.verify();
}

/// `manifest_replay`.
pub fn manifest_replay(data: &[u8]) {
    let fs = MemFs::new();
    let dir = Path::new(FUZZ_DIR);
    let _ = fs.create_dir_all(dir);
    let _ = fs.write_file(&dir.join("CURRENT"), b"MANIFEST-000001\n");
    let _ = fs.write_file(&dir.join("MANIFEST-000001"), data);
    let _ = VersionSet::recover(Arc::new(fs), dir);
    let _ = stratakv::tooling::VersionEdit::decode(data);
    let _ = stratakv::tooling::MatrixRecord::decode(data);
}

/// Opens a database on `fs` and a PM image, reads it all, checks it,
/// writes; returns how many keys it read (None if it did not open).
fn open_and_read(fs: MemFs, image: &[u8], l0: L0Kind) -> Option<usize> {
    let mut img = image.to_vec();
    img.resize(FUZZ_PM_SIZE, 0);
    let mut o = fuzz_options(l0);
    o.pm_sim = Some(Arc::new(SimPm::from_image(img)));
    o.fs = Arc::new(fs);
    let Ok(db) = Db::open(FUZZ_DIR, o) else {
        return None;
    };
    let n = crate::read_all(&db).map(|v| v.len()).unwrap_or(0);
    if let Ok(mut it) = db.iter(..) {
        let mut n = 0;
        while n < 10_000 && it.next_back().is_some() {
            n += 1;
        }
    }
    let _ = db.get(b"key0005");
    let _ = db.verify_checksums();
    let _ = db.put(b"after", b"fuzz");
    let _ = db.close();
    Some(n)
}

/// `log_recover`: a fresh database directory, so every log extent of the
/// region is replayed.
pub fn log_recover(data: &[u8]) {
    log_recover_keys(data);
}

/// [`log_recover`], returning the keys recovered (None: did not open).
pub fn log_recover_keys(data: &[u8]) -> Option<usize> {
    open_and_read(MemFs::new(), data, L0Kind::Sstable)
}

/// Splits a `matrix_row` input into (MANIFEST, PM image).
pub fn split_matrix_input(data: &[u8]) -> Option<(&[u8], &[u8])> {
    let len = u32::from_le_bytes(data.get(..4)?.try_into().ok()?) as usize;
    let rest = data.get(4..)?;
    Some((rest.get(..len)?, rest.get(len..)?))
}

/// Joins a MANIFEST and a PM image into a `matrix_row` input.
pub fn join_matrix_input(manifest: &[u8], image: &[u8]) -> Vec<u8> {
    let mut v = (manifest.len() as u32).to_le_bytes().to_vec();
    v.extend_from_slice(manifest);
    v.extend_from_slice(image);
    v
}

/// `matrix_row`.
pub fn matrix_row(data: &[u8]) {
    matrix_row_keys(data);
}

/// [`matrix_row`], returning the keys read (None: did not open).
pub fn matrix_row_keys(data: &[u8]) -> Option<usize> {
    let (manifest, image) = split_matrix_input(data)?;
    let fs = MemFs::new();
    let dir = Path::new(FUZZ_DIR);
    let _ = fs.create_dir_all(dir);
    let _ = fs.write_file(&dir.join("CURRENT"), b"MANIFEST-000001\n");
    let _ = fs.write_file(&dir.join("MANIFEST-000001"), manifest);
    open_and_read(fs, image, L0Kind::Matrix)
}

/// Runs target `name` on `data`; false if there is no such target here.
pub fn run_target(name: &str, data: &[u8]) -> bool {
    match name {
        "block_decode" => block_decode(data),
        "sstable_open" => sstable_open(data),
        "manifest_replay" => manifest_replay(data),
        "log_recover" => log_recover(data),
        "matrix_row" => matrix_row(data),
        _ => return false,
    }
    true
}

/// The targets whose bodies live here.
pub const TARGETS: [&str; 5] = ["block_decode", "sstable_open", "log_recover", "manifest_replay", "matrix_row"];
