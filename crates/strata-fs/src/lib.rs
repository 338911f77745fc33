//! strata-fs: an InfiniFS-style file-system namespace service on StrataKV.
//!
//! Directory *access* metadata (name → id, permissions) lives with the
//! parent (`A|pid|name` on the server of `pid`), *content* metadata with the
//! directory itself (`C|id` on the server of `id`), so a directory's
//! children and its content record share one server: readdir is one prefix
//! scan and file create/unlink one atomic batch. Directory ids are
//! predictable (`xxh3(pid ‖ name ‖ version)`), so the client resolves every
//! component of a path in one parallel round; it caches access metadata and
//! servers refuse requests resolved through stale entries (lazy
//! invalidation). mkdir, rmdir, directory renames and cross-server renames
//! go through the coordinator on server 0 (see [`coord`]).

pub mod bench;
pub mod bench_posix;
pub mod cache;
pub mod check;
pub mod client;
pub mod cluster;
pub mod config;
pub mod coord;
pub mod cpu;
pub mod error;
pub mod fuse;
pub mod ids;
pub mod ops;
pub mod proto;
pub mod rpc;
pub mod server;
pub mod steps;
pub mod store;
pub mod types;

pub use client::{Client, ClientOptions};
pub use error::{FsError, FsResult};
