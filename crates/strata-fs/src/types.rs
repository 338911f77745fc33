//! Records stored by the namespace service and the caller's credentials.

use serde::{Deserialize, Serialize};

use crate::error::{FsError, FsResult};

/// Whether an entry is a directory or a regular file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    /// A directory: has a content record `C|id` on the server of its id.
    Dir,
    /// A regular file: its whole inode is its access record.
    File,
}

/// Who is asking: uid, primary gid and supplementary groups.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cred {
    /// User id; 0 bypasses every permission check.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
    /// Supplementary group ids.
    pub groups: Vec<u32>,
}

impl Cred {
    /// The superuser.
    pub fn root() -> Cred {
        Cred { uid: 0, gid: 0, groups: Vec::new() }
    }

    /// A plain user with one group.
    pub fn user(uid: u32, gid: u32) -> Cred {
        Cred { uid, gid, groups: Vec::new() }
    }

    fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.contains(&gid)
    }
}

/// Permission bits asked for (POSIX r, w, x as 4, 2, 1).
pub mod want {
    /// Read (list a directory).
    pub const R: u32 = 4;
    /// Write (add or remove names in a directory).
    pub const W: u32 = 2;
    /// Search (resolve names in a directory).
    pub const X: u32 = 1;
}

/// Owner, group and mode of an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Perm {
    /// Permission bits (the low 12 bits of st_mode).
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
}

impl Perm {
    /// Fails with `Access` unless `cred` has all `bits` (see [`want`]).
    pub fn check(&self, cred: &Cred, bits: u32) -> FsResult<()> {
        if cred.uid == 0 {
            return Ok(());
        }
        let shift = if cred.uid == self.uid {
            6
        } else if cred.in_group(self.gid) {
            3
        } else {
            0
        };
        if (self.mode >> shift) & bits == bits {
            Ok(())
        } else {
            Err(FsError::Access)
        }
    }
}

/// The access record `A|pid|name`: what path resolution needs (a
/// directory's id and permissions) and, for a file, its whole inode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessRec {
    /// Directory or file.
    pub kind: Kind,
    /// Directory id (predictable) or file id (per-server counter).
    pub id: u64,
    /// Owner, group and mode.
    pub perm: Perm,
    /// Birth version of a directory (the `v` of its id's hash); 0 for files.
    pub version: u32,
    /// File size in bytes (metadata only); 0 for directories.
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: u64,
    /// Status-change time, nanoseconds since the epoch.
    pub ctime_ns: u64,
}

/// The content record `C|id` of a directory, on the server of its id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContentRec {
    /// Current parent (back-pointer for loop checks and the checker).
    pub parent: u64,
    /// Current name under `parent`.
    pub name: String,
    /// Parent at creation time (birth parent).
    pub birth_parent: u64,
    /// Name at creation time.
    pub birth_name: String,
    /// Version at creation time: id = hash(birth_parent, birth_name, version).
    pub version: u32,
    /// A copy of the directory's permissions, so this server can check
    /// search/write permission on the directory without another hop.
    pub perm: Perm,
    /// Set by rmdir before it checks emptiness; creates are then refused.
    pub fenced: bool,
    /// Modification time of the entry list, nanoseconds since the epoch.
    pub mtime_ns: u64,
}

/// What `stat` returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attr {
    /// Directory or file.
    pub kind: Kind,
    /// Inode number (directory or file id).
    pub id: u64,
    /// Owner, group and mode.
    pub perm: Perm,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: u64,
    /// Status-change time, nanoseconds since the epoch.
    pub ctime_ns: u64,
}

impl From<&AccessRec> for Attr {
    fn from(a: &AccessRec) -> Attr {
        Attr { kind: a.kind, id: a.id, perm: a.perm, size: a.size, mtime_ns: a.mtime_ns, ctime_ns: a.ctime_ns }
    }
}

/// One name in a directory listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirEntry {
    /// The name.
    pub name: String,
    /// Its access record.
    pub rec: AccessRec,
}

/// Nanoseconds since the epoch now (0 if the clock is before 1970).
pub fn now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

/// Checks a single path component: non-empty, no '/', no NUL, not "." or "..".
pub fn check_name(name: &str) -> FsResult<()> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') || name.len() > 255 {
        return Err(FsError::Invalid(format!("bad name {name:?}")));
    }
    Ok(())
}
