//! Table-driven tests of the matrix's cross-row hints and the lookups that
//! use them: cases are text files under `testdata/matrix_hints/` (format in
//! its README.md). Each case builds rows in a simulated PM region, checks
//! every element's hint into the next-older row, and looks keys up with
//! segment hash indexes and with bloom filters (where the hints narrow
//! each older row's search).

use std::path::Path;

use super::{region, write_log};
use crate::key::{key_hash, Kind, Lookup};
use crate::matrix::build::{build_row, RowSpec};
use crate::matrix::{LiveRow, Matrix};

type Record = (Vec<u8>, u64, Kind, Vec<u8>);

/// `key@seq` or `key@seq:del`; a put's value is `v<seq>`.
fn record(word: &str) -> Record {
    let (k, rest) = word.split_once('@').unwrap_or_else(|| panic!("bad element {word}"));
    let (seq, del) = match rest.split_once(':') {
        Some((s, "del")) => (s, true),
        Some(_) => panic!("bad element {word}"),
        None => (rest, false),
    };
    let seq: u64 = seq.parse().unwrap();
    let kind = if del { Kind::Delete } else { Kind::Put };
    let v = if del { Vec::new() } else { format!("v{seq}").into_bytes() };
    (k.as_bytes().to_vec(), seq, kind, v)
}

/// A matrix of `rows` (oldest first), one segment per `per_segment` rows.
fn build(rows: &[Vec<Record>], hash_index: bool, per_segment: usize) -> Matrix {
    let (region, path) = region();
    let mut m = Matrix::new(per_segment, hash_index);
    for (i, recs) in rows.iter().enumerate() {
        let log = 100 + i as u64;
        let (mut entries, ext, bytes) = write_log(&region, log, recs);
        let older = m.rows.first().map(|l| l.row.clone());
        let id = m.next_row_id;
        m.next_row_id += 1;
        let spec = RowSpec { id, entries: &mut entries, older: older.as_deref(), log_bytes: bytes, logs: vec![ext] };
        let row = build_row(&region, &path, spec).unwrap();
        m.push_newest(LiveRow::new(row, 0, false, log, log, hash_index, None).unwrap());
    }
    m
}

fn describe(l: Lookup) -> String {
    match l {
        Lookup::Found(v) => String::from_utf8_lossy(&v).into_owned(),
        Lookup::Deleted => "deleted".into(),
        Lookup::Missing => "missing".into(),
    }
}

/// One case: rows, expected hints, lookups.
struct Case {
    name: String,
    per_segment: usize,
    rows: Vec<Vec<Record>>,
    hints: Vec<(usize, Vec<u32>, String)>,
    gets: Vec<(Vec<u8>, u64, String, String)>,
}

impl Case {
    fn check(&self) -> usize {
        let mut checked = 0;
        for hash_index in [false, true] {
            let m = build(&self.rows, hash_index, self.per_segment);
            for (n, want, at) in &self.hints {
                let row = &m.rows[*n].row;
                let got: Vec<u32> = (0..row.len()).map(|i| row.elem(i).unwrap().hint).collect();
                assert_eq!(&got, want, "{at}: hints of row {n} (0 = newest) in case {:?}", self.name);
                checked += 1;
            }
            for (k, seq, want, at) in &self.gets {
                let got = describe(m.get(k, *seq, key_hash(k)).unwrap());
                assert_eq!(
                    &got,
                    want,
                    "{at}: get {} @{seq} (hash index {hash_index}) in case {:?}",
                    String::from_utf8_lossy(k),
                    self.name
                );
                checked += 1;
            }
        }
        checked
    }
}

fn run_file(path: &Path) -> usize {
    let text = std::fs::read_to_string(path).unwrap();
    let mut cases: Vec<Case> = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let at = format!("{}:{}", path.display(), n + 1);
        let (head, rest) = line.split_once(' ').unwrap_or((line, ""));
        if head == "case" {
            cases.push(Case {
                name: rest.into(),
                per_segment: 8,
                rows: Vec::new(),
                hints: Vec::new(),
                gets: Vec::new(),
            });
            continue;
        }
        let c = cases.last_mut().unwrap_or_else(|| panic!("{at}: a line before the first case"));
        let words: Vec<&str> = rest.split_whitespace().collect();
        match head {
            "segment" => c.per_segment = words[0].parse().unwrap(),
            "row" => c.rows.push(words.iter().map(|w| record(w)).collect()),
            "hints" => {
                c.hints.push((words[0].parse().unwrap(), words[1..].iter().map(|w| w.parse().unwrap()).collect(), at))
            }
            "get" => {
                assert_eq!(words.get(2), Some(&"="), "{at}: get KEY SEQ = WANT");
                c.gets.push((words[0].as_bytes().to_vec(), words[1].parse().unwrap(), words[3].to_string(), at));
            }
            other => panic!("{at}: unknown line {other:?}"),
        }
    }
    cases.iter().map(Case::check).sum()
}

#[test]
fn matrix_hint_cases_under_testdata() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/matrix_hints");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.retain(|p| p.extension().is_some_and(|e| e == "txt"));
    files.sort();
    let checked: usize = files.iter().map(|p| run_file(p)).sum();
    assert!(!files.is_empty() && checked >= 40, "{} files, {checked} expectations", files.len());
}
