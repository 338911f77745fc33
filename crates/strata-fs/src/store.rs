//! One server's records in its own `stratakv::Db`, and the single-server
//! operations on them (lookup, create, unlink, readdir, file chmod, local
//! file rename). Every write is one atomic `WriteBatch`.
//!
//! Concurrency: mutations of the records under one directory hold that
//! directory's stripe lock, and every operation that checks a client's
//! path against the invalidation list holds the list's read lock until its
//! write is done, so an invalidation is ordered entirely before or after it.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, MutexGuard, RwLock, RwLockReadGuard};
use stratakv::{Db, Options, WriteBatch, WriteOptions};

use crate::error::{FsError, FsResult};
use crate::ids::{key, server_of, ROOT_ID};
use crate::proto::{PathIds, SetAttr};
use crate::types::{now_ns, want, AccessRec, ContentRec, Cred, DirEntry, Kind, Perm};

const STRIPES: usize = 64;
const FILE_ID_BLOCK: u64 = 4096;

/// One metadata server's store.
#[derive(Debug)]
pub struct Store {
    /// The engine.
    pub db: Db,
    /// This server's index.
    pub me: usize,
    /// Number of servers.
    pub n: usize,
    pub(crate) wo: WriteOptions,
    stripes: Vec<Mutex<()>>,
    /// Invalidation list: directory id → (seq, wall-clock ms when added).
    pub(crate) inval: RwLock<HashMap<u64, (u64, u64)>>,
    pub(crate) max_seq: AtomicU64,
    file_ids: Mutex<(u64, u64)>,
}

/// Encodes a record for the engine.
pub fn enc<T: serde::Serialize>(v: &T) -> FsResult<Vec<u8>> {
    Ok(bincode::serialize(v)?)
}

/// Decodes a record read from the engine (corruption is an error, not a panic).
pub fn dec<T: serde::de::DeserializeOwned>(b: &[u8]) -> FsResult<T> {
    Ok(bincode::deserialize(b)?)
}

impl Store {
    /// Opens (or creates) the store of server `me` of `n` in `dir`; the
    /// root's server creates the root's content record if it is missing.
    pub fn open(dir: &Path, me: usize, n: usize, sync: bool, small: bool) -> FsResult<Store> {
        let opts = if small { Options::for_tests() } else { Options::default() };
        let db = Db::open(dir, opts)?;
        let mut inval = HashMap::new();
        let mut max_seq = 0;
        let prefix = b"I|".to_vec();
        for (k, v) in db.iter(prefix.clone()..key::prefix_end(&prefix))? {
            if k.len() == 10 && v.len() == 16 {
                let id = u64::from_be_bytes(k[2..10].try_into().unwrap_or_default());
                let seq = u64::from_be_bytes(v[..8].try_into().unwrap_or_default());
                let ms = u64::from_be_bytes(v[8..16].try_into().unwrap_or_default());
                max_seq = max_seq.max(seq);
                inval.insert(id, (seq, ms));
            }
        }
        let next = match db.get(key::FILE_NEXT)? {
            Some(v) if v.len() == 8 => u64::from_be_bytes(v[..8].try_into().unwrap_or_default()),
            _ => 0,
        };
        let store = Store {
            db,
            me,
            n,
            wo: WriteOptions { sync },
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            inval: RwLock::new(inval),
            max_seq: AtomicU64::new(max_seq),
            file_ids: Mutex::new((next, next)),
        };
        if server_of(ROOT_ID, n) == me && store.content(ROOT_ID)?.is_none() {
            let root = ContentRec {
                parent: 0,
                name: String::new(),
                birth_parent: 0,
                birth_name: String::new(),
                version: 0,
                perm: Perm { mode: 0o755, uid: 0, gid: 0 },
                fenced: false,
                mtime_ns: now_ns(),
            };
            store.db.put_opt(key::content(ROOT_ID), enc(&root)?, &store.wo)?;
        }
        Ok(store)
    }

    /// The highest invalidation seq this server has seen.
    pub fn seq(&self) -> u64 {
        self.max_seq.load(Ordering::Acquire)
    }

    pub(crate) fn stripe(&self, id: u64) -> MutexGuard<'_, ()> {
        self.stripes[(id % STRIPES as u64) as usize].lock()
    }

    pub(crate) fn stripes2(&self, a: u64, b: u64) -> (MutexGuard<'_, ()>, Option<MutexGuard<'_, ()>>) {
        let (ia, ib) = ((a % STRIPES as u64) as usize, (b % STRIPES as u64) as usize);
        if ia == ib {
            (self.stripes[ia].lock(), None)
        } else if ia < ib {
            let g = self.stripes[ia].lock();
            (g, Some(self.stripes[ib].lock()))
        } else {
            let g = self.stripes[ib].lock();
            (g, Some(self.stripes[ia].lock()))
        }
    }

    /// Refuses a request resolved through a directory invalidated after the
    /// client validated it; returns the read guard to hold while operating.
    pub fn check_path(&self, path: &PathIds) -> FsResult<RwLockReadGuard<'_, HashMap<u64, (u64, u64)>>> {
        let g = self.inval.read();
        let stale: Vec<u64> =
            path.iter().filter(|(id, seen)| g.get(id).is_some_and(|(s, _)| s > seen)).map(|(id, _)| *id).collect();
        if stale.is_empty() {
            Ok(g)
        } else {
            Err(FsError::Stale(stale))
        }
    }

    /// Drops invalidation entries older than `keep` (no client cache entry
    /// validated before them can still be in use: clients expire theirs
    /// after a shorter TTL). Returns how many were dropped.
    pub fn prune_inval(&self, keep: std::time::Duration) -> FsResult<usize> {
        let cutoff = now_ns() / 1_000_000;
        let cutoff = cutoff.saturating_sub(keep.as_millis() as u64);
        let mut g = self.inval.write();
        let old: Vec<u64> = g.iter().filter(|(_, (_, ms))| *ms < cutoff).map(|(id, _)| *id).collect();
        if old.is_empty() {
            return Ok(0);
        }
        let mut b = WriteBatch::new();
        for id in &old {
            b.delete(key::inval(*id));
        }
        self.db.write_opt(&b, &self.wo)?;
        for id in &old {
            g.remove(id);
        }
        Ok(old.len())
    }

    /// The content record of directory `id`, if this server has it.
    pub fn content(&self, id: u64) -> FsResult<Option<ContentRec>> {
        self.db.get(key::content(id))?.map(|b| dec(&b)).transpose()
    }

    /// The access record of `name` in `pid`, if present.
    pub fn access(&self, pid: u64, name: &str) -> FsResult<Option<AccessRec>> {
        self.db.get(key::access(pid, name))?.map(|b| dec(&b)).transpose()
    }

    /// The live content record of `pid`, checked for `bits` permission.
    fn parent(&self, pid: u64, cred: &Cred, bits: u32) -> FsResult<ContentRec> {
        let c = self.content(pid)?.ok_or(FsError::NotFound)?;
        c.perm.check(cred, bits)?;
        Ok(c)
    }

    /// Lookup of `name` in `pid` (search permission on `pid`), with the seq
    /// the answer is valid at.
    pub fn lookup(&self, pid: u64, name: &str, cred: &Cred, path: &PathIds) -> FsResult<(AccessRec, u64)> {
        let _g = self.check_path(path)?;
        let seq = self.seq();
        self.parent(pid, cred, want::X)?;
        let rec = self.access(pid, name)?.ok_or(FsError::NotFound)?;
        Ok((rec, seq))
    }

    fn new_file_id(&self) -> FsResult<u64> {
        let mut g = self.file_ids.lock();
        if g.0 >= g.1 {
            let upto = g.1 + FILE_ID_BLOCK;
            self.db.put_opt(key::FILE_NEXT, upto.to_be_bytes(), &self.wo)?;
            g.1 = upto;
        }
        let n = g.0;
        g.0 += 1;
        Ok((1 << 63) | ((self.me as u64 & 0x7fff) << 48) | (n & ((1 << 48) - 1)))
    }

    /// Creates a regular file: one atomic batch on this (the parent's) server.
    pub fn create(&self, pid: u64, name: &str, mode: u32, cred: &Cred, path: &PathIds) -> FsResult<(AccessRec, u64)> {
        crate::types::check_name(name)?;
        let _s = self.stripe(pid);
        let _g = self.check_path(path)?;
        let mut c = self.parent(pid, cred, want::W | want::X)?;
        if c.fenced {
            return Err(FsError::NotFound);
        }
        if self.access(pid, name)?.is_some() {
            return Err(FsError::Exists);
        }
        let now = now_ns();
        let rec = AccessRec {
            kind: Kind::File,
            id: self.new_file_id()?,
            perm: Perm { mode: mode & 0o7777, uid: cred.uid, gid: cred.gid },
            version: 0,
            size: 0,
            mtime_ns: now,
            ctime_ns: now,
        };
        c.mtime_ns = now;
        let mut b = WriteBatch::new();
        b.put(key::access(pid, name), enc(&rec)?).put(key::content(pid), enc(&c)?);
        self.db.write_opt(&b, &self.wo)?;
        Ok((rec, self.seq()))
    }

    /// Removes a regular file: one atomic batch on the parent's server.
    pub fn unlink(&self, pid: u64, name: &str, cred: &Cred, path: &PathIds) -> FsResult<()> {
        let _s = self.stripe(pid);
        let _g = self.check_path(path)?;
        let mut c = self.parent(pid, cred, want::W | want::X)?;
        let rec = self.access(pid, name)?.ok_or(FsError::NotFound)?;
        if rec.kind == Kind::Dir {
            return Err(FsError::IsDir);
        }
        c.mtime_ns = now_ns();
        let mut b = WriteBatch::new();
        b.delete(key::access(pid, name)).put(key::content(pid), enc(&c)?);
        Ok(self.db.write_opt(&b, &self.wo)?)
    }

    /// One page of directory `id`'s entries: a prefix scan of `A|id|`.
    pub fn readdir(
        &self,
        id: u64,
        after: Option<&str>,
        limit: u32,
        cred: &Cred,
        path: &PathIds,
    ) -> FsResult<(Vec<DirEntry>, Option<String>)> {
        let _g = self.check_path(path)?;
        self.parent(id, cred, want::R)?;
        let prefix = key::access_prefix(id);
        let start = match after {
            Some(name) => {
                let mut k = key::access(id, name);
                k.push(0);
                k
            }
            None => prefix.clone(),
        };
        let limit = limit.clamp(1, 10_000) as usize;
        let mut out = Vec::new();
        let mut it = self.db.iter(start..key::prefix_end(&prefix))?;
        while let Some((k, v)) = it.try_next()? {
            let Some((_, name)) = key::access_name(&k) else { continue };
            out.push(DirEntry { name, rec: dec(&v)? });
            if out.len() == limit {
                let next = out.last().map(|e| e.name.clone());
                return Ok((out, next));
            }
        }
        Ok((out, None))
    }

    /// chmod/chown of a regular file.
    pub fn setattr_file(
        &self,
        pid: u64,
        name: &str,
        attr: &SetAttr,
        cred: &Cred,
        path: &PathIds,
    ) -> FsResult<(AccessRec, u64)> {
        let _s = self.stripe(pid);
        let _g = self.check_path(path)?;
        self.parent(pid, cred, want::X)?;
        let mut rec = self.access(pid, name)?.ok_or(FsError::NotFound)?;
        if rec.kind == Kind::Dir {
            return Err(FsError::IsDir);
        }
        rec.perm = apply_setattr(rec.perm, attr, cred)?;
        rec.ctime_ns = now_ns();
        self.db.put_opt(key::access(pid, name), enc(&rec)?, &self.wo)?;
        Ok((rec, self.seq()))
    }

    /// Rename of a regular file whose old and new parents both live here:
    /// one atomic batch.
    pub fn rename_local(
        &self,
        (spid, sname): (u64, &str),
        (dpid, dname): (u64, &str),
        cred: &Cred,
        path: &PathIds,
    ) -> FsResult<()> {
        crate::types::check_name(dname)?;
        let (_a, _b) = self.stripes2(spid, dpid);
        let _g = self.check_path(path)?;
        let mut sc = self.parent(spid, cred, want::W | want::X)?;
        let mut dc = self.parent(dpid, cred, want::W | want::X)?;
        if dc.fenced {
            return Err(FsError::NotFound);
        }
        let rec = self.access(spid, sname)?.ok_or(FsError::NotFound)?;
        if rec.kind == Kind::Dir {
            return Err(FsError::Invalid("directories are renamed by the coordinator".into()));
        }
        if spid == dpid && sname == dname {
            return Ok(());
        }
        if let Some(d) = self.access(dpid, dname)? {
            if d.kind == Kind::Dir {
                return Err(FsError::IsDir);
            }
        }
        let now = now_ns();
        let mut b = WriteBatch::new();
        b.delete(key::access(spid, sname)).put(key::access(dpid, dname), enc(&rec)?);
        if spid == dpid {
            sc.mtime_ns = now;
            b.put(key::content(spid), enc(&sc)?);
        } else {
            sc.mtime_ns = now;
            dc.mtime_ns = now;
            b.put(key::content(spid), enc(&sc)?).put(key::content(dpid), enc(&dc)?);
        }
        Ok(self.db.write_opt(&b, &self.wo)?)
    }

    /// Raw records starting with `prefix` after `after` (checker, admin).
    pub fn scan(&self, prefix: &[u8], after: &[u8], limit: u32) -> FsResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut start = after.to_vec();
        if start.as_slice() < prefix {
            start = prefix.to_vec();
        } else {
            start.push(0);
        }
        let mut out = Vec::new();
        let mut it = self.db.iter(start..key::prefix_end(prefix))?;
        while let Some(kv) = it.try_next()? {
            out.push(kv);
            if out.len() >= limit.max(1) as usize {
                break;
            }
        }
        Ok(out)
    }
}

/// Applies chmod/chown rules: chmod by the owner or root; a new owner by
/// root only; a new group by root or by the owner to one of its groups.
pub fn apply_setattr(mut p: Perm, a: &SetAttr, cred: &Cred) -> FsResult<Perm> {
    let root = cred.uid == 0;
    if let Some(mode) = a.mode {
        if !root && cred.uid != p.uid {
            return Err(FsError::Perm);
        }
        p.mode = mode & 0o7777;
    }
    if let Some(uid) = a.uid {
        if !root && uid != p.uid {
            return Err(FsError::Perm);
        }
        p.uid = uid;
    }
    if let Some(gid) = a.gid {
        if !root && (cred.uid != p.uid || !(cred.gid == gid || cred.groups.contains(&gid))) {
            return Err(FsError::Perm);
        }
        p.gid = gid;
    }
    Ok(p)
}
