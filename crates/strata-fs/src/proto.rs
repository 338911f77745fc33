//! Wire protocol: length-prefixed bincode frames over TCP.
//!
//! A frame is a 4-byte little-endian length followed by a bincode-encoded
//! [`Frame`] (client to server) or [`Response`]. A connection carries one
//! frame at a time; [`Frame::Batch`] packs several requests (e.g. every
//! speculative lookup bound for one server) into one frame and one reply,
//! so a client sends one frame to each server it needs and waits for all:
//! one parallel round trip. A batch cannot nest, so no input can make
//! decoding recurse deeply.

use std::io::{Read, Write};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::{FsError, FsResult};
use crate::types::{AccessRec, ContentRec, Cred, DirEntry, Perm};

/// Largest frame accepted (guards against a corrupt length).
pub const MAX_FRAME: usize = 64 << 20;

/// The directories a request was resolved through: (dir id, invalidation
/// seq the client's knowledge of it was validated at).
pub type PathIds = Vec<(u64, u64)>;

/// A request to one metadata server.
#[derive(Debug, Clone, Serialize, Deserialize)]
// Variant fields are named for what the variant's doc says.
#[allow(missing_docs)]
pub enum Request {
    /// Liveness check.
    Ping,
    /// Access record of `name` in directory `pid` (search permission on `pid`).
    Lookup { pid: u64, name: String, cred: Cred, path: PathIds },
    /// Content record of directory `id` (raw, no permission check).
    GetContent { id: u64 },
    /// Create a regular file (single server: the parent's).
    Create { pid: u64, name: String, mode: u32, cred: Cred, path: PathIds },
    /// Remove a regular file (single server: the parent's).
    Unlink { pid: u64, name: String, cred: Cred, path: PathIds },
    /// A page of directory `id`'s entries after `after`, at most `limit`.
    Readdir { id: u64, after: Option<String>, limit: u32, cred: Cred, path: PathIds },
    /// chmod/chown of a file (single server).
    SetAttrFile { pid: u64, name: String, attr: SetAttr, cred: Cred, path: PathIds },
    /// Rename of a file when both parents live on this server.
    RenameLocal { spid: u64, sname: String, dpid: u64, dname: String, cred: Cred, path: PathIds },
    /// Coordinator: make a directory.
    Mkdir { pid: u64, name: String, mode: u32, cred: Cred, path: PathIds },
    /// Coordinator: remove an empty directory.
    Rmdir { pid: u64, name: String, cred: Cred, path: PathIds },
    /// Coordinator: rename a directory, or a file across servers.
    Rename { spid: u64, sname: String, dpid: u64, dname: String, cred: Cred, path: PathIds },
    /// Coordinator: chmod/chown of a directory.
    SetAttrDir { pid: u64, name: String, attr: SetAttr, cred: Cred, path: PathIds },
    /// Participant: one idempotent step of a coordinator transaction.
    Step(Step),
    /// Admin: raw records starting with `prefix`, after key `after`.
    Scan { prefix: Vec<u8>, after: Vec<u8>, limit: u32 },
    /// Admin: number of coordinator intents not yet finished.
    Pending,
}

/// What a client sends in one frame.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Frame {
    /// One request, answered by one response.
    One(Request),
    /// Several requests, answered by one [`Response::Batch`] in order.
    Batch(Vec<Request>),
}

/// Attribute changes of chmod/chown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetAttr {
    /// New permission bits.
    pub mode: Option<u32>,
    /// New owner (root only).
    pub uid: Option<u32>,
    /// New group (root, or the owner to one of its groups).
    pub gid: Option<u32>,
}

/// An idempotent participant step; replaying one that was applied changes nothing.
#[derive(Debug, Clone, Serialize, Deserialize)]
// Variant fields are named for what the variant's doc says.
#[allow(missing_docs)]
pub enum Step {
    /// Raw read of one key.
    Get { key: Vec<u8> },
    /// Put a content record unless one with another birth is there.
    PutContent { id: u64, rec: ContentRec },
    /// Delete a content record and the rename list under it.
    DelContent { id: u64 },
    /// Fence a directory (refuse creates) and report whether it is empty.
    Fence { id: u64 },
    /// Lift a fence.
    Unfence { id: u64 },
    /// Move a content record's back-pointer.
    SetContentLoc { id: u64, parent: u64, name: String },
    /// Update a content record's copy of the permissions.
    SetContentPerm { id: u64, perm: Perm },
    /// Put an access record unless a different directory holds the name
    /// (or a file does and `replace_file` is false) or the parent is gone
    /// or fenced.
    /// With `tx`, the step is applied at most once: a marker `X|tx|1` is
    /// written in the same batch and a replay that finds it does nothing.
    /// `replace_dir`: the directory of this id may hold the name (an empty,
    /// fenced directory a rename replaces); it is overwritten.
    PutAccess { pid: u64, name: String, rec: AccessRec, replace_file: bool, replace_dir: Option<u64>, tx: Option<u64> },
    /// Drop the at-most-once markers of transaction `tx` (after its intent is gone).
    ForgetTx { tx: u64 },
    /// Delete an access record if it still names entry `id`. With `tx`,
    /// exactly once with an outcome: a marker `X|tx|0` is written with the
    /// delete, a replay that finds it reports `Done`, and finding neither
    /// marker nor record reports `Conflict` (someone else removed it).
    DelAccessIf { pid: u64, name: String, id: u64, tx: Option<u64> },
    /// Update an access record's permissions if it still names entry `id`.
    SetAccessPerm { pid: u64, name: String, id: u64, perm: Perm },
    /// Record that the version-`version` child `name` born in `pid` moved away.
    PutRenameList { pid: u64, name: String, version: u32 },
    /// Forget a rename-list entry (its directory is gone).
    DelRenameList { pid: u64, name: String, version: u32 },
    /// Add directory `id` to the invalidation list at `seq`.
    Inval { id: u64, seq: u64 },
}

/// What a step reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StepOut {
    /// Applied (or already applied).
    Done,
    /// The value read by `Get`.
    Value(Option<Vec<u8>>),
    /// `Fence`: whether the directory has no entries; `None` if it is gone.
    Empty(Option<bool>),
    /// A precondition failed; the transaction must not go on.
    Conflict(String),
}

/// A server's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
// Variant fields are named for what the variant's doc says.
#[allow(missing_docs)]
pub enum Response {
    /// Success without data.
    Ok,
    /// An access record and the server's invalidation seq when it was read.
    Entry { rec: AccessRec, seq: u64 },
    /// A content record.
    Content(ContentRec),
    /// A page of entries and the cursor of the next page.
    Dir { entries: Vec<DirEntry>, next: Option<String> },
    /// A step's outcome.
    Step(StepOut),
    /// Raw records.
    Kvs(Vec<(Vec<u8>, Vec<u8>)>),
    /// A count.
    Count(u64),
    /// Answers of a batch, in order.
    Batch(Vec<Response>),
    /// The operation failed.
    Err(FsError),
}

impl Response {
    /// Turns an `Err` answer into a Rust error.
    pub fn into_result(self) -> FsResult<Response> {
        match self {
            Response::Err(e) => Err(e),
            r => Ok(r),
        }
    }
}

impl From<FsResult<Response>> for Response {
    fn from(r: FsResult<Response>) -> Response {
        r.unwrap_or_else(Response::Err)
    }
}

/// Writes one frame.
pub fn write_frame<T: Serialize>(w: &mut impl Write, msg: &T) -> FsResult<()> {
    let body = bincode::serialize(msg)?;
    let mut buf = Vec::with_capacity(4 + body.len());
    buf.extend_from_slice(&(body.len() as u32).to_le_bytes());
    buf.extend_from_slice(&body);
    w.write_all(&buf).map_err(|e| FsError::Transport(e.to_string()))?;
    w.flush().map_err(|e| FsError::Transport(e.to_string()))
}

/// Reads one frame; `Ok(None)` on a clean end of stream before it.
pub fn read_frame<T: DeserializeOwned>(r: &mut impl Read) -> FsResult<Option<T>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(FsError::Transport(e.to_string())),
    }
    let n = u32::from_le_bytes(len) as usize;
    if n > MAX_FRAME {
        return Err(FsError::Transport(format!("frame of {n} bytes exceeds the limit")));
    }
    let mut body = vec![0u8; n];
    r.read_exact(&mut body).map_err(|e| FsError::Transport(e.to_string()))?;
    bincode::deserialize(&body).map(Some).map_err(|e| FsError::Transport(format!("bad frame: {e}")))
}
