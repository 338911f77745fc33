//! The namespace operations of the client library (paths in, POSIX errors
//! out). Each retries when a server names stale cache entries.

use crate::client::{components, Client};
use crate::error::{FsError, FsResult};
use crate::ids::ROOT_ID;
use crate::proto::{Request, Response, SetAttr};
use crate::types::{AccessRec, Attr, DirEntry, Kind, Perm};

fn split_last(path: &str) -> FsResult<(Vec<String>, String)> {
    let mut comps = components(path)?;
    let last = comps.pop().ok_or_else(|| FsError::Invalid("the root has no parent".into()))?;
    Ok((comps, last))
}

fn entry(r: Response) -> FsResult<(AccessRec, u64)> {
    match r {
        Response::Entry { rec, seq } => Ok((rec, seq)),
        other => Err(FsError::Transport(format!("unexpected reply {other:?}"))),
    }
}

impl Client {
    fn root_attr(&self) -> FsResult<Attr> {
        match self.call(self.server(ROOT_ID), Request::GetContent { id: ROOT_ID })? {
            Response::Content(c) => Ok(Attr {
                kind: Kind::Dir,
                id: ROOT_ID,
                perm: c.perm,
                size: 0,
                mtime_ns: c.mtime_ns,
                ctime_ns: c.mtime_ns,
            }),
            other => Err(FsError::Transport(format!("unexpected reply {other:?}"))),
        }
    }

    /// Attributes of the entry at `path` (one round with a warm cache or
    /// with every predicted id right).
    pub fn stat(&self, path: &str) -> FsResult<Attr> {
        let comps = components(path)?;
        if comps.is_empty() {
            return self.root_attr();
        }
        self.retry(|| {
            let r = self.resolve(&comps)?;
            r.recs.last().map(Attr::from).ok_or(FsError::NotFound)
        })
    }

    /// Resolves `path` to its access record (id, kind, permissions), as path
    /// resolution sees it; the root has none (`Invalid`).
    pub fn lookup(&self, path: &str) -> FsResult<AccessRec> {
        let comps = components(path)?;
        if comps.is_empty() {
            return Err(FsError::Invalid("the root has no access record".into()));
        }
        self.retry(|| self.resolve(&comps)?.recs.last().cloned().ok_or(FsError::NotFound))
    }

    /// Creates a regular file (one server: the parent's).
    pub fn create(&self, path: &str, mode: u32) -> FsResult<Attr> {
        let (dir, name) = split_last(path)?;
        self.retry(|| {
            let p = self.resolve_dir(&dir)?;
            let pid = p.last_id();
            let req = Request::Create { pid, name: name.clone(), mode, cred: self.opts.cred.clone(), path: p.path };
            entry(self.call(self.server(pid), req)?).map(|(rec, _)| Attr::from(&rec))
        })
    }

    /// Removes a regular file (one server: the parent's).
    pub fn unlink(&self, path: &str) -> FsResult<()> {
        let (dir, name) = split_last(path)?;
        self.retry(|| {
            let p = self.resolve_dir(&dir)?;
            let pid = p.last_id();
            let req = Request::Unlink { pid, name: name.clone(), cred: self.opts.cred.clone(), path: p.path };
            self.call(self.server(pid), req).map(|_| ())
        })
    }

    /// Makes a directory (through the coordinator).
    pub fn mkdir(&self, path: &str, mode: u32) -> FsResult<Attr> {
        let (dir, name) = split_last(path)?;
        self.retry(|| {
            let p = self.resolve_dir(&dir)?;
            let pid = p.last_id();
            let req = Request::Mkdir { pid, name: name.clone(), mode, cred: self.opts.cred.clone(), path: p.path };
            let (rec, seq) = entry(self.call(0, req)?)?;
            self.cache.lock().insert(pid, &name, rec.clone(), seq);
            Ok(Attr::from(&rec))
        })
    }

    /// `mkdir -p`: makes every missing directory of `path`.
    pub fn mkdir_p(&self, path: &str, mode: u32) -> FsResult<()> {
        let comps = components(path)?;
        for i in 1..=comps.len() {
            let p = format!("/{}", comps[..i].join("/"));
            match self.mkdir(&p, mode) {
                Ok(_) => {}
                Err(FsError::Exists) => {
                    if self.stat(&p)?.kind != Kind::Dir {
                        return Err(FsError::NotDir);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Removes an empty directory (through the coordinator).
    pub fn rmdir(&self, path: &str) -> FsResult<()> {
        let (dir, name) = split_last(path)?;
        self.retry(|| {
            let p = self.resolve_dir(&dir)?;
            let pid = p.last_id();
            let req = Request::Rmdir { pid, name: name.clone(), cred: self.opts.cred.clone(), path: p.path };
            self.call(0, req)?;
            self.cache.lock().remove(pid, &name);
            Ok(())
        })
    }

    /// One page of a directory listing after `after` (a cursor: the last
    /// name of the previous page), and the cursor of the next page.
    pub fn readdir_page(
        &self,
        path: &str,
        after: Option<&str>,
        limit: u32,
    ) -> FsResult<(Vec<DirEntry>, Option<String>)> {
        let comps = components(path)?;
        self.retry(|| {
            let p = self.resolve_dir(&comps)?;
            let id = p.last_id();
            let req = Request::Readdir {
                id,
                after: after.map(str::to_string),
                limit,
                cred: self.opts.cred.clone(),
                path: p.path,
            };
            match self.call(self.server(id), req)? {
                Response::Dir { entries, next } => Ok((entries, next)),
                other => Err(FsError::Transport(format!("unexpected reply {other:?}"))),
            }
        })
    }

    /// The whole listing of a directory, page by page.
    pub fn readdir(&self, path: &str) -> FsResult<Vec<DirEntry>> {
        let mut out = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let (page, next) = self.readdir_page(path, after.as_deref(), 1000)?;
            out.extend(page);
            match next {
                Some(n) => after = Some(n),
                None => return Ok(out),
            }
        }
    }

    /// Renames a file or directory. A file whose parents share a server is
    /// one atomic batch there; anything else goes through the coordinator.
    pub fn rename(&self, src: &str, dst: &str) -> FsResult<()> {
        let (sdir, sname) = split_last(src)?;
        let (ddir, dname) = split_last(dst)?;
        self.retry(|| {
            let mut scomps = sdir.clone();
            scomps.push(sname.clone());
            let s = self.resolve(&scomps)?;
            let d = self.resolve_dir(&ddir)?;
            let rec = s.recs.last().cloned().ok_or(FsError::NotFound)?;
            let spid = s.recs.len().checked_sub(2).map_or(ROOT_ID, |i| s.recs[i].id);
            let dpid = d.last_id();
            let mut path = s.path.clone();
            if rec.kind == Kind::Dir {
                path.pop(); // the moved directory itself is not resolved through
            }
            path.extend(d.path.iter().copied());
            let cred = self.opts.cred.clone();
            let (sn, dn) = (sname.clone(), dname.clone());
            if rec.kind == Kind::File && self.server(spid) == self.server(dpid) {
                let req = Request::RenameLocal { spid, sname: sn, dpid, dname: dn, cred, path };
                self.call(self.server(spid), req)?;
            } else {
                self.call(0, Request::Rename { spid, sname: sn, dpid, dname: dn, cred, path })?;
                if rec.kind == Kind::Dir {
                    let mut cache = self.cache.lock();
                    cache.remove_ids(&[rec.id]);
                    // An empty directory the rename replaced.
                    cache.remove(dpid, &dname);
                }
            }
            Ok(())
        })
    }

    /// chmod/chown: `None` fields stay. A directory's change goes through
    /// the coordinator (it invalidates cached copies on every server).
    pub fn setattr(&self, path: &str, mode: Option<u32>, uid: Option<u32>, gid: Option<u32>) -> FsResult<Attr> {
        let (dir, name) = split_last(path)?;
        let attr = SetAttr { mode, uid, gid };
        self.retry(|| {
            let mut comps = dir.clone();
            comps.push(name.clone());
            let r = self.resolve(&comps)?;
            let rec = r.recs.last().cloned().ok_or(FsError::NotFound)?;
            let pid = r.recs.len().checked_sub(2).map_or(ROOT_ID, |i| r.recs[i].id);
            let mut path = r.path.clone();
            let cred = self.opts.cred.clone();
            let n = name.clone();
            if rec.kind == Kind::Dir {
                path.pop();
                let (rec, _) = entry(self.call(0, Request::SetAttrDir { pid, name: n, attr, cred, path })?)?;
                self.cache.lock().remove_ids(&[rec.id]);
                Ok(Attr::from(&rec))
            } else {
                let req = Request::SetAttrFile { pid, name: n, attr, cred, path };
                entry(self.call(self.server(pid), req)?).map(|(rec, _)| Attr::from(&rec))
            }
        })
    }

    /// chmod.
    pub fn chmod(&self, path: &str, mode: u32) -> FsResult<Attr> {
        self.setattr(path, Some(mode), None, None)
    }

    /// chown (either part may be left as it is).
    pub fn chown(&self, path: &str, uid: Option<u32>, gid: Option<u32>) -> FsResult<Attr> {
        self.setattr(path, None, uid, gid)
    }

    /// `rm -r`: removes a file, or a directory and everything under it.
    pub fn remove_all(&self, path: &str) -> FsResult<()> {
        match self.stat(path)?.kind {
            Kind::File => self.unlink(path),
            Kind::Dir => {
                for e in self.readdir(path)? {
                    let child = format!("{}/{}", path.trim_end_matches('/'), e.name);
                    self.remove_all(&child)?;
                }
                self.rmdir(path)
            }
        }
    }

    /// Permissions of the entry at `path` (a shorthand of `stat`).
    pub fn perm(&self, path: &str) -> FsResult<Perm> {
        self.stat(path).map(|a| a.perm)
    }

    /// Number of coordinator intents not yet finished (0 once recovery is done).
    pub fn pending_intents(&self) -> FsResult<u64> {
        match self.call(0, Request::Pending)? {
            Response::Count(n) => Ok(n),
            other => Err(FsError::Transport(format!("unexpected reply {other:?}"))),
        }
    }

    /// Waits until every server answers (e.g. after starting them).
    pub fn wait_ready(&self, timeout: std::time::Duration) -> FsResult<()> {
        let t0 = std::time::Instant::now();
        for s in 0..self.n {
            loop {
                match self.call(s, Request::Ping) {
                    Ok(_) => break,
                    Err(e) if t0.elapsed() > timeout => return Err(e),
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
                }
            }
        }
        Ok(())
    }
}
