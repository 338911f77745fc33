//! The rename/transaction coordinator (server 0): mkdir, rmdir, directory
//! rename, cross-server file rename and directory chmod/chown.
//!
//! DURABILITY. Every such operation runs under one coordinator lock, in
//! three phases:
//! 1. *Validate* by reading the participants (permissions, existence,
//!    loop check). Nothing is written, so a crash here loses nothing.
//! 2. *Intent*: the coordinator writes `T|tx` (what to do, with every id
//!    and record already decided) in its own engine, durably, in one batch
//!    with the transaction counter. From here the operation will happen
//!    (or be undone by a precondition that the intent itself defines).
//! 3. *Roll forward*: idempotent [`Step`]s on each participant, in a fixed
//!    order, each retried until the participant answers; directory changes
//!    are broadcast to every server's invalidation list before (seq 2·tx)
//!    and after (seq 2·tx+1) the records change. Then `T|tx` is deleted.
//!
//! On start the coordinator rolls every remaining intent forward before it
//! serves any other coordinated operation. Steps are idempotent (guarded by
//! ids, or by an at-most-once marker for the one step a client could undo
//! between a crash and the replay), so a replay after a crash at any point
//! reaches the same state as an uninterrupted run. Single-server operations
//! (create, unlink) cannot break the invariants in between: rmdir fences
//! the directory before checking that it is empty, and a step that finds
//! its precondition gone (parent fenced, name taken) aborts with every
//! earlier step undone, before any other step ran.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use stratakv::WriteBatch;

use crate::error::{FsError, FsResult};
use crate::ids::{dir_id, key, server_of, ROOT_ID};
use crate::proto::{PathIds, Request, Response, SetAttr, Step, StepOut};
use crate::rpc::Peers;
use crate::store::{apply_setattr, dec, enc, Store};
use crate::types::{check_name, now_ns, want, AccessRec, ContentRec, Cred, Kind, Perm};

/// A durable record of a coordinated operation, decided before any step.
#[derive(Debug, Clone, Serialize, Deserialize)]
// Variant fields are named for what the variant's doc says.
#[allow(missing_docs)]
pub enum Intent {
    /// Create directory `arec.id` named `name` in `pid`.
    Mkdir { pid: u64, name: String, crec: ContentRec, arec: AccessRec },
    /// Remove directory `id` (named `name` in `pid`) if it is empty.
    Rmdir { pid: u64, name: String, id: u64, birth: (u64, String, u32) },
    /// Move `rec` from `src` to `dst`; `birth` is set for a directory.
    Rename { src: (u64, String), dst: (u64, String), rec: AccessRec, birth: Option<(u64, String, u32)> },
    /// Change directory `id`'s permissions to `perm`.
    SetAttrDir { pid: u64, name: String, id: u64, perm: Perm },
    /// Move directory `rec` from `src` to `dst`, replacing the empty
    /// directory `old` there (POSIX rename onto an empty directory);
    /// `birth` and `old_birth` are the two directories' birth triples.
    RenameOver {
        src: (u64, String),
        dst: (u64, String),
        rec: AccessRec,
        birth: (u64, String, u32),
        old: u64,
        old_birth: (u64, String, u32),
    },
}

/// The step that puts `rec` under `dst` for transaction `tx` (at most once),
/// over a file there with `replace_file`, over directory `replace_dir`.
fn place(dst: &(u64, String), rec: &AccessRec, replace_file: bool, replace_dir: Option<u64>, tx: u64) -> Step {
    Step::PutAccess { pid: dst.0, name: dst.1.clone(), rec: rec.clone(), replace_file, replace_dir, tx: Some(tx) }
}

/// The coordinator: the local store, connections to the others, one lock.
#[derive(Debug)]
pub struct Coordinator {
    store: Arc<Store>,
    peers: Peers,
    lock: Mutex<()>,
    next_tx: AtomicU64,
    step_delay: Duration,
}

/// Fault injection for crash tests: microseconds to sleep before every
/// participant step, widening the windows a SIGKILL can land in.
pub const STEP_DELAY_ENV: &str = "STRATA_FS_FAULT_STEP_DELAY_US";

impl Coordinator {
    /// A coordinator over `store` (server 0) reaching the others at `addrs`.
    pub fn new(store: Arc<Store>, addrs: Vec<String>) -> FsResult<Coordinator> {
        let next = match store.db.get(key::TX_NEXT)? {
            Some(v) if v.len() == 8 => u64::from_be_bytes(v[..8].try_into().unwrap_or_default()),
            _ => 1,
        };
        let peers = Peers::new(addrs, Duration::from_secs(5));
        let us = std::env::var(STEP_DELAY_ENV).ok().and_then(|v| v.parse().ok()).unwrap_or(0);
        Ok(Coordinator {
            store,
            peers,
            lock: Mutex::new(()),
            next_tx: AtomicU64::new(next.max(1)),
            step_delay: Duration::from_micros(us),
        })
    }

    /// Rolls every pending intent forward (call once at start; holds the
    /// coordinator lock so no new coordinated operation starts meanwhile).
    pub fn recover(&self) -> FsResult<usize> {
        let _l = self.lock.lock();
        let intents = self.store.scan(b"T|", b"", u32::MAX)?;
        let n = intents.len();
        for (k, v) in intents {
            if k.len() != 10 {
                continue;
            }
            let tx = u64::from_be_bytes(k[2..10].try_into().unwrap_or_default());
            let intent: Intent = dec(&v)?;
            // The client that asked is gone; its outcome is the tree's state.
            let _ = self.roll_forward(tx, &intent)?;
        }
        Ok(n)
    }

    /// Number of intents not yet finished.
    pub fn pending(&self) -> FsResult<u64> {
        Ok(self.store.scan(b"T|", b"", u32::MAX)?.len() as u64)
    }

    fn call(&self, server: usize, step: Step) -> FsResult<StepOut> {
        if !self.step_delay.is_zero() {
            std::thread::sleep(self.step_delay);
        }
        if server == self.store.me {
            return self.store.step(&step);
        }
        let req = Request::Step(step);
        loop {
            match self.peers.call(server, &req) {
                Ok(Response::Step(out)) => return Ok(out),
                Ok(Response::Err(FsError::Transport(_))) | Err(FsError::Transport(_)) => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Ok(Response::Err(e)) | Err(e) => return Err(e),
                Ok(other) => return Err(FsError::Transport(format!("unexpected reply {other:?}"))),
            }
        }
    }

    fn done(&self, server: usize, step: Step) -> FsResult<()> {
        match self.call(server, step)? {
            StepOut::Conflict(m) => Err(FsError::Storage(format!("unexpected conflict: {m}"))),
            _ => Ok(()),
        }
    }

    fn get<T: serde::de::DeserializeOwned>(&self, server: usize, k: Vec<u8>) -> FsResult<Option<T>> {
        match self.call(server, Step::Get { key: k })? {
            StepOut::Value(Some(v)) => Ok(Some(dec(&v)?)),
            _ => Ok(None),
        }
    }

    fn content(&self, id: u64) -> FsResult<Option<ContentRec>> {
        self.get(server_of(id, self.store.n), key::content(id))
    }

    fn access(&self, pid: u64, name: &str) -> FsResult<Option<AccessRec>> {
        self.get(server_of(pid, self.store.n), key::access(pid, name))
    }

    fn s(&self, id: u64) -> usize {
        server_of(id, self.store.n)
    }

    /// Adds `id` at `seq` to every server's invalidation list (all in
    /// parallel; retries a server until it answers).
    fn broadcast(&self, id: u64, seq: u64) -> FsResult<()> {
        let mut todo: Vec<usize> = (0..self.store.n).collect();
        while !todo.is_empty() {
            let reqs = todo.iter().map(|&s| (s, Request::Step(Step::Inval { id, seq }))).collect::<Vec<_>>();
            let local = todo.contains(&self.store.me);
            let remote: Vec<_> = reqs.into_iter().filter(|(s, _)| *s != self.store.me).collect();
            let servers: Vec<usize> = remote.iter().map(|(s, _)| *s).collect();
            let mut left = Vec::new();
            for (s, r) in servers.into_iter().zip(self.peers.round(remote)) {
                match r {
                    Ok(Response::Step(_)) => {}
                    Ok(Response::Err(FsError::Transport(_))) | Err(FsError::Transport(_)) => left.push(s),
                    Ok(Response::Err(e)) | Err(e) => return Err(e),
                    Ok(other) => return Err(FsError::Transport(format!("unexpected reply {other:?}"))),
                }
            }
            if local {
                self.store.step(&Step::Inval { id, seq })?;
            }
            if !left.is_empty() {
                std::thread::sleep(Duration::from_millis(20));
            }
            todo = left;
        }
        Ok(())
    }

    /// Writes the intent durably and returns its transaction id.
    fn begin(&self, intent: &Intent) -> FsResult<u64> {
        let tx = self.next_tx.fetch_add(1, Ordering::AcqRel);
        let mut b = WriteBatch::new();
        b.put(key::intent(tx), enc(intent)?).put(key::TX_NEXT, (tx + 1).to_be_bytes());
        self.store.db.write_opt(&b, &self.store.wo)?;
        Ok(tx)
    }

    /// Applies an intent's steps in order and deletes it. `Err` carries the
    /// operation's own failure (e.g. `Exists` when a precondition no longer
    /// held and the intent was undone); storage errors keep the intent.
    fn roll_forward(&self, tx: u64, intent: &Intent) -> FsResult<FsResult<()>> {
        let outcome = match intent {
            Intent::Mkdir { pid, name, crec, arec } => {
                let id = arec.id;
                match self.call(self.s(id), Step::PutContent { id, rec: crec.clone() })? {
                    StepOut::Conflict(_) => Err(FsError::Exists),
                    _ => {
                        let put = Step::PutAccess {
                            pid: *pid,
                            name: name.clone(),
                            rec: arec.clone(),
                            replace_file: false,
                            replace_dir: None,
                            tx: None,
                        };
                        match self.call(self.s(*pid), put)? {
                            StepOut::Conflict(m) => {
                                self.done(self.s(id), Step::DelContent { id })?;
                                Err(if m.contains("parent") { FsError::NotFound } else { FsError::Exists })
                            }
                            _ => Ok(()),
                        }
                    }
                }
            }
            Intent::Rmdir { pid, name, id, birth } => match self.call(self.s(*id), Step::Fence { id: *id })? {
                StepOut::Empty(Some(false)) => {
                    self.done(self.s(*id), Step::Unfence { id: *id })?;
                    Err(FsError::NotEmpty)
                }
                _ => {
                    self.broadcast(*id, 2 * tx)?;
                    self.done(self.s(*pid), Step::DelAccessIf { pid: *pid, name: name.clone(), id: *id, tx: None })?;
                    self.done(self.s(*id), Step::DelContent { id: *id })?;
                    let (bp, bn, bv) = birth.clone();
                    self.done(self.s(bp), Step::DelRenameList { pid: bp, name: bn, version: bv })?;
                    self.broadcast(*id, 2 * tx + 1)?;
                    Ok(())
                }
            },
            Intent::Rename { src, dst, rec, birth: None } => {
                // A file: take it away from the source exactly once (a
                // client may unlink it meanwhile), then put it at dst.
                let del = Step::DelAccessIf { pid: src.0, name: src.1.clone(), id: rec.id, tx: Some(tx) };
                match self.call(self.s(src.0), del)? {
                    StepOut::Conflict(_) => Err(FsError::NotFound),
                    _ => {
                        let put = place(dst, rec, true, None, tx);
                        self.done(self.s(dst.0), put)
                    }
                }
            }
            Intent::Rename { src, dst, rec, birth: Some((bp, bn, bv)) } => {
                // A directory: only the coordinator adds or removes
                // directories, so put-then-delete cannot race.
                self.broadcast(rec.id, 2 * tx)?;
                let put = place(dst, rec, false, None, tx);
                match self.call(self.s(dst.0), put)? {
                    StepOut::Conflict(m) => Err(if m.contains("parent") { FsError::NotFound } else { FsError::Exists }),
                    _ => {
                        self.finish_move(src, dst, rec.id, (*bp, bn, *bv))?;
                        self.broadcast(rec.id, 2 * tx + 1)?;
                        Ok(())
                    }
                }
            }
            Intent::RenameOver { src, dst, rec, birth: (bp, bn, bv), old, old_birth: (obp, obn, obv) } => {
                // Fenced first, as rmdir does: no create can land in `old`
                // while it is checked and replaced.
                match self.call(self.s(*old), Step::Fence { id: *old })? {
                    StepOut::Empty(Some(false)) => {
                        self.done(self.s(*old), Step::Unfence { id: *old })?;
                        Err(FsError::NotEmpty)
                    }
                    _ => {
                        self.broadcast(*old, 2 * tx)?;
                        self.broadcast(rec.id, 2 * tx)?;
                        // One batch on dst's server swaps `old`'s access
                        // record for the moved directory's.
                        let put = place(dst, rec, false, Some(*old), tx);
                        match self.call(self.s(dst.0), put)? {
                            StepOut::Conflict(m) => {
                                self.done(self.s(*old), Step::Unfence { id: *old })?;
                                self.broadcast(*old, 2 * tx + 1)?;
                                self.broadcast(rec.id, 2 * tx + 1)?;
                                Err(if m.contains("parent") { FsError::NotFound } else { FsError::Exists })
                            }
                            _ => {
                                self.finish_move(src, dst, rec.id, (*bp, bn, *bv))?;
                                self.done(self.s(*old), Step::DelContent { id: *old })?;
                                let orl = Step::DelRenameList { pid: *obp, name: obn.clone(), version: *obv };
                                self.done(self.s(*obp), orl)?;
                                self.broadcast(*old, 2 * tx + 1)?;
                                self.broadcast(rec.id, 2 * tx + 1)?;
                                Ok(())
                            }
                        }
                    }
                }
            }
            Intent::SetAttrDir { pid, name, id, perm } => {
                self.broadcast(*id, 2 * tx)?;
                let sa = Step::SetAccessPerm { pid: *pid, name: name.clone(), id: *id, perm: *perm };
                self.done(self.s(*pid), sa)?;
                self.done(self.s(*id), Step::SetContentPerm { id: *id, perm: *perm })?;
                self.broadcast(*id, 2 * tx + 1)?;
                Ok(())
            }
        };
        self.store.db.delete_opt(key::intent(tx), &self.store.wo)?;
        if let Intent::Rename { src, dst, .. } | Intent::RenameOver { src, dst, .. } = intent {
            // Best effort: a lost marker only costs a few bytes.
            let _ = self.call(self.s(dst.0), Step::ForgetTx { tx });
            if self.s(src.0) != self.s(dst.0) {
                let _ = self.call(self.s(src.0), Step::ForgetTx { tx });
            }
        }
        Ok(outcome)
    }

    /// A directory rename's steps after the moved directory's access record
    /// is at `dst`: its old record goes, its content record points at the
    /// new place, and its birth parent's rename list names it.
    fn finish_move(
        &self,
        src: &(u64, String),
        dst: &(u64, String),
        id: u64,
        birth: (u64, &String, u32),
    ) -> FsResult<()> {
        let del = Step::DelAccessIf { pid: src.0, name: src.1.clone(), id, tx: None };
        self.done(self.s(src.0), del)?;
        self.done(self.s(id), Step::SetContentLoc { id, parent: dst.0, name: dst.1.clone() })?;
        let (bp, bn, bv) = birth;
        self.done(self.s(bp), Step::PutRenameList { pid: bp, name: bn.clone(), version: bv })
    }

    fn run(&self, intent: Intent) -> FsResult<u64> {
        let tx = self.begin(&intent)?;
        self.roll_forward(tx, &intent)??;
        Ok(2 * tx + 1)
    }

    /// A live, unfenced directory's content, checked for `bits`.
    fn dir(&self, id: u64, cred: &Cred, bits: u32) -> FsResult<ContentRec> {
        let c = self.content(id)?.ok_or(FsError::NotFound)?;
        if c.fenced {
            return Err(FsError::NotFound);
        }
        c.perm.check(cred, bits)?;
        Ok(c)
    }

    /// mkdir: the new directory's id is the first version whose id is
    /// neither taken nor in the parent's rename list.
    pub fn mkdir(&self, pid: u64, name: &str, mode: u32, cred: &Cred, path: &PathIds) -> FsResult<(AccessRec, u64)> {
        check_name(name)?;
        let _l = self.lock.lock();
        drop(self.store.check_path(path)?);
        self.dir(pid, cred, want::W | want::X)?;
        if self.access(pid, name)?.is_some() {
            return Err(FsError::Exists);
        }
        let mut version = 0u32;
        let id = loop {
            let id = dir_id(pid, name, version);
            let moved = self.get::<()>(self.s(pid), key::rename_list(pid, name, version))?.is_some();
            if !moved && self.content(id)?.is_none() {
                break id;
            }
            version += 1;
            if version > 1000 {
                return Err(FsError::Storage("no free directory id".into()));
            }
        };
        let now = now_ns();
        let perm = Perm { mode: mode & 0o7777, uid: cred.uid, gid: cred.gid };
        let crec = ContentRec {
            parent: pid,
            name: name.to_string(),
            birth_parent: pid,
            birth_name: name.to_string(),
            version,
            perm,
            fenced: false,
            mtime_ns: now,
        };
        let arec = AccessRec { kind: Kind::Dir, id, perm, version, size: 0, mtime_ns: now, ctime_ns: now };
        let seq = self.run(Intent::Mkdir { pid, name: name.to_string(), crec, arec: arec.clone() })?;
        Ok((arec, seq))
    }

    /// rmdir of an empty directory (fenced first, then checked, then removed).
    pub fn rmdir(&self, pid: u64, name: &str, cred: &Cred, path: &PathIds) -> FsResult<()> {
        let _l = self.lock.lock();
        drop(self.store.check_path(path)?);
        self.dir(pid, cred, want::W | want::X)?;
        let rec = self.access(pid, name)?.ok_or(FsError::NotFound)?;
        if rec.kind != Kind::Dir {
            return Err(FsError::NotDir);
        }
        let c = self.content(rec.id)?.ok_or(FsError::NotFound)?;
        let birth = (c.birth_parent, c.birth_name, c.version);
        self.run(Intent::Rmdir { pid, name: name.to_string(), id: rec.id, birth }).map(|_| ())
    }

    /// rename of a directory (with the loop check) or of a file across servers.
    pub fn rename(&self, src: (u64, &str), dst: (u64, &str), cred: &Cred, path: &PathIds) -> FsResult<()> {
        check_name(dst.1)?;
        let _l = self.lock.lock();
        drop(self.store.check_path(path)?);
        self.dir(src.0, cred, want::W | want::X)?;
        self.dir(dst.0, cred, want::W | want::X)?;
        let rec = self.access(src.0, src.1)?.ok_or(FsError::NotFound)?;
        if src == dst {
            return Ok(());
        }
        let mut replaces = None;
        if let Some(d) = self.access(dst.0, dst.1)? {
            match (rec.kind, d.kind) {
                (_, _) if d.id == rec.id => return Ok(()),
                (Kind::Dir, Kind::Dir) => {
                    let c = self.content(d.id)?.ok_or(FsError::NotFound)?;
                    replaces = Some((d.id, (c.birth_parent, c.birth_name, c.version)));
                }
                (Kind::Dir, Kind::File) => return Err(FsError::NotDir),
                (Kind::File, Kind::Dir) => return Err(FsError::IsDir),
                (Kind::File, Kind::File) => {}
            }
        }
        let birth = if rec.kind == Kind::Dir {
            // Loop check: dst's ancestors must not include the moved directory.
            let mut x = dst.0;
            for _ in 0..100_000 {
                if x == rec.id {
                    return Err(FsError::Invalid("cannot move a directory under itself".into()));
                }
                if x == ROOT_ID {
                    break;
                }
                x = self.content(x)?.ok_or(FsError::NotFound)?.parent;
            }
            let c = self.content(rec.id)?.ok_or(FsError::NotFound)?;
            Some((c.birth_parent, c.birth_name, c.version))
        } else {
            None
        };
        let (src, dst) = ((src.0, src.1.to_string()), (dst.0, dst.1.to_string()));
        let intent = match (birth, replaces) {
            (Some(birth), Some((old, old_birth))) => Intent::RenameOver { src, dst, rec, birth, old, old_birth },
            (birth, _) => Intent::Rename { src, dst, rec, birth },
        };
        self.run(intent).map(|_| ())
    }

    /// chmod/chown of a directory (both copies of its permissions change).
    pub fn setattr_dir(
        &self,
        pid: u64,
        name: &str,
        attr: &SetAttr,
        cred: &Cred,
        path: &PathIds,
    ) -> FsResult<(AccessRec, u64)> {
        let _l = self.lock.lock();
        drop(self.store.check_path(path)?);
        self.dir(pid, cred, want::X)?;
        let mut rec = self.access(pid, name)?.ok_or(FsError::NotFound)?;
        if rec.kind != Kind::Dir {
            return Err(FsError::NotDir);
        }
        let perm = apply_setattr(rec.perm, attr, cred)?;
        let seq = self.run(Intent::SetAttrDir { pid, name: name.to_string(), id: rec.id, perm })?;
        rec.perm = perm;
        Ok((rec, seq))
    }
}
