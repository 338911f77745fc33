//! The tree checker: reads every server's records and checks the
//! namespace invariants (used by the crash test and `strata-fs check`).

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::error::{FsError, FsResult};
use crate::ids::{key, server_of, ROOT_ID};
use crate::proto::{Request, Response};
use crate::rpc::Peers;
use crate::store::dec;
use crate::types::{AccessRec, ContentRec, Kind};

/// What the checker found.
#[derive(Debug, Default)]
pub struct Report {
    /// Every reachable path and its kind (the root is "/").
    pub tree: BTreeMap<String, Kind>,
    /// Human-readable invariant violations (empty when the tree is sound).
    pub violations: Vec<String>,
    /// Number of access records scanned.
    pub access_records: usize,
    /// Number of content records scanned.
    pub content_records: usize,
}

fn scan_all(peers: &Peers, server: usize, prefix: &[u8]) -> FsResult<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut out: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    loop {
        let after = out.last().map(|(k, _)| k.clone()).unwrap_or_default();
        let req = Request::Scan { prefix: prefix.to_vec(), after, limit: 10_000 };
        match peers.call(server, &req)?.into_result()? {
            Response::Kvs(kvs) => {
                let done = kvs.len() < 10_000;
                out.extend(kvs);
                if done {
                    return Ok(out);
                }
            }
            other => return Err(FsError::Transport(format!("unexpected reply {other:?}"))),
        }
    }
}

/// Scans every server and checks: every directory access record has its
/// content record (pointing back) and vice versa; every record is on the
/// server its key hashes to; every entry's parent exists and is reachable
/// from the root; no cycles; no pending intents left.
pub fn check(peers: &Peers) -> FsResult<Report> {
    let n = peers.len();
    let mut rep = Report::default();
    let mut access: HashMap<u64, Vec<(String, AccessRec)>> = HashMap::new();
    let mut content: HashMap<u64, ContentRec> = HashMap::new();
    for s in 0..n {
        for (k, v) in scan_all(peers, s, b"A|")? {
            let Some((pid, name)) = key::access_name(&k) else { continue };
            rep.access_records += 1;
            if server_of(pid, n) != s {
                rep.violations.push(format!("access {pid:x}/{name} on server {s}, belongs on {}", server_of(pid, n)));
            }
            access.entry(pid).or_default().push((name, dec(&v)?));
        }
        for (k, v) in scan_all(peers, s, b"C|")? {
            if k.len() != 10 {
                continue;
            }
            let id = u64::from_be_bytes(k[2..10].try_into().unwrap_or_default());
            rep.content_records += 1;
            if server_of(id, n) != s {
                rep.violations.push(format!("content {id:x} on server {s}, belongs on {}", server_of(id, n)));
            }
            let c: ContentRec = dec(&v)?;
            if c.fenced {
                rep.violations.push(format!("content {id:x} still fenced"));
            }
            content.insert(id, c);
        }
    }
    let pending = scan_all(peers, 0, b"T|")?.len();
    if pending > 0 {
        rep.violations.push(format!("{pending} intent(s) still pending"));
    }
    // Access → content.
    let mut pointed: HashSet<u64> = HashSet::new();
    for (pid, entries) in &access {
        if !content.contains_key(pid) {
            rep.violations.push(format!("orphan: {} entries under missing directory {pid:x}", entries.len()));
        }
        for (name, rec) in entries {
            if rec.kind != Kind::Dir {
                continue;
            }
            if !pointed.insert(rec.id) {
                rep.violations.push(format!("directory {:x} has two access records", rec.id));
            }
            match content.get(&rec.id) {
                None => rep.violations.push(format!("dir {pid:x}/{name} ({:x}) has no content record", rec.id)),
                Some(c) if c.parent != *pid || c.name != *name => rep.violations.push(format!(
                    "dir {pid:x}/{name} ({:x}): content points back to {:x}/{}",
                    rec.id, c.parent, c.name
                )),
                Some(_) => {}
            }
        }
    }
    // Content → access.
    for id in content.keys() {
        if *id != ROOT_ID && !pointed.contains(id) {
            rep.violations.push(format!("content record {id:x} has no access record"));
        }
    }
    if !content.contains_key(&ROOT_ID) {
        rep.violations.push("root content record missing".into());
    }
    // Reachability from the root (a walk cannot loop: each dir has one
    // access record, and a visited set guards anyway).
    let mut seen: HashSet<u64> = HashSet::new();
    let mut stack = vec![(ROOT_ID, "/".to_string())];
    rep.tree.insert("/".into(), Kind::Dir);
    while let Some((id, path)) = stack.pop() {
        if !seen.insert(id) {
            rep.violations.push(format!("cycle or shared directory at {path}"));
            continue;
        }
        for (name, rec) in access.get(&id).map(Vec::as_slice).unwrap_or(&[]) {
            let p = if path == "/" { format!("/{name}") } else { format!("{path}/{name}") };
            rep.tree.insert(p.clone(), rec.kind);
            if rec.kind == Kind::Dir {
                stack.push((rec.id, p));
            }
        }
    }
    for id in content.keys() {
        if !seen.contains(id) {
            rep.violations.push(format!("directory {id:x} not reachable from the root (orphan or cycle)"));
        }
    }
    Ok(rep)
}
