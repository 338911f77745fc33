//! FUSE front end (`strata-fs mount`): the kernel's VFS asks by (parent
//! inode, name); inode numbers are our directory and file ids (the root is
//! 1 in both). Metadata goes to the namespace service; file contents live
//! in a plain directory, one file per file id. Permission checks are the
//! kernel's (`default_permissions`) and the servers', as the caller's uid.
//!
//! The kernel resolves paths one component at a time and caches entries
//! for [`TTL`], so speculative resolution does not apply here.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    FileAttr, FileType, Filesystem, MountOption, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyWrite, Request, TimeOrNow,
};

use crate::client::Client;
use crate::error::FsError;
use crate::ids::ROOT_ID;
use crate::types::{Attr, Cred, Kind};

/// How long the kernel may cache entries and attributes.
pub const TTL: Duration = Duration::from_secs(1);

/// The mounted file system: a client, the content directory, and the path
/// of every inode the kernel knows.
#[derive(Debug)]
pub struct StrataFuse {
    client: Client,
    data: PathBuf,
    paths: HashMap<u64, String>,
}

fn join(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

fn under(p: &str, prefix: &str) -> bool {
    p == prefix || (p.starts_with(prefix) && p.as_bytes().get(prefix.len()) == Some(&b'/'))
}

fn time(ns: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(ns)
}

impl StrataFuse {
    /// A file system over `client`, keeping file contents in `data`.
    pub fn new(client: Client, data: &Path) -> std::io::Result<StrataFuse> {
        std::fs::create_dir_all(data)?;
        let mut paths = HashMap::new();
        paths.insert(ROOT_ID, "/".to_string());
        Ok(StrataFuse { client, data: data.to_path_buf(), paths })
    }

    fn content_path(&self, id: u64) -> PathBuf {
        self.data.join(format!("{id:016x}"))
    }

    fn as_caller(&mut self, req: &Request<'_>) {
        self.client.set_cred(Cred::user(req.uid(), req.gid()));
    }

    fn path(&self, ino: u64) -> Result<String, i32> {
        self.paths.get(&ino).cloned().ok_or(libc::ENOENT)
    }

    fn child(&self, parent: u64, name: &OsStr) -> Result<String, i32> {
        let name = name.to_str().ok_or(libc::EINVAL)?;
        Ok(join(&self.path(parent)?, name))
    }

    fn attr(&self, a: &Attr) -> FileAttr {
        let size = match a.kind {
            Kind::File => std::fs::metadata(self.content_path(a.id)).map(|m| m.len()).unwrap_or(a.size),
            Kind::Dir => 0,
        };
        FileAttr {
            ino: a.id,
            size,
            blocks: size.div_ceil(512),
            atime: time(a.mtime_ns),
            mtime: time(a.mtime_ns),
            ctime: time(a.ctime_ns),
            crtime: time(a.ctime_ns),
            kind: if a.kind == Kind::Dir { FileType::Directory } else { FileType::RegularFile },
            perm: (a.perm.mode & 0o7777) as u16,
            nlink: if a.kind == Kind::Dir { 2 } else { 1 },
            uid: a.perm.uid,
            gid: a.perm.gid,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    fn stat_path(&mut self, path: &str) -> Result<FileAttr, i32> {
        let a = self.client.stat(path).map_err(|e| e.errno())?;
        self.paths.insert(a.id, path.to_string());
        Ok(self.attr(&a))
    }

    /// Makes `name` under `parent` as the caller with `f` (mkdir, create)
    /// and returns its attributes.
    fn make<T>(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        f: impl FnOnce(&mut Client, &str) -> Result<T, FsError>,
    ) -> Result<FileAttr, i32> {
        self.as_caller(req);
        let p = self.child(parent, name)?;
        f(&mut self.client, &p).map_err(errno)?;
        self.stat_path(&p)
    }

    fn moved(&mut self, src: &str, dst: &str) {
        for p in self.paths.values_mut() {
            if under(p, src) {
                *p = format!("{dst}{}", &p[src.len()..]);
            }
        }
    }
}

fn errno(e: FsError) -> i32 {
    e.errno()
}

impl Filesystem for StrataFuse {
    fn lookup(&mut self, req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEntry) {
        self.as_caller(req);
        match self.child(parent, name).and_then(|p| self.stat_path(&p)) {
            Ok(a) => reply.entry(&TTL, &a, 0),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&mut self, req: &Request<'_>, ino: u64, _fh: Option<u64>, reply: ReplyAttr) {
        self.as_caller(req);
        match self.path(ino).and_then(|p| self.stat_path(&p)) {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &mut self,
        req: &Request<'_>,
        ino: u64,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<u64>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<u32>,
        reply: ReplyAttr,
    ) {
        self.as_caller(req);
        let r = (|| {
            let path = self.path(ino)?;
            if mode.is_some() || uid.is_some() || gid.is_some() {
                self.client.setattr(&path, mode.map(|m| m & 0o7777), uid, gid).map_err(errno)?;
            }
            if let Some(len) = size {
                let f = OpenOptions::new().create(true).truncate(false).write(true).open(self.content_path(ino));
                f.and_then(|f| f.set_len(len)).map_err(|_| libc::EIO)?;
            }
            self.stat_path(&path)
        })();
        match r {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(&mut self, req: &Request<'_>, parent: u64, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        match self.make(req, parent, name, |c, p| c.mkdir(p, mode & !umask & 0o7777)) {
            Ok(a) => reply.entry(&TTL, &a, 0),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        match self.make(req, parent, name, |c, p| c.create(p, mode & !umask & 0o7777)) {
            Ok(a) => reply.entry(&TTL, &a, 0),
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        match self.make(req, parent, name, |c, p| c.create(p, mode & !umask & 0o7777)) {
            Ok(a) => reply.created(&TTL, &a, 0, 0, 0),
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&mut self, req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        self.as_caller(req);
        let r = self.child(parent, name).and_then(|p| {
            let a = self.client.stat(&p).map_err(errno)?;
            self.client.unlink(&p).map_err(errno)?;
            let _ = std::fs::remove_file(self.content_path(a.id));
            self.paths.remove(&a.id);
            Ok(())
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&mut self, req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        self.as_caller(req);
        let r = self.child(parent, name).and_then(|p| {
            let a = self.client.stat(&p).map_err(errno)?;
            self.client.rmdir(&p).map_err(errno)?;
            self.paths.remove(&a.id);
            Ok(())
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rename(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        _flags: u32,
        reply: ReplyEmpty,
    ) {
        self.as_caller(req);
        let r = (|| {
            let src = self.child(parent, name)?;
            let dst = self.child(newparent, newname)?;
            let replaced = self.client.stat(&dst).ok().filter(|a| a.kind == Kind::File);
            self.client.rename(&src, &dst).map_err(errno)?;
            if let Some(old) = replaced {
                let _ = std::fs::remove_file(self.content_path(old.id));
                self.paths.remove(&old.id);
            }
            self.moved(&src, &dst);
            Ok(())
        })();
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        size: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyData,
    ) {
        let r = (|| -> std::io::Result<Vec<u8>> {
            let mut f = match std::fs::File::open(self.content_path(ino)) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
                Err(e) => return Err(e),
            };
            f.seek(SeekFrom::Start(offset.max(0) as u64))?;
            let mut buf = Vec::with_capacity(size as usize);
            f.take(size as u64).read_to_end(&mut buf)?;
            Ok(buf)
        })();
        match r {
            Ok(b) => reply.data(&b),
            Err(_) => reply.error(libc::EIO),
        }
    }

    fn write(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        data: &[u8],
        _write_flags: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyWrite,
    ) {
        let r = (|| -> std::io::Result<()> {
            let mut f = OpenOptions::new().create(true).truncate(false).write(true).open(self.content_path(ino))?;
            f.seek(SeekFrom::Start(offset.max(0) as u64))?;
            f.write_all(data)
        })();
        match r {
            Ok(()) => reply.written(data.len() as u32),
            Err(_) => reply.error(libc::EIO),
        }
    }

    fn flush(&mut self, _req: &Request<'_>, _ino: u64, _fh: u64, _lock_owner: u64, reply: ReplyEmpty) {
        reply.ok();
    }

    fn fsync(&mut self, _req: &Request<'_>, _ino: u64, _fh: u64, _datasync: bool, reply: ReplyEmpty) {
        reply.ok();
    }

    fn readdir(&mut self, req: &Request<'_>, ino: u64, _fh: u64, offset: i64, mut reply: ReplyDirectory) {
        self.as_caller(req);
        let r = self.path(ino).and_then(|p| self.client.readdir(&p).map(|es| (p, es)).map_err(errno));
        let (dir, entries) = match r {
            Ok(x) => x,
            Err(e) => return reply.error(e),
        };
        let mut all = vec![(ino, FileType::Directory, ".".to_string()), (ino, FileType::Directory, "..".to_string())];
        for e in entries {
            let kind = if e.rec.kind == Kind::Dir { FileType::Directory } else { FileType::RegularFile };
            self.paths.insert(e.rec.id, join(&dir, &e.name));
            all.push((e.rec.id, kind, e.name));
        }
        for (i, (id, kind, name)) in all.into_iter().enumerate().skip(offset.max(0) as usize) {
            if reply.add(id, (i + 1) as i64, kind, name) {
                break;
            }
        }
        reply.ok();
    }
}

fn options() -> Vec<MountOption> {
    vec![MountOption::FSName("strata-fs".into()), MountOption::DefaultPermissions, MountOption::RW]
}

/// Mounts at `mountpoint` and serves until it is unmounted.
pub fn mount(client: Client, mountpoint: &Path, data: &Path) -> std::io::Result<()> {
    fuser::mount2(StrataFuse::new(client, data)?, mountpoint, &options())
}

/// Mounts at `mountpoint`, serving from a background thread until the
/// returned session is dropped (which unmounts).
pub fn spawn(client: Client, mountpoint: &Path, data: &Path) -> std::io::Result<fuser::BackgroundSession> {
    fuser::spawn_mount2(StrataFuse::new(client, data)?, mountpoint, &options())
}
