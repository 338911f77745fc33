//! The format promise, tested: databases written by an earlier build
//! (`tests/fixtures/format-v1`, `format-v1-single-level` for the
//! single-level profile, and `format-v2-learned` for learned-index tables;
//! see their READMEs) open, read back exactly
//! what was written, and pass the checksum check, in this build too; then
//! take new writes, a reopen and a full compaction.
//!
//! Each test works on a copy (opening a database writes to its
//! directory). A failure here means the on-media format changed in a way
//! older databases do not survive: never fix it by regenerating the fixture.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use stratakv::{Compression, Db, IndexKind, L0Kind, Options};

/// Every key the fixture's writer wrote: `Some(value)` if live, `None` if deleted.
type Model = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

thread_local! {
    /// This test thread reads `format-v2-learned` (tables with the learned index).
    static LEARNED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The fixture directory holding the database of kind `l0`.
fn fixture(l0: L0Kind) -> PathBuf {
    let name = if LEARNED.with(|c| c.get()) {
        "format-v2-learned"
    } else if l0 == L0Kind::SingleLevel {
        "format-v1-single-level"
    } else {
        "format-v1"
    };
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn unhex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd hex {s:?}");
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
}

/// `expected.txt`: `key hex TAB value hex`, or `key hex TAB -` for a deleted key.
fn expected(l0: L0Kind) -> Model {
    let text = std::fs::read_to_string(fixture(l0).join("expected.txt")).unwrap();
    let mut model = Model::new();
    for line in text.lines().map(str::trim_end).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let (k, v) = line.split_once('\t').unwrap_or_else(|| panic!("bad line {line:?}"));
        let v = if v == "-" { None } else { Some(unhex(v)) };
        assert!(model.insert(unhex(k), v).is_none(), "key listed twice: {k}");
    }
    assert!(model.len() > 1000, "expected.txt lists only {} keys", model.len());
    model
}

/// The options in `<kind>.options` (`name=value` lines), the rest default,
/// with background compaction off so reads see the fixture's own layout.
fn options(l0: L0Kind) -> Options {
    let text = std::fs::read_to_string(fixture(l0).join(format!("{}.options", l0.name()))).unwrap();
    let mut o = Options::default();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let (name, v) = line.split_once('=').unwrap_or_else(|| panic!("bad line {line:?}"));
        let n = || v.parse::<u64>().unwrap_or_else(|_| panic!("{name}={v} is not a number"));
        match name {
            "l0" => o.l0 = L0Kind::parse(v).expect("l0 kind"),
            "pm_size" => o.pm_size = n(),
            "pm_slot_bytes" => o.pm_slot_bytes = n(),
            "write_buffer_size" => o.write_buffer_size = n() as usize,
            "block_size" => o.block_size = n() as usize,
            "target_file_size" => o.target_file_size = n(),
            "max_bytes_for_level_base" => o.max_bytes_for_level_base = n(),
            "level_size_multiplier" => o.level_size_multiplier = n(),
            "l0_compaction_trigger" => o.l0_compaction_trigger = n() as usize,
            "block_cache_bytes" => o.block_cache_bytes = n(),
            "pm_sync_interval_ms" => o.pm_sync_interval_ms = n(),
            "compression" => {
                o.compression = match v {
                    "none" => Compression::None,
                    "snappy" => Compression::Snappy,
                    "lz4" => Compression::Lz4,
                    other => panic!("compression {other}"),
                }
            }
            "matrix_bytes" => o.matrix_bytes = n(),
            "column_bytes" => o.column_bytes = n(),
            "rows_per_segment" => o.rows_per_segment = n() as usize,
            "max_receiver_rows" => o.max_receiver_rows = n() as usize,
            "max_runs" => o.max_runs = n() as usize,
            "table_index" => {
                o.table_index = match v {
                    "binary" => IndexKind::Binary,
                    "learned" => IndexKind::Learned,
                    other => panic!("table_index {other}"),
                }
            }
            other => panic!("unknown option {other} in {}.options", l0.name()),
        }
    }
    assert_eq!(o.l0, l0, "{}.options names another kind", l0.name());
    o.create_if_missing = false;
    o.disable_auto_compaction = true;
    o.validate().unwrap();
    o
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// A private copy of the fixture database of kind `l0`.
fn copy_of(l0: L0Kind) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(l0.name());
    copy_dir(&fixture(l0).join(l0.name()), &dir);
    (tmp, dir)
}

fn live(model: &Model) -> Vec<(Vec<u8>, Vec<u8>)> {
    model.iter().filter_map(|(k, v)| v.as_ref().map(|v| (k.clone(), v.clone()))).collect()
}

/// Reads `db` every way there is and compares with `model` exactly.
fn check(db: &Db, model: &Model, ctx: &str) {
    // Point reads, live and deleted keys alike.
    for (k, v) in model {
        assert_eq!(&db.get(k).unwrap(), v, "get {k:02x?} ({ctx})");
    }
    let keys: Vec<&Vec<u8>> = model.keys().collect();
    let got = db.multi_get(&keys).unwrap();
    let want: Vec<Option<Vec<u8>>> = model.values().cloned().collect();
    assert!(got == want, "multi_get ({ctx})");
    // Keys never written are absent, at both ends and between written ones.
    for k in [&b"\x00\x00"[..], b"k", b"k00000\x00", b"zzz", b"\xff\xff\xff\xff"] {
        if !model.contains_key(k) {
            assert_eq!(db.get(k).unwrap(), None, "get of unwritten {k:02x?} ({ctx})");
        }
    }
    // Scans in both directions.
    let want = live(model);
    let fwd: Vec<_> = db.iter(..).unwrap().collect();
    assert_eq!(fwd.len(), want.len(), "forward scan length ({ctx})");
    assert!(fwd == want, "forward scan ({ctx})");
    let mut back: Vec<_> = db.iter(..).unwrap().rev().collect();
    back.reverse();
    assert!(back == want, "backward scan ({ctx})");
    // A bounded range.
    let (lo, hi) = (b"k00500".to_vec(), b"k00700".to_vec());
    let part: Vec<_> = db.iter(lo.clone()..hi.clone()).unwrap().collect();
    let want_part: Vec<_> = want.iter().filter(|(k, _)| *k >= lo && *k < hi).cloned().collect();
    assert!(!want_part.is_empty());
    assert!(part == want_part, "range scan ({ctx})");
    // Seeks to every 25th key ever written land on the first live key at
    // or after it, and step both ways from there.
    let mut c = db.cursor(..).unwrap();
    for (i, k) in model.keys().enumerate().step_by(25) {
        c.seek(k).unwrap();
        let at = want.partition_point(|(wk, _)| wk < k);
        match want.get(at) {
            Some((wk, wv)) => {
                assert!(c.valid(), "seek {k:02x?} found nothing ({ctx})");
                assert_eq!((c.key(), c.value()), (&wk[..], &wv[..]), "seek {k:02x?} ({ctx})");
            }
            None => assert!(!c.valid(), "seek past the end ({ctx})"),
        }
        if at > 0 && c.valid() {
            c.prev().unwrap();
            assert_eq!(c.key(), &want[at - 1].0[..], "prev after seek #{i} ({ctx})");
            c.next().unwrap();
            assert_eq!(c.key(), &want[at].0[..], "next after prev #{i} ({ctx})");
        }
    }
    // What `strata check` does.
    assert!(db.verify_checksums().unwrap() > 0, "no table entries verified ({ctx})");
}

/// Opens a copy, reads it, writes to it, reopens it, compacts it.
fn fixture_round_trip(l0: L0Kind) {
    let mut model = expected(l0);
    let (_tmp, dir) = copy_of(l0);
    let db = Db::open(&dir, options(l0)).unwrap_or_else(|e| panic!("the {} fixture does not open: {e}", l0.name()));
    let s = db.stats();
    assert_eq!(s.l0, l0.name(), "the fixture's L0 kind");
    // The layout as this open reads it (with compaction off, the open
    // itself moves nothing) is the one the writer saw when it reopened the
    // result (`generated.log`, "as reopened"). Sizes and counts come from
    // the MANIFEST, the matrix record (a row's `start` decides its data
    // bytes left) and the log. Only a deliberate change in what an open
    // does may change these; never the contents.
    let levels: Vec<(usize, usize, u64)> =
        s.levels.iter().filter(|l| l.files > 0).map(|l| (l.level, l.files, l.bytes)).collect();
    let runs: Vec<(usize, u64)> = s.runs.iter().map(|r| (r.files, r.bytes)).collect();
    let layout = (levels, runs, s.matrix_rows, s.matrix_data_bytes, s.memtable_entries, s.immutable_memtables);
    let want = match l0 {
        // The same data cut into learned-index tables (format-v2-learned).
        L0Kind::Sstable if LEARNED.with(|c| c.get()) => {
            assert!(s.learned_tables > 0, "the learned fixture's tables read as binary");
            (vec![(0, 16, 83688), (1, 3, 28026), (2, 8, 73771)], vec![], 0, 0, 38, 0)
        }
        L0Kind::Sstable => (vec![(0, 17, 84468), (1, 2, 27139), (2, 5, 74150)], vec![], 0, 0, 38, 0),
        L0Kind::Matrix => (
            vec![(0, 6, 107131), (1, 2, 7044), (2, 5, 74150)],
            vec![(4, 5074), (4, 14404), (4, 13314)],
            6,
            107131,
            38,
            0,
        ),
        L0Kind::SingleLevel => (vec![(0, 21, 149888)], vec![], 0, 0, 38, 0),
        L0Kind::PmOnly => unreachable!("no fixture was written with pm-only"),
    };
    assert_eq!(layout, want, "the {} fixture's layout as opened", l0.name());
    assert_eq!(s.last_sequence, 3759, "last sequence");
    check(&db, &model, "as written");

    // New writes on top: overwrite and delete keys from every part of the
    // fixture, add new ones, in single writes and a batch.
    let mut batch = stratakv::WriteBatch::new();
    for (i, k) in model.keys().cloned().collect::<Vec<_>>().into_iter().enumerate().step_by(37) {
        if i % 2 == 0 {
            let v = format!("new value {i}").into_bytes();
            db.put(&k, &v).unwrap();
            model.insert(k, Some(v));
        } else {
            batch.delete(&k);
            model.insert(k, None);
        }
    }
    for i in 0..20 {
        let (k, v) = (format!("new-key-{i:02}").into_bytes(), vec![b'n'; i * 10]);
        batch.put(&k, &v);
        model.insert(k, Some(v));
    }
    db.write(batch).unwrap();
    check(&db, &model, "after new writes");
    db.close().unwrap();

    let db = Db::open(&dir, options(l0)).unwrap();
    check(&db, &model, "reopened after new writes");
    // Everything, old and new, compacted to the bottom (the matrix drained
    // column by column, the runs merged): every old structure read in full.
    db.compact_range(..).unwrap();
    check(&db, &model, "after compact_range");
    db.close().unwrap();

    let db = Db::open(&dir, options(l0)).unwrap();
    check(&db, &model, "reopened after compact_range");
    db.close().unwrap();
}

#[test]
fn format_v1_sstable_fixture_opens_reads_and_checks() {
    fixture_round_trip(L0Kind::Sstable);
}

#[test]
fn format_v1_matrix_fixture_opens_reads_and_checks() {
    fixture_round_trip(L0Kind::Matrix);
}

/// `format-v2-learned`: the v1 data set written with learned-index tables
/// by the build that introduced them (see its README).
#[test]
fn format_v2_learned_fixture_opens_reads_and_checks() {
    LEARNED.with(|c| c.set(true));
    fixture_round_trip(L0Kind::Sstable);
}

#[test]
fn format_v1_single_level_fixture_opens_reads_and_checks() {
    fixture_round_trip(L0Kind::SingleLevel);
}

/// FNV-1a over every file of fixture directory `root` but the README
/// (relative path, length, bytes, in path order): the fixture as committed.
fn fixture_digest(root: &Path) -> u64 {
    fn walk(dir: &Path, rel: &str, out: &mut Vec<(String, PathBuf)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let name = format!("{rel}{}", e.file_name().to_string_lossy());
            if e.file_type().unwrap().is_dir() {
                walk(&e.path(), &format!("{name}/"), out);
            } else if name != "README.md" {
                out.push((name, e.path()));
            }
        }
    }
    let mut files = Vec::new();
    walk(root, "", &mut files);
    files.sort();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h = (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for (name, path) in &files {
        let data = std::fs::read(path).unwrap();
        eat(name.as_bytes());
        eat(&(data.len() as u64).to_le_bytes());
        eat(&data);
    }
    h
}

/// The fixture itself is as committed: no file changed, added or removed
/// (it is never regenerated), no LOCK file, a PM region and tables in each
/// database.
#[test]
fn format_v1_fixture_is_as_committed() {
    assert_eq!(
        fixture_digest(&fixture(L0Kind::Sstable)),
        FIXTURE_DIGEST,
        "tests/fixtures/format-v1 changed: it must stay as written (see its README)"
    );
    assert_eq!(
        fixture_digest(&fixture(L0Kind::SingleLevel)),
        SINGLE_LEVEL_FIXTURE_DIGEST,
        "tests/fixtures/format-v1-single-level changed: it must stay as written (see its README)"
    );
    LEARNED.with(|c| c.set(true));
    assert_eq!(
        fixture_digest(&fixture(L0Kind::Sstable)),
        LEARNED_FIXTURE_DIGEST,
        "tests/fixtures/format-v2-learned changed: it must stay as written (see its README)"
    );
    let learned = fixture(L0Kind::Sstable).join("sstable");
    LEARNED.with(|c| c.set(false));
    for (l0, dir) in [L0Kind::Sstable, L0Kind::Matrix, L0Kind::SingleLevel, L0Kind::Sstable].into_iter().zip([
        None,
        None,
        None,
        Some(learned),
    ]) {
        let dir = dir.unwrap_or_else(|| fixture(l0).join(l0.name()));
        let names: Vec<String> =
            std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        assert!(!names.iter().any(|n| n == "LOCK"), "{}: a LOCK file", l0.name());
        assert!(names.iter().any(|n| n == "CURRENT"), "{}: no CURRENT", l0.name());
        assert!(names.iter().filter(|n| n.ends_with(".sst")).count() > 5, "{}: tables missing", l0.name());
        let pm = dir.join("pm").join(stratakv::REGION_FILE);
        assert_eq!(std::fs::metadata(&pm).unwrap().len(), 1 << 20, "{}", pm.display());
    }
}

/// [`fixture_digest`] of the committed fixture.
const FIXTURE_DIGEST: u64 = 0xe5d3_9f82_3124_bf67;

/// [`fixture_digest`] of the committed single-level fixture.
const SINGLE_LEVEL_FIXTURE_DIGEST: u64 = 0xad44_7c1f_94d0_577a;

/// [`fixture_digest`] of the committed `format-v2-learned`.
const LEARNED_FIXTURE_DIGEST: u64 = 0x7b79_e9c5_8259_c7d4;
