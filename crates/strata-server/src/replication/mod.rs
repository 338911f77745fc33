//! Replication: following a Redis primary (`REPLICAOF host port`), and
//! serving replicas. [`State`] is the server's role, link and attached
//! replicas as ROLE and INFO show them; [`replica`] is the thread that
//! syncs from the primary and applies its command stream; [`primary`]
//! serves one replica (image, then stream); [`feed`] is a replica's spool
//! of the stream; [`settings`] the settings CONFIG SET changes.
//!
//! PSYNC2, as Redis 4+: a replica's stream is its primary's, proxied byte
//! for byte at the same offsets, so its own replicas, and any replica
//! after a failover, continue from the backlog. The replication id is
//! ours as a primary and the primary's while following; on promotion
//! (REPLICAOF NO ONE) the old id becomes `replid2`, valid up to
//! `second_repl_offset` (our offset + 1, the first byte not in the old
//! history), and a PSYNC naming it is still served from the backlog. A
//! replica reconnects with `PSYNC <replid> <offset + 1>` whenever it keeps
//! a backlog (it synced once, or was a primary with replicas), else with
//! `PSYNC ? -1`.
//!
//! This module knows nothing of command dispatch: the server installs an
//! [`ApplierFactory`] at start (see `cmd::install_replication`), through
//! which the thread flushes, loads keys and runs the primary's commands as
//! its "master client".

mod cron;
mod end;
pub mod feed;
mod links;
mod load;
pub mod primary;
pub mod replica;
mod resp;
pub mod settings;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;

use bytes::Bytes;
use parking_lot::Mutex;

use crate::rdb::read::Entry;
pub use cron::spawn as spawn_cron;
pub use links::LinkKind;
pub use settings::Settings;

/// What the replication thread writes through: one per sync, so the
/// master client's session (SELECT, MULTI) starts afresh each time.
pub trait Applier: Send {
    /// Empties every database (a full sync starts from nothing).
    fn flush_all(&mut self) -> Result<(), String>;
    /// Writes one key of the primary's RDB image (not yet expired).
    fn load(&mut self, entry: Entry) -> Result<(), String>;
    /// Loads a function library of the image.
    fn load_function(&mut self, code: Vec<u8>) -> Result<(), String>;
    /// Runs one command of the primary's stream (its reply is dropped;
    /// an error is returned as text).
    fn apply(&mut self, args: &[Bytes]) -> Result<(), String>;
    /// Runs several commands of the stream in order, consecutive keyspace
    /// commands as one engine batch (as a client's pipeline runs); returns
    /// the errors, each with its command's name.
    fn apply_batch(&mut self, cmds: Vec<Vec<Bytes>>) -> Vec<(String, String)>;
    /// Whether the server is stopping.
    fn stopping(&self) -> bool;
    /// Whether every database is empty (`repl-diskless-load on-empty-db`).
    fn is_empty(&mut self) -> bool;
    /// Drops a transaction begun and not ended (the link was cut in it).
    fn discard(&mut self);
}

/// Makes an [`Applier`]; `None` once the server is gone.
pub type ApplierFactory = Arc<dyn Fn() -> Option<Box<dyn Applier>> + Send + Sync>;

/// The link to the primary, as ROLE names its states.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    /// Must connect (Redis's `connect`).
    Connect,
    /// Connecting.
    Connecting,
    /// Connected, before the primary's answer to PSYNC (Redis's
    /// `handshake`).
    Handshake,
    /// Receiving the RDB image.
    Sync,
    /// Applying the command stream.
    Connected,
}

impl Link {
    /// ROLE's word for it.
    pub fn name(self) -> &'static str {
        match self {
            Link::Connect => "connect",
            Link::Connecting => "connecting",
            Link::Handshake => "handshake",
            Link::Sync => "sync",
            Link::Connected => "connected",
        }
    }
}

/// What changes with REPLICAOF, under one lock.
struct Role {
    /// The primary followed, if a replica.
    master: Option<(String, u16)>,
    /// The link's state.
    link: Link,
    /// Bumped by each REPLICAOF: a thread of an older one stops.
    generation: u64,
    /// The running thread.
    thread: Option<JoinHandle<()>>,
    /// Replication ids: ours (or the primary's, while following), and
    /// the previous one.
    replid: String,
    /// See `replid`.
    replid2: String,
    /// The offset up to which `replid2` is valid (-1: none).
    second_offset: i64,
    /// Unix seconds the link went down (INFO), 0: never up.
    down_since: u64,
    /// Whether our data is the stream's up to our offset, so a PSYNC may
    /// continue from it: false from a full sync's `+FULLRESYNC` until its
    /// image is loaded whole (an image cut short leaves the databases
    /// emptied or half loaded under the new primary's id; continuing would
    /// leave them so for good: Redis too adopts the id only after loading).
    resumable: bool,
}

/// The server's replication role and link (shared by every connection).
pub struct State {
    role: Mutex<Role>,
    /// Bytes of the primary's stream applied (with the sync's start offset).
    offset: AtomicU64,
    /// Bytes of the stream read.
    read_offset: AtomicU64,
    /// Unix seconds of the last byte from the primary.
    last_io: AtomicU64,
    /// `replica-read-only`.
    read_only: AtomicBool,
    /// `masteruser` and `masterauth`.
    auth: Mutex<(Option<String>, Option<String>)>,
    /// Our listening port (REPLCONF listening-port).
    port: u16,
    /// What the thread writes through (installed at start).
    applier: OnceLock<ApplierFactory>,
    /// The replication stream replicas are fed from (installed at start).
    stream: OnceLock<Arc<dyn primary::Stream>>,
    /// Replicas attached to this server.
    replicas: Mutex<Vec<Arc<primary::Attached>>>,
    /// The server stops: replicas' threads end.
    stopping: AtomicBool,
    /// The replication settings (CONFIG SET).
    pub settings: Settings,
    /// Replicas waiting for a diskless sync's delay to end.
    diskless_waiting: AtomicU64,
    /// Bumped when a diskless delay ends: every wait begun before ends.
    diskless_round: AtomicU64,
    /// Full sync images being written (INFO's `rdb_bgsave_in_progress`,
    /// as Redis's RDB child for replicas counts there).
    images: AtomicU64,
    /// Takes a full sync's image (installed at start).
    snapshotter: OnceLock<primary::Snapshotter>,
    /// Held by the replication thread while it applies and proxies a
    /// batch of the primary's stream, and by an image being taken: a
    /// sub-replica's image then matches the offset it is taken at.
    pub apply_lock: Mutex<()>,
    /// The master client, kept between links and REPLICAOFs (Redis's
    /// cached master: its selected database carries over a PSYNC).
    master_client: Mutex<Option<Box<dyn Applier>>>,
    /// INFO stats: full syncs served, partial resyncs accepted, refused.
    sync_full: AtomicU64,
    sync_partial_ok: AtomicU64,
    sync_partial_err: AtomicU64,
    /// A full sync from the primary: the image's size (-1: diskless,
    /// unknown) and the bytes read so far.
    sync_total: std::sync::atomic::AtomicI64,
    sync_read: AtomicU64,
    /// Where a replica receives a full sync's image before loading it
    /// (the data directory; set at start).
    spool_dir: OnceLock<std::path::PathBuf>,
    /// The connection to the primary while one is up, with the primary's
    /// address (CLIENT KILL cuts it; see `links`).
    master_link: Mutex<Option<(String, std::net::TcpStream)>>,
    /// Unix seconds since when no replica is attached (`repl-backlog-ttl`).
    no_replicas_since: AtomicU64,
}

/// A fresh 40-hex-digit replication id.
fn new_replid() -> String {
    let bytes: [u8; 20] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

const NO_REPLID: &str = "0000000000000000000000000000000000000000";

/// Unix seconds now.
fn unix_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

impl State {
    /// Whether a full sync's image is being written to some replica.
    pub fn image_in_progress(&self) -> bool {
        self.images.load(Ordering::Acquire) > 0
    }

    /// A primary's state: `port` is ours, `auth` the `masteruser` and
    /// `masterauth` settings.
    pub fn new(port: u16, auth: (Option<String>, Option<String>)) -> State {
        State {
            role: Mutex::new(Role {
                master: None,
                link: Link::Connect,
                generation: 0,
                thread: None,
                replid: new_replid(),
                replid2: NO_REPLID.into(),
                second_offset: -1,
                down_since: 0,
                resumable: true,
            }),
            offset: AtomicU64::new(0),
            read_offset: AtomicU64::new(0),
            last_io: AtomicU64::new(0),
            read_only: AtomicBool::new(true),
            auth: Mutex::new(auth),
            port,
            applier: OnceLock::new(),
            stream: OnceLock::new(),
            replicas: Mutex::new(Vec::new()),
            stopping: AtomicBool::new(false),
            settings: Settings::default(),
            diskless_waiting: AtomicU64::new(0),
            diskless_round: AtomicU64::new(0),
            images: AtomicU64::new(0),
            snapshotter: OnceLock::new(),
            apply_lock: Mutex::new(()),
            master_client: Mutex::new(None),
            sync_full: AtomicU64::new(0),
            sync_partial_ok: AtomicU64::new(0),
            sync_partial_err: AtomicU64::new(0),
            sync_total: std::sync::atomic::AtomicI64::new(0),
            sync_read: AtomicU64::new(0),
            spool_dir: OnceLock::new(),
            master_link: Mutex::new(None),
            no_replicas_since: AtomicU64::new(unix_secs()),
        }
    }

    /// Sets where a full sync's image is received before it is loaded
    /// (once, at start: the data directory).
    pub fn set_spool_dir(&self, dir: std::path::PathBuf) {
        let _ = self.spool_dir.set(dir);
    }

    /// The file a full sync's image is received into (Redis's
    /// `temp-<time>.<pid>.rdb`).
    fn spool_path(&self) -> std::path::PathBuf {
        let dir = self.spool_dir.get().cloned().unwrap_or_else(std::env::temp_dir);
        dir.join(format!("temp-repl-{}.{}.rdb", unix_secs(), std::process::id()))
    }

    /// Installs what takes a full sync's image (once, at start).
    pub fn install_snapshotter(&self, f: primary::Snapshotter) {
        let _ = self.snapshotter.set(f);
    }

    /// Takes a full sync's image with a spool of the output buffer limits
    /// `limit`.
    fn snapshot(&self, limit: settings::BufferLimit) -> Result<primary::Image, String> {
        let f = self.snapshotter.get().ok_or("replication is not available")?;
        f(limit)
    }

    /// Counts a sync served: a full one, or a partial one accepted or
    /// refused (INFO stats).
    pub fn count_sync(&self, full: bool, partial_ok: bool, partial_err: bool) {
        for (on, n) in
            [(full, &self.sync_full), (partial_ok, &self.sync_partial_ok), (partial_err, &self.sync_partial_err)]
        {
            if on {
                n.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// INFO stats' replication fields.
    pub fn stats(&self) -> Vec<(String, String)> {
        [
            ("sync_full", &self.sync_full),
            ("sync_partial_ok", &self.sync_partial_ok),
            ("sync_partial_err", &self.sync_partial_err),
        ]
        .into_iter()
        .map(|(k, n)| (k.to_string(), n.load(Ordering::Relaxed).to_string()))
        .collect()
    }

    /// The ids a PSYNC may name: ours, the previous one and the offset up
    /// to which that one holds (Redis's `second_replid_offset`).
    pub fn ids(&self) -> (String, String, i64) {
        let r = self.role.lock();
        (r.replid.clone(), r.replid2.clone(), r.second_offset)
    }

    /// Whether a sub-replica may sync: we are a primary, or our link is up
    /// (Redis's `-NOMASTERLINK` otherwise).
    pub fn can_serve_sync(&self) -> bool {
        let r = self.role.lock();
        r.master.is_none() || r.link == Link::Connected
    }

    /// Disconnects every attached replica (our replication id changed, or
    /// our stream starts over): they reconnect and PSYNC again.
    fn disconnect_replicas(&self) {
        for r in self.replicas.lock().iter() {
            r.kicked.store(true, Ordering::Release);
        }
    }

    /// Replicas online whose last ack is at most `min-replicas-max-lag`
    /// seconds old (Redis's good replicas).
    pub fn good_replicas(&self) -> usize {
        let lag = self.settings.min_replicas_max_lag();
        self.replicas().iter().filter(|r| r.3 <= lag).count()
    }

    /// Whether writes are refused for `min-replicas-to-write` (a primary
    /// with fewer good replicas than that): `-NOREPLICAS`.
    pub fn too_few_replicas(&self) -> bool {
        let min = self.settings.min_replicas();
        // Redis checks only when both settings are non-zero.
        min > 0 && self.settings.min_replicas_max_lag() > 0 && !self.is_replica() && (self.good_replicas() as u64) < min
    }

    /// Whether commands without the `stale` flag are refused: a replica
    /// whose link is down with `replica-serve-stale-data no`.
    pub fn serves_stale(&self) -> bool {
        if self.settings.serve_stale() {
            return true;
        }
        let r = self.role.lock();
        r.master.is_none() || r.link == Link::Connected
    }

    /// The backlog's size changed (CONFIG SET repl-backlog-size).
    pub fn resize_backlog(&self) {
        if let Some(s) = self.stream.get() {
            s.resize(self.settings.backlog_size());
        }
    }

    /// The replicas' output buffer limits changed (CONFIG SET
    /// client-output-buffer-limit): attached replicas get them too.
    pub fn relimit_replicas(&self) {
        if let Some(s) = self.stream.get() {
            s.set_limit(self.settings.replica_limit());
        }
    }

    /// Installs the stream replicas are fed from (once, at start).
    pub fn install_stream(&self, s: Arc<dyn primary::Stream>) {
        let _ = self.stream.set(s);
    }

    /// The replication id (ours, or the primary's while following).
    pub fn replid(&self) -> String {
        self.role.lock().replid.clone()
    }

    /// Whether the server stops (replicas' threads end).
    pub fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// Counts a replica in (its thread started).
    fn attach(&self, r: Arc<primary::Attached>) {
        self.replicas.lock().push(r);
    }

    /// Counts a replica out (its thread ends).
    fn detach(&self, r: &Arc<primary::Attached>) {
        let mut replicas = self.replicas.lock();
        replicas.retain(|x| !Arc::ptr_eq(x, r));
        if replicas.is_empty() {
            self.no_replicas_since.store(unix_secs(), Ordering::Release);
        }
    }

    /// The attached replicas that follow the stream: ip, port, acked
    /// offset, seconds since their last ack.
    pub fn replicas(&self) -> Vec<(String, u16, u64, u64)> {
        let now = unix_secs();
        self.replicas
            .lock()
            .iter()
            .filter(|r| r.online.load(Ordering::Acquire))
            .map(|r| {
                let last = r.last_ack.load(Ordering::Acquire);
                (r.ip.clone(), r.port, r.ack.load(Ordering::Acquire), now.saturating_sub(last))
            })
            .collect()
    }

    /// Asks the attached replicas to acknowledge at once (WAIT).
    pub fn request_acks(&self) {
        if let Some(s) = self.stream.get().filter(|_| !self.replicas.lock().is_empty()) {
            s.getack();
        }
    }

    /// How many attached replicas acknowledged `offset` or more.
    pub fn acked(&self, offset: u64) -> usize {
        self.replicas.lock().iter().filter(|r| r.ack.load(Ordering::Acquire) >= offset).count()
    }

    /// The stream's offset (ours as a primary), if installed.
    fn stream_offset(&self) -> Option<u64> {
        self.stream.get().map(|s| s.offset())
    }

    /// What the replica's PSYNC names: our replication id and the next
    /// byte's offset if a backlog is kept, else `?` and -1.
    fn psync_args(&self) -> (String, i64) {
        match self.stream.get() {
            Some(s) if s.backlog().0 && self.role.lock().resumable => (self.replid(), s.offset() as i64 + 1),
            _ => ("?".into(), -1),
        }
    }

    /// Installs what the replication thread writes through (once, at start).
    pub fn install(&self, f: ApplierFactory) {
        let _ = self.applier.set(f);
    }

    /// Whether this server follows a primary.
    pub fn is_replica(&self) -> bool {
        self.role.lock().master.is_some()
    }

    /// Whether normal clients' writes are refused (a read-only replica).
    pub fn refuses_writes(&self) -> bool {
        self.read_only.load(Ordering::Relaxed) && self.is_replica()
    }

    /// `replica-read-only`.
    pub fn read_only(&self) -> bool {
        self.read_only.load(Ordering::Relaxed)
    }

    /// Sets `replica-read-only`.
    pub fn set_read_only(&self, on: bool) {
        self.read_only.store(on, Ordering::Relaxed);
    }

    /// `masteruser` and `masterauth`.
    pub fn auth(&self) -> (Option<String>, Option<String>) {
        self.auth.lock().clone()
    }

    /// Sets `masteruser` (`user`) or `masterauth`; empty: none.
    pub fn set_auth(&self, user: bool, value: &str) {
        let v = (!value.is_empty()).then(|| value.to_string());
        let mut a = self.auth.lock();
        if user {
            a.0 = v;
        } else {
            a.1 = v;
        }
    }

    /// Follows `host:port` (REPLICAOF host port): stops any sync running
    /// and starts the replication thread. Following the primary already
    /// followed changes nothing, as in Redis.
    pub fn follow(self: &Arc<Self>, host: String, port: u16) -> Result<(), String> {
        let Some(factory) = self.applier.get().cloned() else { return Err("replication is not available".into()) };
        let old = {
            let mut r = self.role.lock();
            if r.master.as_ref().is_some_and(|(h, p)| *h == host && *p == port) {
                return Ok(());
            }
            r.generation += 1;
            r.thread.take()
        };
        if let Some(t) = old {
            let _ = t.join();
        }
        let mut r = self.role.lock();
        // Local writes are no longer recorded; the backlog stays, and the
        // thread tries PSYNC with our id and offset (Redis caches itself
        // as the master), so a demoted primary can continue.
        if let Some(s) = self.stream.get() {
            s.set_following(true);
        }
        r.master = Some((host.clone(), port));
        r.link = Link::Connect;
        r.down_since = unix_secs();
        let generation = r.generation;
        let me = self.clone();
        let t = std::thread::Builder::new()
            .name("strata-replica".into())
            .spawn(move || replica::run(&me, factory, host, port, generation))
            .map_err(|e| format!("starting the replication thread: {e}"))?;
        r.thread = Some(t);
        Ok(())
    }

    /// Stops following (REPLICAOF NO ONE): the server keeps its data,
    /// stream offset and backlog and becomes a primary with a new
    /// replication id; the old one stays valid up to the offset reached
    /// (`master_replid2`, `second_repl_offset` = offset + 1, as Redis's
    /// `shiftReplicationId`). Its replicas are disconnected to learn the
    /// new id; they continue from the backlog.
    pub fn promote(&self) {
        let old = {
            let mut r = self.role.lock();
            r.generation += 1;
            r.thread.take()
        };
        // The thread stops first: nothing is applied or proxied after the
        // offset the old id is valid to.
        if let Some(t) = old {
            let _ = t.join();
        }
        let mut r = self.role.lock();
        if r.master.take().is_some() {
            let offset = self.stream_offset().unwrap_or_else(|| self.offset.load(Ordering::Acquire));
            self.offset.store(offset, Ordering::Release);
            r.replid2 = std::mem::replace(&mut r.replid, new_replid());
            r.second_offset = offset as i64 + 1;
            if !r.resumable {
                // Promoted with an image half loaded: our data is not the
                // old stream's at any offset, so no replica may continue it.
                r.replid2 = NO_REPLID.into();
                r.second_offset = -1;
                r.resumable = true;
            }
            if let Some(s) = self.stream.get() {
                s.set_following(false);
            }
            // The backlog's time to live counts from the promotion.
            self.no_replicas_since.store(unix_secs(), Ordering::Release);
            self.disconnect_replicas();
        }
        r.link = Link::Connect;
    }

    /// Stops the replication thread, if any, keeping the role (shutdown).
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
        let old = {
            let mut r = self.role.lock();
            r.generation += 1;
            r.thread.take()
        };
        if let Some(t) = old {
            let _ = t.join();
        }
    }

    /// Whether the thread of `generation` must stop.
    fn stale(&self, generation: u64) -> bool {
        self.role.lock().generation != generation
    }

    /// Sets the link's state (for the thread of `generation` only).
    fn set_link(&self, generation: u64, link: Link) {
        let mut r = self.role.lock();
        if r.generation == generation {
            if link != Link::Connected && r.link == Link::Connected {
                r.down_since = unix_secs();
            }
            r.link = link;
        }
    }

    /// A full sync began: the primary's id and offset. Our stream starts
    /// over at that offset with an empty backlog (kept from now on, for
    /// sub-replicas and a later PSYNC), and our replicas resync.
    fn start_sync(&self, generation: u64, replid: &str, offset: u64) {
        let mut r = self.role.lock();
        if r.generation == generation {
            r.replid = replid.to_string();
            r.replid2 = NO_REPLID.into();
            r.second_offset = -1;
            r.link = Link::Sync;
            r.resumable = false;
        }
        if let Some(s) = self.stream.get() {
            let _applying = self.apply_lock.lock();
            s.set_following(true);
            s.start(self.settings.backlog_size());
            s.reset(offset);
        }
        self.disconnect_replicas();
        self.offset.store(offset, Ordering::Release);
        self.read_offset.store(offset, Ordering::Release);
        self.sync_read.store(0, Ordering::Relaxed);
    }

    /// The image of a full sync is loaded: our data is the stream's at our
    /// offset again (a later PSYNC may continue).
    fn sync_loaded(&self, generation: u64) {
        let mut r = self.role.lock();
        if r.generation == generation {
            r.resumable = true;
        }
    }

    /// A partial resync was accepted (`+CONTINUE [newid]`): the stream
    /// goes on from our offset; a new id of the primary makes ours
    /// `replid2` up to our offset + 1, and our replicas reconnect to learn
    /// it (Redis's `slaveTryPartialResynchronization`).
    fn continue_sync(&self, generation: u64, new_id: Option<&str>) {
        let mut r = self.role.lock();
        if r.generation != generation {
            return;
        }
        if let Some(id) = new_id.filter(|id| *id != r.replid) {
            let offset = self.stream_offset().unwrap_or_else(|| self.offset());
            r.replid2 = std::mem::replace(&mut r.replid, id.to_string());
            r.second_offset = offset as i64 + 1;
            self.disconnect_replicas();
        }
        let offset = self.stream_offset().unwrap_or_else(|| self.offset());
        self.offset.store(offset, Ordering::Release);
        self.read_offset.store(offset, Ordering::Release);
    }

    /// Bytes arrived from the primary.
    fn touched(&self) {
        self.last_io.store(unix_secs(), Ordering::Relaxed);
    }

    /// The replication offset (bytes of the stream applied; ours as a primary).
    pub fn offset(&self) -> u64 {
        self.offset.load(Ordering::Acquire)
    }

    /// ROLE's reply elements: for a replica `["slave", host, port, state,
    /// offset]`, for a primary `["master", offset, []]` (as strings and
    /// integers: the caller shapes them).
    pub fn role(&self) -> RoleView {
        let r = self.role.lock();
        match &r.master {
            Some((h, p)) => RoleView::Replica {
                host: h.clone(),
                port: *p,
                state: r.link.name(),
                offset: if r.link == Link::Connected { self.offset() as i64 } else { -1 },
            },
            None => RoleView::Primary {
                offset: self.stream_offset().unwrap_or_else(|| self.offset()),
                replicas: self.replicas().into_iter().map(|(ip, port, ack, _)| (ip, port, ack)).collect(),
            },
        }
    }

    /// INFO replication's fields, Redis's names and order.
    pub fn info(&self) -> Vec<(String, String)> {
        let r = self.role.lock();
        let mut f: Vec<(&str, String)> = Vec::new();
        let offset = match &r.master {
            Some(_) => self.offset(),
            None => self.stream_offset().unwrap_or_else(|| self.offset()),
        };
        match &r.master {
            Some((h, p)) => {
                let up = r.link == Link::Connected;
                f.push(("role", "slave".into()));
                f.push(("master_host", h.clone()));
                f.push(("master_port", p.to_string()));
                f.push(("master_link_status", if up { "up" } else { "down" }.into()));
                let last = self.last_io.load(Ordering::Relaxed);
                let ago = if last == 0 { -1 } else { unix_secs().saturating_sub(last) as i64 };
                f.push(("master_last_io_seconds_ago", ago.to_string()));
                f.push(("master_sync_in_progress", u8::from(r.link == Link::Sync).to_string()));
                if r.link == Link::Sync {
                    let total = self.sync_total.load(Ordering::Relaxed);
                    let read = self.sync_read.load(Ordering::Relaxed);
                    f.push(("master_sync_total_bytes", total.to_string()));
                    f.push(("master_sync_read_bytes", read.to_string()));
                    let left = if total < 0 { -1 } else { total - read as i64 };
                    f.push(("master_sync_left_bytes", left.to_string()));
                }
                f.push(("slave_read_repl_offset", self.read_offset.load(Ordering::Acquire).to_string()));
                f.push(("slave_repl_offset", offset.to_string()));
                if !up {
                    f.push(("master_link_down_since_seconds", unix_secs().saturating_sub(r.down_since).to_string()));
                }
                f.push(("slave_priority", "100".into()));
                f.push(("slave_read_only", u8::from(self.read_only()).to_string()));
                f.push(("replica_announced", "1".into()));
            }
            None => f.push(("role", "master".into())),
        }
        let replicas = self.replicas();
        f.push(("connected_slaves", replicas.len().to_string()));
        if self.settings.min_replicas() > 0 && self.settings.min_replicas_max_lag() > 0 {
            let lag = self.settings.min_replicas_max_lag();
            f.push(("min_slaves_good_slaves", replicas.iter().filter(|r| r.3 <= lag).count().to_string()));
        }
        let mut slaves = Vec::new();
        for (i, (ip, port, ack, lag)) in replicas.into_iter().enumerate() {
            slaves.push((format!("slave{i}"), format!("ip={ip},port={port},state=online,offset={ack},lag={lag}")));
        }
        f.push(("master_failover_state", "no-failover".into()));
        f.push(("master_replid", r.replid.clone()));
        f.push(("master_replid2", r.replid2.clone()));
        f.push(("master_repl_offset", offset.to_string()));
        f.push(("second_repl_offset", r.second_offset.to_string()));
        let (active, _, first, held) = self.stream.get().map(|s| s.backlog()).unwrap_or((false, 1 << 20, 0, 0));
        f.push(("repl_backlog_active", u8::from(active).to_string()));
        f.push(("repl_backlog_size", self.settings.backlog_size().to_string()));
        f.push(("repl_backlog_first_byte_offset", first.to_string()));
        f.push(("repl_backlog_histlen", held.to_string()));
        let mut out: Vec<(String, String)> = f.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        // The replicas' lines follow `connected_slaves`, as in Redis.
        let at = out
            .iter()
            .position(|(k, _)| k == "min_slaves_good_slaves")
            .or_else(|| out.iter().position(|(k, _)| k == "connected_slaves"))
            .map_or(out.len(), |i| i + 1);
        out.splice(at..at, slaves);
        out
    }
}

/// What ROLE answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RoleView {
    /// A primary, its offset and its replicas.
    Primary {
        /// The replication offset.
        offset: u64,
        /// The replicas following: ip, port, acknowledged offset.
        replicas: Vec<(String, u16, u64)>,
    },
    /// A replica, its primary, link state and offset.
    Replica {
        /// The primary's host.
        host: String,
        /// The primary's port.
        port: u16,
        /// The link's state (`connect`, `connecting`, `sync`, `connected`).
        state: &'static str,
        /// The offset applied (-1 while not connected).
        offset: i64,
    },
}
