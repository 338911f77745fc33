//! Per-connection state: protocol version, authentication, name, selected
//! database, MULTI queue, WATCHed stripes.

use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::Shared;

/// A blocking command waiting for data (BLPOP and kin).
#[derive(Debug)]
pub struct Blocked {
    /// The command, run again when a key may have changed.
    pub args: Vec<Bytes>,
    /// When the wait ends with `nil` (`None`: never).
    pub deadline: Option<std::time::Instant>,
    /// The lock stripes of its keys and their versions when it last ran.
    pub versions: Vec<(usize, u64)>,
    /// The reply when the wait times out.
    pub nil: crate::resp::Reply,
    /// Order of blocking: clients blocked earlier are run first (Redis
    /// serves the longest-waiting client first).
    pub seq: u64,
    /// WAIT: the offset replicas must acknowledge and how many (looked at
    /// on every poll of blocked clients).
    pub wait: Option<(u64, usize)>,
}

impl Blocked {
    /// Whether a key it waits on may have changed since it last ran.
    pub fn may_run(&self, shared: &Shared) -> bool {
        self.wait.is_some() || self.versions.iter().any(|&(s, v)| shared.locks.version(s) != v)
    }

    /// Whether its timeout has passed.
    pub fn timed_out(&self) -> bool {
        self.deadline.is_some_and(|d| std::time::Instant::now() >= d)
    }
}

/// Per-connection state.
#[derive(Debug)]
pub struct Session {
    /// CLIENT ID.
    pub id: u64,
    /// Protocol version: 2 or 3.
    pub proto: u8,
    /// Passed AUTH, or connected while no password was set (see
    /// [`super::Shared::auth_required`]).
    pub authed: bool,
    /// CLIENT SETNAME.
    pub name: Option<Bytes>,
    /// Commands queued since MULTI.
    pub multi: Option<Vec<Vec<Bytes>>>,
    /// A command failed to queue: EXEC must abort.
    pub multi_failed: bool,
    /// QUIT was received: close after replying.
    pub quit: bool,
    /// Close without sending this command's reply (SHUTDOWN).
    pub silent: bool,
    /// CLIENT SETINFO LIB-NAME / LIB-VER.
    pub lib: (Option<String>, Option<String>),
    /// Peer address, for CLIENT LIST/INFO.
    pub addr: String,
    /// WATCHed lock stripes and their versions at WATCH time.
    pub watched: Vec<(usize, u64)>,
    /// The earliest expiry time (ms) of the WATCHed keys that were live
    /// with a TTL at WATCH time: EXEC aborts once it has passed, as Redis 7
    /// does for a watched key that expired.
    pub watch_deadline: Option<u64>,
    /// Databases that held a WATCHed key, and their flush counts then:
    /// EXEC aborts if one was flushed since.
    pub watched_flushes: Vec<(usize, u64)>,
    /// A blocking command waiting for data; the connection runs nothing
    /// else meanwhile.
    pub blocked: Option<Blocked>,
    /// Its scripts run on the script thread, in order (pipelined script
    /// commands after the first); the connection runs nothing else until
    /// their replies are collected.
    pub script: std::collections::VecDeque<std::sync::Arc<super::ScriptWait>>,
    /// Its scripts, until the event loop hands them to the script thread.
    pub script_job: Vec<super::ScriptJob>,
    /// Set for a network connection: its scripts run on the script thread
    /// (otherwise on the caller's thread).
    pub script_host: Option<super::ScriptHost>,
    /// The selected database (SELECT).
    pub db: usize,
    /// Where pub/sub messages for this connection go (`None`: the
    /// connection cannot subscribe).
    pub mailbox: Option<std::sync::Arc<crate::pubsub::Mailbox>>,
    /// Channels, patterns and shard channels subscribed to.
    pub subs: super::pubsub::Subscriptions,
    /// CLIENT REPLY OFF: replies are not sent (pushes are).
    pub reply_off: bool,
    /// CLIENT REPLY SKIP: how many more replies are not sent (the SKIP's
    /// own and the next command's).
    pub reply_skip: u8,
    /// The replication thread's session (the "master client"): it writes
    /// on a read-only replica.
    pub master: bool,
    /// The connection runs over TLS (PSYNC is refused there for now).
    pub tls: bool,
    /// The port the peer said it listens on (REPLCONF listening-port).
    pub repl_port: u16,
    /// The replica announced `REPLCONF capa eof` (it takes a diskless image).
    pub repl_capa_eof: bool,
    /// The replica announced `REPLCONF capa psync2` (`+CONTINUE <id>`).
    pub repl_capa_psync2: bool,
    /// Set by PSYNC/SYNC: the connection goes to a replica's thread once
    /// this pass's replies are out.
    pub handover: Option<Box<crate::replication::primary::Handover>>,
}

impl Session {
    /// A new connection's state.
    pub fn new(shared: &Shared, addr: String) -> Session {
        Session {
            id: shared.stats.next_client_id.fetch_add(1, Ordering::Relaxed) + 1,
            proto: 2,
            authed: !shared.has_password(),
            name: None,
            multi: None,
            multi_failed: false,
            quit: false,
            silent: false,
            lib: (None, None),
            addr,
            watched: Vec::new(),
            watch_deadline: None,
            watched_flushes: Vec::new(),
            blocked: None,
            script: Default::default(),
            script_job: Vec::new(),
            script_host: None,
            db: 0,
            mailbox: None,
            subs: Default::default(),
            reply_off: false,
            reply_skip: 0,
            master: false,
            tls: false,
            repl_port: 0,
            repl_capa_eof: false,
            repl_capa_psync2: false,
            handover: None,
        }
    }

    /// Whether the connection waits (blocking command or script) and runs
    /// nothing else meanwhile.
    pub fn parked(&self) -> bool {
        self.blocked.is_some() || !self.script.is_empty()
    }

    /// Forgets every WATCHed key.
    pub fn unwatch(&mut self) {
        self.watched.clear();
        self.watch_deadline = None;
        self.watched_flushes.clear();
    }
}
