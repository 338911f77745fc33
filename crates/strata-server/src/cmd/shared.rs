//! State shared by every connection: the store and its databases, key
//! locks, key counts, INFO counters, and the shutdown signal.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use crate::config::Config;
use crate::keyspace::{KeyLocks, Meta};
use crate::store::{Backend, ShutdownSave, StoreError};

/// Counters shown by INFO.
#[derive(Default)]
pub struct ServerStats {
    /// Connections accepted since start.
    pub total_connections: AtomicU64,
    /// Connections open now.
    pub connected_clients: AtomicUsize,
    /// Connections refused by `maxclients`.
    pub rejected_connections: AtomicU64,
    /// Commands executed since start.
    pub total_commands: AtomicU64,
    /// Keys removed because they expired.
    pub expired_keys: AtomicU64,
    /// Connections waiting in a blocking command.
    pub blocked_clients: AtomicUsize,
    /// Blocking waits started (orders blocked clients).
    pub block_seq: AtomicU64,
    /// Last client id handed out.
    pub next_client_id: AtomicU64,
    /// Error replies sent, by error code (INFO errorstats; at most 128 codes).
    pub errors: parking_lot::Mutex<std::collections::BTreeMap<String, u64>>,
    /// Error replies sent in all.
    pub total_error_replies: AtomicU64,
    /// Commands run in groups that span several connections (the event
    /// loops' pass-wide groups), and those groups.
    pub pass_grouped_commands: AtomicU64,
    /// See `pass_grouped_commands`.
    pub pass_groups: AtomicU64,
}

impl ServerStats {
    /// Counts an error reply by its code (the text's first word).
    pub fn count_error(&self, text: &str) {
        self.total_error_replies.fetch_add(1, Ordering::Relaxed);
        let code = text.split(' ').next().unwrap_or("ERR");
        let mut errors = self.errors.lock();
        if let Some(n) = errors.get_mut(code) {
            *n += 1;
        } else if errors.len() < 128 {
            errors.insert(code.to_string(), 1);
        }
    }
}

/// One database (SELECT n): its keyspace and key counts.
pub struct Database {
    /// Where its keyspace lives.
    pub store: Arc<dyn Backend>,
    /// Top-level keys (DBSIZE).
    pub keys: AtomicI64,
    /// Keys with an expiry.
    pub expires: AtomicI64,
    /// FLUSHDB/FLUSHALL of it so far (WATCH): a flush touches every key
    /// without bumping every lock stripe.
    pub flushes: AtomicU64,
}

/// State shared by every connection.
pub struct Shared {
    /// The store: database 0, and what saving, durability, INFO and
    /// shutdown go through for all of them.
    pub store: Arc<dyn Backend>,
    /// The databases SELECT chooses from; `dbs[0]` is `store`.
    pub dbs: Vec<Database>,
    /// Per-key locks (shared by the databases: the same key in two
    /// databases shares a stripe, which costs a false WATCH alarm at worst).
    pub locks: KeyLocks,
    /// The configuration.
    pub config: Config,
    /// INFO counters.
    pub stats: ServerStats,
    /// Start time (uptime).
    pub started: Instant,
    /// Set to true to stop the server (SHUTDOWN, signals).
    pub shutdown: tokio::sync::watch::Sender<bool>,
    /// Every write waits for durability (memory store with `appendfsync always`).
    pub store_always_durable: bool,
    /// What the SHUTDOWN that stopped the server asked about saving
    /// (0 default, 1 NOSAVE, 2 SAVE).
    shutdown_save: AtomicU8,
    /// A BGSAVE is running.
    pub bgsave_running: Arc<AtomicBool>,
    /// Whether the expiry sweeper runs (`DEBUG SET-ACTIVE-EXPIRE`).
    pub active_expire: AtomicBool,
    /// Tuning parameters CONFIG SET accepts (no effect here).
    pub tuning: crate::tuning::Tuning,
    /// Per-command counters (INFO commandstats, errorstats).
    pub cmdstats: super::CommandStats,
    /// The replication stream: what writes send to replicas, and its backlog.
    pub repl_stream: Arc<super::ReplStream>,
    /// Clients waiting in blocking commands (CLIENT UNBLOCK).
    pub waiting: super::Waiting,
    /// Pub/sub subscriptions and keyspace notification settings.
    pub pubsub: crate::pubsub::Registry,
    /// The Lua scripting engine (EVAL, FUNCTION).
    pub scripts: super::script::Scripts,
    /// The default user's password (`requirepass`; CONFIG SET changes it,
    /// binary safe); none: every client is served without AUTH.
    pub requirepass: parking_lot::RwLock<Option<Bytes>>,
    /// Protected mode (`protected-mode`; CONFIG SET changes it): while no
    /// password is set, clients from other than loopback are refused.
    pub protected_mode: AtomicBool,
    /// The replication role and link (REPLICAOF, ROLE, INFO replication).
    pub replication: Arc<crate::replication::State>,
}

impl Shared {
    /// Builds the shared state (databases 0..`config.databases`, as many
    /// as the store has) and counts the keys already stored.
    pub fn new(store: Arc<dyn Backend>, config: Config) -> Result<Shared, StoreError> {
        let (shutdown, _) = tokio::sync::watch::channel(false);
        let store_always_durable = config.appendfsync == Some(crate::store::aof::FsyncPolicy::Always);
        let db =
            |store| Database { store, keys: AtomicI64::new(0), expires: AtomicI64::new(0), flushes: AtomicU64::new(0) };
        let mut dbs = vec![db(store.clone())];
        dbs.extend(store.databases(config.databases)?.into_iter().map(db));
        let requirepass = parking_lot::RwLock::new(config.requirepass.clone().map(Bytes::from));
        let protected_mode = AtomicBool::new(config.protected_mode);
        let replication = Arc::new(crate::replication::State::new(
            config.port,
            (config.masteruser.clone(), config.masterauth.clone()),
        ));
        replication.set_read_only(config.replica_read_only);
        let repl_stream = Arc::new(super::ReplStream::default());
        replication.install_stream(repl_stream.clone());
        let shared = Shared {
            store,
            dbs,
            locks: KeyLocks::default(),
            config,
            stats: ServerStats::default(),
            started: Instant::now(),
            shutdown,
            store_always_durable,
            shutdown_save: AtomicU8::new(0),
            bgsave_running: Arc::new(AtomicBool::new(false)),
            active_expire: AtomicBool::new(true),
            tuning: crate::tuning::Tuning::default(),
            cmdstats: super::CommandStats::default(),
            repl_stream,
            waiting: super::Waiting::default(),
            pubsub: crate::pubsub::Registry::default(),
            scripts: super::script::Scripts::new(),
            requirepass,
            protected_mode,
            replication,
        };
        // Tuning parameters and keyspace events set by the config file.
        shared.tuning.set(shared.config.startup_tuning.clone());
        if let Some(f) = shared.config.notify_keyspace_events {
            shared.pubsub.notify.store(f, Ordering::Relaxed);
        }
        shared.check_format()?;
        shared.count_keys()?;
        Ok(shared)
    }

    /// Whether a client must still authenticate: a password is set and the
    /// session has not given it (a client that connected while none was
    /// set stays authenticated, as in Redis).
    pub fn auth_required(&self, sess_authed: bool) -> bool {
        !sess_authed && self.requirepass.read().is_some()
    }

    /// Whether a password is set.
    pub fn has_password(&self) -> bool {
        self.requirepass.read().is_some()
    }

    fn check_format(&self) -> Result<(), StoreError> {
        use crate::keyspace::{VERSION, VERSION_1, VERSION_KEY};
        match self.store.get(VERSION_KEY)? {
            Some(v) if v == VERSION => Ok(()),
            Some(v) if v == VERSION_1 => {
                // Format 1 is format 2 without packed hashes: the marker is
                // raised before any is written, so a server that reads only
                // format 1 refuses the directory rather than meeting a meta
                // type it does not know.
                let p = self.store.write(vec![(VERSION_KEY.to_vec(), Some(VERSION.to_vec()))], true)?;
                self.store.wait_durable(p)
            }
            Some(v) => Err(StoreError(format!(
                "data directory holds server keyspace format {:?}, this server reads {:?}",
                String::from_utf8_lossy(&v),
                String::from_utf8_lossy(VERSION)
            ))),
            None => {
                if !self.store.scan(&[], None, 1)?.is_empty() {
                    return Err(StoreError("data directory holds data that is not a strata-server keyspace".into()));
                }
                let p = self.store.write(vec![(VERSION_KEY.to_vec(), Some(VERSION.to_vec()))], true)?;
                self.store.wait_durable(p)
            }
        }
    }

    fn count_keys(&self) -> Result<(), StoreError> {
        for db in &self.dbs {
            Self::count_keys_of(db)?;
        }
        Ok(())
    }

    fn count_keys_of(db: &Database) -> Result<(), StoreError> {
        let (mut keys, mut expires) = (0i64, 0i64);
        // The key directory is built from the same scan.
        let dir = db.store.key_directory();
        let mut cursor = b"m".to_vec();
        loop {
            let chunk = db.store.scan(&cursor, Some(b"n"), 4096)?;
            for (k, v) in &chunk {
                keys += 1;
                if let Some(d) = dir {
                    d.insert_loaded(k, v);
                }
                if Meta::decode(v).is_some_and(|m| m.expire_ms != 0) {
                    expires += 1;
                }
            }
            match chunk.last() {
                Some((k, _)) if chunk.len() == 4096 => {
                    cursor = k.clone();
                    cursor.push(0);
                }
                _ => break,
            }
        }
        db.keys.store(keys, Ordering::Relaxed);
        db.expires.store(expires, Ordering::Relaxed);
        if let Some(d) = dir {
            d.set_ready();
        }
        Ok(())
    }

    /// Database `n` (the session's, checked by SELECT; database 0 if out
    /// of range).
    pub fn db(&self, n: usize) -> &Database {
        match self.dbs.get(n) {
            Some(d) => d,
            None => self.db0(),
        }
    }

    /// Database 0.
    fn db0(&self) -> &Database {
        // `new` puts database 0 first; a `Shared` never has none.
        let Some(d) = self.dbs.first() else { unreachable!("database 0 always exists") };
        d
    }

    /// The store of database `n`.
    pub fn store_of(&self, n: usize) -> &dyn Backend {
        self.db(n).store.as_ref()
    }

    /// Asks the server to stop.
    pub fn request_shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    /// Asks the server to stop, saving as `save` says (SHUTDOWN).
    pub fn request_shutdown_saving(&self, save: ShutdownSave) {
        let code = match save {
            ShutdownSave::Default => 0,
            ShutdownSave::NoSave => 1,
            ShutdownSave::Save => 2,
        };
        self.shutdown_save.store(code, Ordering::Release);
        self.request_shutdown();
    }

    /// What the shutdown asked about saving (default for signals).
    pub fn shutdown_save(&self) -> ShutdownSave {
        match self.shutdown_save.load(Ordering::Acquire) {
            1 => ShutdownSave::NoSave,
            2 => ShutdownSave::Save,
            _ => ShutdownSave::Default,
        }
    }

    /// Whether shutdown was requested.
    pub fn is_shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// Whether replies must wait for durability: `--durability sync`, or
    /// the memory store with `appendfsync always`.
    pub fn replies_wait_for_sync(&self) -> bool {
        self.config.durability_sync || self.store_always_durable
    }
}
