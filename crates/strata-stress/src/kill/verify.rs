//! Checking a recovered engine against the expected-state file, then
//! resolving pending writes (each is now applied or not, for good).

use std::collections::{BTreeMap, HashMap};

use stratakv::Db;

use super::child::{in_partition, KILL_PARTITION};
use super::expected::{allowed, id_of, ExpectedFile, DELETE};
use super::key_of;
use crate::report::Report;

/// Parses a key written by the kill mode back to its index.
pub fn index_of(key: &[u8]) -> Option<u64> {
    std::str::from_utf8(key).ok()?.strip_prefix("kill-")?.parse().ok()
}

/// Checks `got` (key index → value) against the expected state, then
/// resolves it. `Err` describes violations.
pub fn check_and_resolve(
    exp: &ExpectedFile,
    got: &BTreeMap<u64, Vec<u8>>,
    rep: &mut Report,
) -> anyhow::Result<Result<(), String>> {
    let mut problems = Vec::new();
    // Batches in flight: pending put id -> (keys, keys showing it).
    let mut batches: HashMap<u64, (u64, u64)> = HashMap::new();
    for k in 0..exp.keys() {
        let (committed, pending) = exp.get(k)?;
        let value = got.get(&k);
        let id = match value {
            Some(v) => match id_of(k, v) {
                Some(id) => Some(id),
                None => {
                    problems.push(format!(
                        "{} holds a value no write stored ({} bytes)",
                        String::from_utf8_lossy(&key_of(k)),
                        v.len()
                    ));
                    continue;
                }
            },
            None => None,
        };
        if !allowed(id, committed, pending) {
            problems.push(format!(
                "{} = {:?} but committed {committed:#x} pending {pending:#x}",
                String::from_utf8_lossy(&key_of(k)),
                id.map(|i| format!("{i:#x}"))
            ));
        }
        if pending != 0 && pending & DELETE == 0 {
            let e = batches.entry(pending).or_default();
            e.0 += 1;
            if id == Some(pending) {
                e.1 += 1;
            }
        }
        if pending != 0 {
            rep.add(
                if id == Some(pending) || (id.is_none() && pending & DELETE != 0) {
                    "pending_applied"
                } else {
                    "pending_not_applied"
                },
                1,
            );
        }
        rep.add("keys_checked", 1);
    }
    for (id, (n, shown)) in batches {
        if shown != 0 && shown != n {
            problems.push(format!("write {id:#x} is half applied: {shown} of {n} keys"));
        }
    }
    for k in got.keys() {
        if *k >= exp.keys() {
            problems.push(format!("key index {k} was never written"));
        }
    }
    if !problems.is_empty() {
        problems.truncate(6);
        return Ok(Err(problems.join("; ")));
    }
    // Resolve: what the database holds is now the committed state.
    for k in 0..exp.keys() {
        let (committed, pending) = exp.get(k)?;
        if pending == 0 {
            continue;
        }
        let now = match got.get(&k).and_then(|v| id_of(k, v)) {
            Some(id) => id,
            None if committed == 0 => 0,
            None => committed | DELETE,
        };
        exp.commit(k, now)?;
    }
    Ok(Ok(()))
}

/// Reads every kill-mode key of an open database: the default partition
/// and [`KILL_PARTITION`] (absent if the writer was killed before
/// creating it), each key in the partition its index says.
pub fn read_engine(db: &Db) -> Result<BTreeMap<u64, Vec<u8>>, String> {
    let mut out = BTreeMap::new();
    let failed = |e: stratakv::Error| format!("reading the recovered database failed: {e}");
    let mut all: Vec<(bool, Vec<u8>, Vec<u8>)> =
        crate::read_all(db).map_err(failed)?.into_iter().map(|(k, v)| (false, k, v)).collect();
    if db.list_partitions().iter().any(|p| p == KILL_PARTITION) {
        let p = db.partition(KILL_PARTITION).map_err(failed)?;
        let mut it = p.iter(..).map_err(failed)?;
        while let Some((k, v)) = it.try_next().map_err(failed)? {
            all.push((true, k, v));
        }
    }
    for (partitioned, k, v) in all {
        match index_of(&k) {
            Some(i) if in_partition(i) == partitioned => {
                out.insert(i, v);
            }
            Some(i) => return Err(format!("key index {i} is in the wrong partition")),
            None => return Err(format!("unknown key {:?} in the database", String::from_utf8_lossy(&k))),
        }
    }
    Ok(out)
}
