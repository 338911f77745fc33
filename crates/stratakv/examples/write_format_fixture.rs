//! Writes a format fixture: two small databases, one per level-0 kind,
//! with data in every place a database keeps it, and the contents they
//! must read back.
//!
//! ```text
//! cargo run -p stratakv --example write_format_fixture -- OUT_DIR [KINDS]
//! ```
//!
//! KINDS is a comma list of level-0 kinds (default `sstable,matrix`, what
//! `format-v1` holds); `format-v1-single-level` was written with
//! `single-level`, the profile's first build. With the environment variable
//! `STRATA_FIXTURE_TABLE_INDEX=learned` every table is written with the
//! learned index (recorded as `table_index=learned` in the `.options`
//! files): `format-v2-learned` was written so, with `sstable`.
//!
//! OUT_DIR must not exist. It receives `sstable/` and `matrix/` (database
//! directories, the PM region in `pm/strata.pm`), `expected.txt` (the
//! final contents, the same for both) and `sstable.options` /
//! `matrix.options` (the options to reopen each with). The committed
//! fixture `crates/stratakv/tests/fixtures/format-v1` was written by this
//! program and must never be regenerated: a format change gets a new
//! fixture directory next to it, and the old one must keep opening (see
//! the README there and `tests/format_fixture.rs`).
//!
//! Only the public API is used. The same operations, from a fixed seed,
//! are applied to both databases, in phases that each open the database
//! anew (so every open also recovers the last one's log):
//!
//! 1. bulk load with snappy tables (odd keys, an empty value, a value of
//!    10 KB, a write batch), flushed and pushed down with `compact_range`;
//!    leveled compaction leaves it in L2 (L1's target is smaller); then
//!    overwrites and deletes, which end in L1 (L0 tables compacted, or
//!    matrix columns merged straight into L1);
//! 2. overwrites and deletes with lz4 tables: L0 tables compacted into L1
//!    (sstable), or column-compaction rounds that leave two sorted runs
//!    (matrix, `max_runs` = 3);
//! 3. with background compaction off, updates over many write buffers,
//!    flushed: L0 tables (sstable), or matrix rows in PM, older ones merged
//!    into bigger rows (matrix); then a tail of puts, deletes, a write
//!    batch and a log entry longer than a PM slot that stays in the
//!    memtable, only in the PM log (closing does not flush it);
//! 4. (matrix only) an open with a small matrix budget and small columns,
//!    closed as soon as the first column of the round it starts is done:
//!    the rows are left partly compacted (their `start` moved, in the
//!    compactor group) and the round's run unfinished. No writes.
//!
//! The phases use other policy options (compression, level and matrix
//! budgets, compaction triggers) than the ones recorded; the format knobs
//! (`pm_size`, `pm_slot_bytes`, L0 kind, the default PM directory) are the
//! same throughout. The `.options` files record the options to reopen
//! with: the format knobs and a policy that lets a reader with background
//! compaction off also write a few keys.
use std::collections::BTreeMap;
use std::error::Error;
use std::io::Write;
use std::path::{Path, PathBuf};

use stratakv::{Compression, Db, IndexKind, L0Kind, Options, WriteBatch};

type Res<T> = Result<T, Box<dyn Error>>;

/// splitmix64: fixed forever, unlike a library generator's stream.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// Keys `k00000`.. in the bulk key space.
const KEYS: u64 = 1500;

fn key(i: u64) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

/// One operation of the data set.
#[derive(Clone)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    Batch(Vec<(Vec<u8>, Option<Vec<u8>>)>),
}

/// The options to reopen with (recorded in the `.options` files): the
/// format knobs, small sizes, and a matrix budget that the rows left in PM
/// stay well under.
fn final_options(l0: L0Kind) -> Vec<(&'static str, String)> {
    let mut o = vec![
        ("l0", l0.name().to_string()),
        ("pm_size", (1u64 << 20).to_string()),
        ("pm_slot_bytes", 4096.to_string()),
        ("write_buffer_size", (16usize << 10).to_string()),
        ("block_size", 1024.to_string()),
        ("target_file_size", (16u64 << 10).to_string()),
        ("max_bytes_for_level_base", (32u64 << 10).to_string()),
        ("level_size_multiplier", 4.to_string()),
        ("l0_compaction_trigger", 16.to_string()),
        ("block_cache_bytes", (1u64 << 20).to_string()),
        ("pm_sync_interval_ms", 0.to_string()),
        ("compression", "none".to_string()),
    ];
    if let Ok(kind) = std::env::var("STRATA_FIXTURE_TABLE_INDEX") {
        o.push(("table_index", kind));
    }
    if l0 == L0Kind::Matrix {
        o.extend([
            ("matrix_bytes", (512u64 << 10).to_string()),
            ("column_bytes", (24u64 << 10).to_string()),
            ("rows_per_segment", 3.to_string()),
            ("max_receiver_rows", 6.to_string()),
            ("max_runs", 3.to_string()),
        ]);
    }
    o
}

/// Builds `Options` from `name=value` pairs (the `.options` file format;
/// `tests/format_fixture.rs` parses it the same way).
fn apply(pairs: &[(&str, String)]) -> Res<Options> {
    let mut o = Options::default();
    for (name, v) in pairs {
        let n = || v.parse::<u64>();
        match *name {
            "l0" => o.l0 = L0Kind::parse(v).ok_or("bad l0")?,
            "pm_size" => o.pm_size = n()?,
            "pm_slot_bytes" => o.pm_slot_bytes = n()?,
            "write_buffer_size" => o.write_buffer_size = n()? as usize,
            "block_size" => o.block_size = n()? as usize,
            "target_file_size" => o.target_file_size = n()?,
            "max_bytes_for_level_base" => o.max_bytes_for_level_base = n()?,
            "level_size_multiplier" => o.level_size_multiplier = n()?,
            "l0_compaction_trigger" => o.l0_compaction_trigger = n()? as usize,
            "block_cache_bytes" => o.block_cache_bytes = n()?,
            "pm_sync_interval_ms" => o.pm_sync_interval_ms = n()?,
            "compression" => {
                o.compression = match v.as_str() {
                    "none" => Compression::None,
                    "snappy" => Compression::Snappy,
                    "lz4" => Compression::Lz4,
                    _ => return Err("bad compression".into()),
                }
            }
            "matrix_bytes" => o.matrix_bytes = n()?,
            "column_bytes" => o.column_bytes = n()?,
            "rows_per_segment" => o.rows_per_segment = n()? as usize,
            "max_receiver_rows" => o.max_receiver_rows = n()? as usize,
            "max_runs" => o.max_runs = n()? as usize,
            "table_index" => {
                o.table_index = match v.as_str() {
                    "binary" => IndexKind::Binary,
                    "learned" => IndexKind::Learned,
                    _ => return Err("bad table_index".into()),
                }
            }
            other => return Err(format!("unknown option {other}").into()),
        }
    }
    o.validate()?;
    Ok(o)
}

/// The options of phase `p` (1-based): the final ones with phase policy.
fn phase_options(l0: L0Kind, p: u32) -> Res<Options> {
    let mut o = apply(&final_options(l0))?;
    match p {
        1 => {
            o.compression = Compression::Snappy;
            o.l0_compaction_trigger = 2;
            // A small matrix, no runs: L1's target (matrix budget ×
            // max_runs) is small enough that the load reaches L2.
            o.matrix_bytes = 48 << 10;
            o.max_runs = 1;
        }
        2 => {
            o.compression = Compression::Lz4;
            o.l0_compaction_trigger = 2;
            o.matrix_bytes = 128 << 10;
        }
        3 => o.disable_auto_compaction = true,
        _ => {
            // The rows hold more than 40% of this budget: a round starts
            // at open, in columns of about one table block each.
            o.matrix_bytes = 128 << 10;
            o.column_bytes = 4096;
        }
    }
    o.validate()?;
    Ok(o)
}

/// A value of `lo..hi` bytes: random ones, then as many of one letter,
/// so that table blocks compress (a block that does not shrink by an
/// eighth is stored uncompressed, and the codecs would go untested).
fn value(rng: &mut Rng, lo: u64, hi: u64) -> Vec<u8> {
    let n = (lo + rng.below(hi - lo)) as usize;
    let mut v = rng.bytes(n / 2);
    let letter = b'a' + rng.below(26) as u8;
    v.resize(n, letter);
    v
}

/// The data set, phase by phase.
fn phases() -> Vec<Vec<Op>> {
    // The seed spells "STRATAKV".
    let mut rng = Rng(0x5354_5241_5441_4b56);
    // 1: every bulk key, and keys at the edges of the key space.
    let mut p1 = Vec::new();
    for i in 0..KEYS {
        p1.push(Op::Put(key(i), value(&mut rng, 8, 100)));
    }
    // 1b: after the bulk load is pushed down, updates that end in L1.
    let mut p1b = Vec::new();
    for _ in 0..150 {
        let i = rng.below(KEYS);
        p1b.push(Op::Put(key(i), value(&mut rng, 8, 100)));
    }
    for _ in 0..60 {
        p1b.push(Op::Delete(key(rng.below(KEYS))));
    }
    p1.push(Op::Put(vec![0], b"the smallest key".to_vec()));
    p1.push(Op::Put(vec![0xff; 3], b"a key past every letter".to_vec()));
    p1.push(Op::Put(b"empty-value".to_vec(), Vec::new()));
    p1.push(Op::Put(b"big-value".to_vec(), value(&mut rng, 10_000, 10_001)));
    p1.push(Op::Put(vec![b'L'; 300], b"a long key".to_vec()));
    p1.push(Op::Batch(vec![
        (b"batch1-a".to_vec(), Some(b"1".to_vec())),
        (b"batch1-b".to_vec(), Some(b"2".to_vec())),
        (key(7), None),
    ]));
    // 2: overwrites and deletes spread over the key space.
    let mut p2 = Vec::new();
    for _ in 0..700 {
        let i = rng.below(KEYS);
        if rng.below(10) == 0 {
            p2.push(Op::Delete(key(i)));
        } else {
            p2.push(Op::Put(key(i), value(&mut rng, 8, 100)));
        }
    }
    p2.push(Op::Put(b"phase2".to_vec(), b"in a run or L1".to_vec()));
    // 3: about seven write buffers, flushed.
    let mut p3 = Vec::new();
    for _ in 0..1300 {
        let i = rng.below(KEYS);
        if rng.below(8) == 0 {
            p3.push(Op::Delete(key(i)));
        } else {
            p3.push(Op::Put(key(i), value(&mut rng, 8, 100)));
        }
    }
    p3.push(Op::Put(b"phase3".to_vec(), b"in L0 or matrix rows".to_vec()));
    p3.push(Op::Delete(b"batch1-b".to_vec()));
    // 4: the tail, left in the memtable (well under one write buffer).
    let mut p4 = Vec::new();
    // A log entry longer than a PM slot (4 KiB): its own two-slot extent.
    p4.push(Op::Put(b"big-tail".to_vec(), value(&mut rng, 5000, 5001)));
    for _ in 0..30 {
        let i = rng.below(KEYS);
        if rng.below(5) == 0 {
            p4.push(Op::Delete(key(i)));
        } else {
            p4.push(Op::Put(key(i), value(&mut rng, 8, 60)));
        }
    }
    p4.push(Op::Put(b"phase4".to_vec(), b"only in the PM log".to_vec()));
    p4.push(Op::Put(b"empty-value".to_vec(), b"no longer empty".to_vec()));
    p4.push(Op::Delete(vec![0]));
    p4.push(Op::Batch(vec![
        (b"batch2-a".to_vec(), Some(b"x".to_vec())),
        (b"batch2-b".to_vec(), None),
        (b"batch1-a".to_vec(), Some(b"rewritten in a batch".to_vec())),
        (key(8), None),
    ]));
    vec![p1, p1b, p2, p3, p4]
}

type Model = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

fn apply_ops(db: &Db, ops: &[Op], model: &mut Model) -> Res<()> {
    for op in ops {
        match op {
            Op::Put(k, v) => {
                db.put(k, v)?;
                model.insert(k.clone(), Some(v.clone()));
            }
            Op::Delete(k) => {
                db.delete(k)?;
                model.insert(k.clone(), None);
            }
            Op::Batch(items) => {
                let mut b = WriteBatch::new();
                for (k, v) in items {
                    match v {
                        Some(v) => b.put(k, v),
                        None => b.delete(k),
                    };
                    model.insert(k.clone(), v.clone());
                }
                db.write(b)?;
            }
        }
    }
    Ok(())
}

fn shape(db: &Db) -> String {
    let s = db.stats();
    let levels: Vec<String> = s
        .levels
        .iter()
        .filter(|l| l.files > 0)
        .map(|l| format!("L{}: {} files {} B", l.level, l.files, l.bytes))
        .collect();
    let tree = if s.l0 == "single-level" { format!("; B+-tree {} keys", s.slm_tree_entries) } else { String::new() };
    format!(
        "{}; runs {:?}; matrix rows {} ({} B of log data); memtable {} entries; {} sealed; {} PM slots used{tree}",
        levels.join(", "),
        s.runs.iter().map(|r| (r.files, r.bytes)).collect::<Vec<_>>(),
        s.matrix_rows,
        s.matrix_data_bytes,
        s.memtable_entries,
        s.immutable_memtables,
        s.pm_slots_used
    )
}

fn files_at(db: &Db, level: usize) -> usize {
    db.stats().levels.iter().find(|l| l.level == level).map(|l| l.files).unwrap_or(0)
}

/// Copies database directory `from` to `to` (which must not exist).
fn copy_dir(from: &Path, to: &Path) -> Res<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let target = to.join(e.file_name());
        if e.file_type()?.is_dir() {
            copy_dir(&e.path(), &target)?;
        } else {
            std::fs::copy(e.path(), &target)?;
        }
    }
    Ok(())
}

/// Applies the phases to a new database in `dir`.
fn write_db(dir: &Path, l0: L0Kind, phases: &[Vec<Op>], model: &mut Model) -> Res<()> {
    // 1: bulk load, pushed down to L2, then updates that end in L1.
    let db = Db::open(dir, phase_options(l0, 1)?)?;
    apply_ops(&db, &phases[0], model)?;
    db.flush()?;
    db.compact_range(..)?;
    db.wait_for_compactions()?;
    apply_ops(&db, &phases[1], model)?;
    db.flush()?;
    db.wait_for_compactions()?;
    eprintln!("{}: after phase 1: {}", l0.name(), shape(&db));
    db.close()?;

    // 2: updates that end in L1 (sstable) or in runs (matrix).
    let db = Db::open(dir, phase_options(l0, 2)?)?;
    apply_ops(&db, &phases[2], model)?;
    db.flush()?;
    db.wait_for_compactions()?;
    eprintln!("{}: after phase 2: {}", l0.name(), shape(&db));
    db.close()?;

    // 3: L0 tables or matrix rows, then the tail, never flushed.
    let db = Db::open(dir, phase_options(l0, 3)?)?;
    apply_ops(&db, &phases[3], model)?;
    db.flush()?;
    eprintln!("{}: after phase 3: {}", l0.name(), shape(&db));
    apply_ops(&db, &phases[4], model)?;
    eprintln!("{}: phase 3 at close: {}", l0.name(), shape(&db));
    let rows = db.stats();
    if rows.immutable_memtables != 0 {
        return Err("the tail did not fit in one memtable".into());
    }
    db.close()?;

    if l0 == L0Kind::Matrix {
        // 4: close right after the first column of the round the open starts.
        let db = Db::open(dir, phase_options(l0, 4)?)?;
        let start = std::time::Instant::now();
        while db.stats().columns == 0 {
            if start.elapsed() > std::time::Duration::from_secs(30) {
                return Err("no column compaction started".into());
            }
            std::thread::yield_now();
        }
        db.close()?;
        // Did the close land inside the round? (A copy: opening writes.)
        let probe = dir.with_extension("probe");
        copy_dir(dir, &probe)?;
        let db = Db::open(&probe, Options { disable_auto_compaction: true, ..apply(&final_options(l0))? })?;
        let s = db.stats();
        eprintln!("{}: after phase 4: {}", l0.name(), shape(&db));
        db.close()?;
        std::fs::remove_dir_all(&probe)?;
        if s.matrix_rows == 0 || s.matrix_data_bytes >= rows.matrix_data_bytes {
            return Err(format!(
                "the close missed the round: {} rows, {} of {} data bytes left",
                s.matrix_rows, s.matrix_data_bytes, rows.matrix_data_bytes
            )
            .into());
        }
    }
    Ok(())
}

/// Checks, on a copy (opening writes), that the database in `dir` holds
/// data in every place it should, and reads back as `model`.
fn verify(dir: &Path, l0: L0Kind, model: &Model) -> Res<()> {
    let probe = dir.with_extension("probe");
    copy_dir(dir, &probe)?;
    let db = Db::open(&probe, Options { disable_auto_compaction: true, ..apply(&final_options(l0))? })?;
    let s = db.stats();
    eprintln!("{}: as reopened: {}", l0.name(), shape(&db));
    let mut missing = Vec::new();
    if s.memtable_entries == 0 || s.immutable_memtables != 0 {
        missing.push("a memtable only in the log");
    }
    if files_at(&db, 1) == 0 {
        missing.push("L1 tables");
    }
    if files_at(&db, 2) == 0 {
        missing.push("L2 tables");
    }
    if l0 == L0Kind::Sstable && files_at(&db, 0) == 0 {
        missing.push("L0 tables");
    }
    if l0 == L0Kind::Matrix && s.matrix_rows == 0 {
        missing.push("matrix rows");
    }
    if l0 == L0Kind::Matrix && s.runs.is_empty() {
        missing.push("a sorted run");
    }
    if l0 == L0Kind::SingleLevel {
        // One level: the bulk load merged by `compact_range`, the later
        // flushes beside it; L1 and L2 stay empty.
        missing.retain(|m| !m.starts_with("L1") && !m.starts_with("L2"));
        if files_at(&db, 0) < 3 {
            missing.push("several single-level tables");
        }
        if s.slm_tree_entries < 1000 {
            missing.push("a B+-tree of every key");
        }
    }
    if !missing.is_empty() {
        return Err(format!("{}: the data set did not reach: {}", l0.name(), missing.join(", ")).into());
    }
    let want: Vec<(Vec<u8>, Vec<u8>)> =
        model.iter().filter_map(|(k, v)| v.as_ref().map(|v| (k.clone(), v.clone()))).collect();
    let got: Vec<(Vec<u8>, Vec<u8>)> = db.iter(..)?.collect();
    if got != want {
        return Err(format!("{}: reads back {} entries, not the {} written", l0.name(), got.len(), want.len()).into());
    }
    db.verify_checksums()?;
    db.close()?;
    std::fs::remove_dir_all(&probe)?;
    Ok(())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn main() -> Res<()> {
    let out = PathBuf::from(std::env::args().nth(1).ok_or("usage: write_format_fixture OUT_DIR")?);
    if out.exists() {
        return Err(format!("{} exists; a fixture is never rewritten", out.display()).into());
    }
    std::fs::create_dir_all(&out)?;
    let phases = phases();
    let mut expected = None;
    let kinds = match std::env::args().nth(2) {
        Some(list) => list
            .split(',')
            .map(|k| L0Kind::parse(k).ok_or(format!("unknown kind {k}")))
            .collect::<Result<Vec<_>, _>>()?,
        None => vec![L0Kind::Sstable, L0Kind::Matrix],
    };
    for l0 in kinds {
        let dir = out.join(l0.name());
        let mut model = Model::new();
        // Phase 4 races a close against a column compaction: try again
        // from scratch (the data set is the same) if the close missed.
        let mut attempt = 1;
        while let Err(e) = write_db(&dir, l0, &phases, &mut model) {
            eprintln!("{}: attempt {attempt}: {e}", l0.name());
            if attempt == 5 {
                return Err(e);
            }
            attempt += 1;
            std::fs::remove_dir_all(&dir)?;
            model.clear();
        }
        // Every open makes the LOCK file; the fixture does not need it.
        std::fs::remove_file(dir.join("LOCK"))?;
        verify(&dir, l0, &model)?;
        let mut f = std::fs::File::create(out.join(format!("{}.options", l0.name())))?;
        writeln!(f, "# Options to reopen the {} fixture with (name=value; the rest default).", l0.name())?;
        for (name, v) in final_options(l0) {
            writeln!(f, "{name}={v}")?;
        }
        if expected.as_ref().is_some_and(|e| *e != model) {
            return Err("the two databases got different data".into());
        }
        expected = Some(model);
    }
    let model = expected.ok_or("no database written")?;
    let mut f = std::io::BufWriter::new(std::fs::File::create(out.join("expected.txt"))?);
    writeln!(f, "# Final contents of both fixture databases, in key order: every key ever")?;
    writeln!(f, "# written, as key hex TAB value hex (live) or key hex TAB - (deleted).")?;
    for (k, v) in &model {
        match v {
            Some(v) => writeln!(f, "{}\t{}", hex(k), hex(v))?,
            None => writeln!(f, "{}\t-", hex(k))?,
        }
    }
    f.flush()?;
    Ok(())
}
