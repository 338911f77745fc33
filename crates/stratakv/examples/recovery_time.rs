//! Time to reopen a database that holds about 1 GiB of data in PM.
//!
//! ```text
//! cargo run --release -p stratakv --example recovery_time -- DIR [matrix|memtable] [ENTRIES]
//! ```
//!
//! Loads ENTRIES (default 2^20) random 16-byte keys with 1000-byte values,
//! closes the database and times three reopens. `matrix`: the data sits in
//! matrix rows in PM (the default profile; reopening adopts the rows).
//! `memtable`: the data sits in one huge memtable's log (SSTable L0 with a
//! 3 GiB write buffer), the worst case, where recovery rescans the log.
use std::error::Error;
use std::time::Instant;

use stratakv::{Db, L0Kind, Options};

fn key(i: u64, n: u64) -> [u8; 16] {
    let mut k = [b'0'; 16];
    k[..8].copy_from_slice(&(i.wrapping_mul(0x9e37_79b9_7f4a_7c15) % n).to_be_bytes());
    k
}

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().collect();
    let dir = args.get(1).cloned().ok_or("usage: recovery_time DIR [matrix|memtable] [ENTRIES]")?;
    let mode = args.get(2).cloned().unwrap_or_else(|| "matrix".into());
    let n: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(1 << 20);
    let _ = std::fs::remove_dir_all(&dir);
    let o = if mode == "memtable" {
        Options { pm_size: 8 << 30, l0: L0Kind::Sstable, write_buffer_size: 3 << 30, ..Options::default() }
    } else {
        Options { pm_size: 8 << 30, l0: L0Kind::Matrix, matrix_bytes: 3 << 30, ..Options::default() }
    };
    let val = [b'v'; 1000];
    {
        let db = Db::open(&dir, o.clone())?;
        let t = Instant::now();
        for i in 0..n {
            db.put(key(i, n), val)?;
        }
        let s = db.stats();
        println!(
            "loaded {n} entries in {:?}: matrix rows {}, matrix data {:.1} MiB, memtable {:.1} MiB",
            t.elapsed(),
            s.matrix_rows,
            s.matrix_data_bytes as f64 / 1048576.0,
            s.memtable_bytes as f64 / 1048576.0
        );
        db.close()?;
    }
    for _ in 0..3 {
        let t = Instant::now();
        let db = Db::open(&dir, o.clone())?;
        let took = t.elapsed();
        let s = db.stats();
        println!(
            "reopen: {took:?} (matrix rows {}, memtable entries {}, PM {:.1} MiB in use)",
            s.matrix_rows,
            s.memtable_entries,
            (s.pm_slots_used * s.pm_slot_bytes) as f64 / 1048576.0
        );
        if db.get(key(12345, n))?.is_none() {
            return Err("a loaded key is missing after reopen".into());
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
