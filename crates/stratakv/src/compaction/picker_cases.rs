//! Table-driven tests of the compaction pickers: the leveled picker (`pick`,
//! `pick_range`), the run merge picker and the row merge picker of the
//! matrix. Cases are text files under `testdata/pickers/`; the format is
//! described in `testdata/pickers/README.md`.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use super::picker::{pick, pick_range, CompactionTask, LevelPolicy};
use crate::key::{internal_key, Kind};
use crate::matrix::policy::merge::{pick_merge, MergeCandidate};
use crate::matrix::policy::runs::{pick_run_merge, RunMergeTask};
use crate::version::{FileMeta, Run, Version, NUM_LEVELS};

/// The state a case builds up, line by line.
struct Case {
    name: String,
    policy: LevelPolicy,
    version: Version,
    busy: HashSet<u64>,
    pointers: Vec<Vec<u8>>,
    rows: Vec<MergeCandidate>,
}

impl Case {
    fn new(name: &str) -> Case {
        Case {
            name: name.to_string(),
            policy: LevelPolicy { l0_trigger: 4, base_bytes: 1000, multiplier: 10, target_file_size: 100 },
            version: Version::empty(),
            busy: HashSet::new(),
            pointers: vec![Vec::new(); NUM_LEVELS],
            rows: Vec::new(),
        }
    }
}

fn file(number: u64, lo: &str, hi: &str, size: u64) -> Arc<FileMeta> {
    Arc::new(FileMeta {
        number,
        size,
        smallest: internal_key(lo.as_bytes(), 10, Kind::Put),
        largest: internal_key(hi.as_bytes(), 1, Kind::Put),
        entries: 1,
        deletions: 0,
        smallest_seq: 1,
        largest_seq: 10,
    })
}

fn numbers(files: &[Arc<FileMeta>]) -> String {
    files.iter().map(|f| f.number.to_string()).collect::<Vec<_>>().join(",")
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

fn describe_task(t: Option<CompactionTask>) -> String {
    match t {
        None => "none".into(),
        Some(t) => format!(
            "level={} inputs={} next={} grandparents={} trivial={}",
            t.level,
            numbers(&t.inputs),
            numbers(&t.next_inputs),
            numbers(&t.grandparents),
            yes(t.trivial_move)
        ),
    }
}

fn describe_runs(t: Option<RunMergeTask>) -> String {
    match t {
        None => "none".into(),
        Some(t) => format!(
            "runs={} next={} grandparents={} trivial={}",
            t.runs.iter().map(|r| r.id.to_string()).collect::<Vec<_>>().join(","),
            numbers(&t.next_inputs),
            numbers(&t.grandparents),
            yes(t.trivial_move)
        ),
    }
}

fn bound(s: &str) -> Option<Vec<u8>> {
    (s != "-").then(|| s.as_bytes().to_vec())
}

/// What the picker named on a `pick` line returns now, in the form of an
/// `expect` line.
fn run_pick(c: &Case, words: &[&str]) -> String {
    let num = |i: usize| {
        words
            .get(i)
            .and_then(|w| w.parse::<usize>().ok())
            .unwrap_or_else(|| panic!("{}: bad pick line {words:?}", c.name))
    };
    match words.first().copied() {
        Some("leveled") => describe_task(pick(&c.version, &c.policy, &c.busy, &c.pointers)),
        Some("range") => {
            let (lo, hi) = (bound(words[2]), bound(words[3]));
            describe_task(pick_range(&c.version, &c.policy, num(1), lo.as_deref(), hi.as_deref(), &c.busy))
        }
        Some("runs") => {
            let active = words[1].parse::<u64>().ok();
            let force = words.get(3) == Some(&"force");
            describe_runs(pick_run_merge(&c.version, active, num(2), force, &c.busy))
        }
        Some("rowmerge") => match pick_merge(&c.rows, num(1), num(2)) {
            None => "none".into(),
            Some(w) => format!("window={}..{}", w.start, w.end),
        },
        other => panic!("{}: unknown picker {other:?}", c.name),
    }
}

fn run_file(path: &Path) -> usize {
    let text = std::fs::read_to_string(path).unwrap();
    let mut case: Option<Case> = None;
    let mut got: Option<String> = None;
    let mut checked = 0;
    for (n, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let at = format!("{}:{}", path.display(), n + 1);
        let (head, rest) = line.split_once(' ').unwrap_or((line, ""));
        let words: Vec<&str> = rest.split_whitespace().collect();
        if head == "case" {
            assert!(got.is_none(), "{at}: a pick without an expect line");
            case = Some(Case::new(rest));
            continue;
        }
        let c = case.as_mut().unwrap_or_else(|| panic!("{at}: a line before the first case"));
        match head {
            "policy" => {
                for kv in &words {
                    let (k, v) = kv.split_once('=').unwrap_or_else(|| panic!("{at}: {kv}"));
                    let v: u64 = v.parse().unwrap_or_else(|_| panic!("{at}: {kv}"));
                    match k {
                        "l0_trigger" => c.policy.l0_trigger = v as usize,
                        "base" => c.policy.base_bytes = v,
                        "multiplier" => c.policy.multiplier = v,
                        "target" => c.policy.target_file_size = v,
                        _ => panic!("{at}: unknown policy field {k}"),
                    }
                }
            }
            "file" => {
                let level: usize = words[0].trim_start_matches('L').parse().unwrap_or_else(|_| panic!("{at}"));
                let f = file(words[1].parse().unwrap(), words[2], words[3], words[4].parse().unwrap());
                c.version.levels[level].push(f);
                // As `apply` keeps them: L0 newest first, deeper levels by key.
                if level == 0 {
                    c.version.levels[0].sort_by_key(|f| std::cmp::Reverse(f.number));
                } else {
                    c.version.levels[level].sort_by(|a, b| crate::key::compare_internal(&a.smallest, &b.smallest));
                }
            }
            "run" => {
                let id: u64 = words[0].parse().unwrap();
                let f = file(words[1].parse().unwrap(), words[2], words[3], words[4].parse().unwrap());
                match c.version.runs.iter_mut().find(|r| r.id == id) {
                    Some(r) => r.files.push(f),
                    None => c.version.runs.push(Run { id, files: vec![f] }),
                }
                c.version.runs.sort_by_key(|r| std::cmp::Reverse(r.id));
            }
            "busy" => c.busy = words.iter().map(|w| w.parse().unwrap()).collect(),
            "pointer" => {
                c.pointers[words[0].parse::<usize>().unwrap()] = internal_key(words[1].as_bytes(), 1, Kind::Put)
            }
            "rows" => {
                c.rows = words
                    .iter()
                    .map(|w| {
                        let p: Vec<&str> = w.split(':').collect();
                        MergeCandidate {
                            seg: p[0].parse().unwrap(),
                            elems: p[1].parse().unwrap(),
                            receiver: p[2] == "r",
                        }
                    })
                    .collect()
            }
            "pick" => got = Some(run_pick(c, &words)),
            "expect" => {
                let g = got.take().unwrap_or_else(|| panic!("{at}: expect without a pick"));
                assert_eq!(g, rest, "{at}: case {:?}", c.name);
                checked += 1;
            }
            other => panic!("{at}: unknown line {other:?}"),
        }
    }
    assert!(got.is_none(), "{}: a pick without an expect line at the end", path.display());
    checked
}

#[test]
fn picker_cases_under_testdata() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/pickers");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.retain(|p| p.extension().is_some_and(|e| e == "txt"));
    files.sort();
    let checked: usize = files.iter().map(|p| run_file(p)).sum();
    assert!(files.len() >= 3 && checked >= 20, "{} files, {checked} expectations", files.len());
}
