//! The client library: connections to every server, the access cache, and
//! speculative parallel path resolution. Operations are in [`crate::ops`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use crate::cache::AccessCache;
use crate::config::ClusterConfig;
use crate::error::{FsError, FsResult};
use crate::ids::{dir_id, server_of, ROOT_ID};
use crate::proto::{PathIds, Request, Response};
use crate::rpc::Peers;
use crate::types::{AccessRec, Cred, Kind};

/// How a client behaves.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Who the client acts as.
    pub cred: Cred,
    /// Access-cache capacity in directories (0: no cache).
    pub cache_capacity: usize,
    /// Resolve every path component in one parallel round (predicted ids);
    /// off: one lookup round per component.
    pub speculate: bool,
    /// Reply timeout.
    pub timeout: Duration,
    /// How long a cached directory is trusted; must be shorter than the
    /// servers' `inval_keep_secs` (they forget invalidations after it).
    pub cache_ttl: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            cred: Cred::root(),
            cache_capacity: 100_000,
            speculate: true,
            timeout: Duration::from_secs(10),
            cache_ttl: Duration::from_secs(60),
        }
    }
}

/// A client of the namespace service (cheap to share between threads, but
/// a thread that wants its own connections should open its own).
#[derive(Debug)]
pub struct Client {
    pub(crate) peers: Peers,
    pub(crate) n: usize,
    pub(crate) opts: ClientOptions,
    pub(crate) cache: Mutex<AccessCache>,
    stale_retries: AtomicU64,
}

/// A path resolved to its directories: for each component its access
/// record, and the (id, seq) list that server-side validation checks.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// Access record of each component, in order.
    pub recs: Vec<AccessRec>,
    /// (dir id, seq) of every directory component (for lazy invalidation).
    pub path: PathIds,
}

impl Resolved {
    /// Id of the directory the last component names (the root for none).
    pub fn last_id(&self) -> u64 {
        self.recs.last().map_or(ROOT_ID, |r| r.id)
    }
}

/// Splits "/a/b/c" into components; "." is skipped, ".." is refused.
pub fn components(path: &str) -> FsResult<Vec<String>> {
    let mut out = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => return Err(FsError::Invalid("'..' is not supported".into())),
            c => out.push(c.to_string()),
        }
    }
    Ok(out)
}

impl Client {
    /// A client of the servers at `addrs` (index = server id).
    pub fn new(addrs: Vec<String>, opts: ClientOptions) -> Client {
        let n = addrs.len();
        Client {
            peers: Peers::new(addrs, opts.timeout),
            n,
            cache: Mutex::new(AccessCache::new(opts.cache_capacity, opts.cache_ttl)),
            opts,
            stale_retries: AtomicU64::new(0),
        }
    }

    /// A client of the cluster in a config file.
    pub fn from_config(cfg: &ClusterConfig, opts: ClientOptions) -> Client {
        Client::new(cfg.addrs(), opts)
    }

    /// Parallel rounds (round trips) this client has made.
    pub fn rounds(&self) -> u64 {
        self.peers.rounds()
    }

    /// Requests refused as stale and retried.
    pub fn stale_retries(&self) -> u64 {
        self.stale_retries.load(Ordering::Relaxed)
    }

    /// Number of directories in the access cache.
    pub fn cached(&self) -> usize {
        self.cache.lock().len()
    }

    /// Acts as `cred` from now on (the FUSE front end sets each request's caller).
    pub fn set_cred(&mut self, cred: Cred) {
        self.opts.cred = cred;
    }

    /// Empties the access cache.
    pub fn clear_cache(&self) {
        *self.cache.lock() = AccessCache::new(self.opts.cache_capacity, self.opts.cache_ttl);
    }

    pub(crate) fn server(&self, dir: u64) -> usize {
        server_of(dir, self.n)
    }

    pub(crate) fn call(&self, server: usize, req: Request) -> FsResult<Response> {
        self.peers.call(server, &req)?.into_result()
    }

    /// Runs `f`, dropping stale cache entries and retrying when a server
    /// refuses the request as resolved through them.
    pub(crate) fn retry<T>(&self, mut f: impl FnMut() -> FsResult<T>) -> FsResult<T> {
        let mut tries = 0;
        loop {
            match f() {
                Err(FsError::Stale(ids)) if tries < 16 => {
                    tries += 1;
                    self.stale_retries.fetch_add(1, Ordering::Relaxed);
                    self.cache.lock().remove_ids(&ids);
                }
                r => return r,
            }
        }
    }

    /// Resolves every component of `comps` (all but the last must be
    /// directories): cached prefix first, then the rest in parallel rounds
    /// of predicted lookups (or one lookup per round without speculation).
    pub fn resolve(&self, comps: &[String]) -> FsResult<Resolved> {
        let cred = &self.opts.cred;
        let mut recs: Vec<AccessRec> = Vec::with_capacity(comps.len());
        let mut path: PathIds = Vec::with_capacity(comps.len());
        let mut pid = ROOT_ID;
        {
            let mut cache = self.cache.lock();
            for c in comps {
                let Some((rec, seq)) = cache.get(pid, c) else { break };
                if rec.kind != Kind::Dir {
                    break;
                }
                pid = rec.id;
                path.push((rec.id, seq));
                recs.push(rec);
            }
        }
        // Search permission on every cached directory resolved through.
        for r in recs.iter().take(comps.len().saturating_sub(1)) {
            r.perm.check(cred, crate::types::want::X)?;
        }
        let validated = path.clone();
        while recs.len() < comps.len() {
            let k = recs.len();
            let end = if self.opts.speculate { comps.len() } else { k + 1 };
            let mut preds = Vec::with_capacity(end - k);
            let mut p = pid;
            for c in &comps[k..end] {
                preds.push(p);
                p = dir_id(p, c, 0);
            }
            let reqs: Vec<(usize, Request)> = preds
                .iter()
                .zip(&comps[k..end])
                .map(|(&p, c)| {
                    let req = Request::Lookup { pid: p, name: c.clone(), cred: cred.clone(), path: validated.clone() };
                    (self.server(p), req)
                })
                .collect();
            let answers = self.peers.round(reqs);
            for (j, ans) in answers.into_iter().enumerate() {
                let level = k + j;
                if preds[j] != pid {
                    break; // mispredicted from here on: speculate again
                }
                let (rec, seq) = match ans?.into_result()? {
                    Response::Entry { rec, seq } => (rec, seq),
                    other => return Err(FsError::Transport(format!("unexpected reply {other:?}"))),
                };
                if level + 1 < comps.len() {
                    if rec.kind != Kind::Dir {
                        return Err(FsError::NotDir);
                    }
                    rec.perm.check(cred, crate::types::want::X)?;
                }
                if rec.kind == Kind::Dir {
                    self.cache.lock().insert(pid, &comps[level], rec.clone(), seq);
                    path.push((rec.id, seq));
                }
                pid = rec.id;
                recs.push(rec);
            }
        }
        Ok(Resolved { recs, path })
    }

    /// Resolves a path that must name a directory (the root for none).
    pub fn resolve_dir(&self, comps: &[String]) -> FsResult<Resolved> {
        let r = self.resolve(comps)?;
        match r.recs.last() {
            Some(rec) if rec.kind != Kind::Dir => Err(FsError::NotDir),
            _ => Ok(r),
        }
    }
}
