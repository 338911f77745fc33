//! The replication settings a config file and CONFIG SET change at run
//! time, with Redis 7.0's names, defaults and units: the backlog's size,
//! diskless sync and load, min-replicas-to-write, replica-serve-stale-data,
//! the link's timeout and ping period and the replicas' output buffer
//! limit, and `rdb-key-save-delay` (a pause per key written into a full
//! sync's image: Redis's tests slow a transfer down with it). [`Settings::check`] validates a value
//! (CONFIG SET is all or nothing), [`Settings::set`] applies a checked one.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;

/// Redis's `repl-backlog-size` default (1mb).
pub const DEFAULT_BACKLOG: u64 = 1 << 20;
/// The smallest backlog Redis allows (16kb).
const MIN_BACKLOG: u64 = 16 << 10;

/// `repl-diskless-load`: how a replica loads a full sync's image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DisklessLoad {
    /// Receive the whole image into a file first; the old data stays
    /// until the image is complete (Redis's default).
    Disabled,
    /// Load from the socket only into an empty keyspace; otherwise as
    /// `Disabled`.
    OnEmptyDb,
    /// Redis keeps the old data in memory while it loads; here the image
    /// is received into a file first, as `Disabled` does, which keeps the
    /// same promise (a failed transfer leaves the old data).
    Swapdb,
}

impl DisklessLoad {
    const NAMES: [(&'static str, DisklessLoad); 3] = [
        ("disabled", DisklessLoad::Disabled),
        ("on-empty-db", DisklessLoad::OnEmptyDb),
        ("swapdb", DisklessLoad::Swapdb),
    ];

    fn parse(v: &str) -> Result<DisklessLoad, String> {
        let v = v.to_ascii_lowercase();
        DisklessLoad::NAMES
            .iter()
            .find(|(n, _)| *n == v)
            .map(|(_, d)| *d)
            .ok_or_else(|| "argument(s) must be one of the following: disabled, on-empty-db, swapdb".into())
    }

    fn name(self) -> &'static str {
        DisklessLoad::NAMES.iter().find(|(_, d)| *d == self).map_or("disabled", |(n, _)| n)
    }
}

/// The output buffer limits of one client class: hard bytes, soft bytes,
/// soft seconds (0: none).
pub type BufferLimit = (u64, u64, u64);

/// The settings, read on every use.
pub struct Settings {
    backlog_size: AtomicU64,
    backlog_ttl: AtomicU64,
    diskless: AtomicBool,
    diskless_delay: AtomicU64,
    diskless_max_replicas: AtomicU64,
    diskless_load: Mutex<DisklessLoad>,
    min_replicas: AtomicU64,
    min_replicas_lag: AtomicU64,
    serve_stale: AtomicBool,
    timeout: AtomicU64,
    ping_period: AtomicU64,
    /// `client-output-buffer-limit`: normal, replica, pubsub. The replica
    /// class's limits apply to each replica's spool.
    obuf: Mutex<[BufferLimit; 3]>,
    /// `rdb-key-save-delay`: microseconds per key; negative `-n`: one
    /// microsecond with probability `1/n`.
    key_save_delay: std::sync::atomic::AtomicI64,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            backlog_size: AtomicU64::new(DEFAULT_BACKLOG),
            backlog_ttl: AtomicU64::new(3600),
            diskless: AtomicBool::new(true),
            diskless_delay: AtomicU64::new(5),
            diskless_max_replicas: AtomicU64::new(0),
            diskless_load: Mutex::new(DisklessLoad::Disabled),
            min_replicas: AtomicU64::new(0),
            min_replicas_lag: AtomicU64::new(10),
            serve_stale: AtomicBool::new(true),
            timeout: AtomicU64::new(60),
            ping_period: AtomicU64::new(10),
            obuf: Mutex::new([(0, 0, 0), (256 << 20, 64 << 20, 60), (32 << 20, 8 << 20, 60)]),
            key_save_delay: std::sync::atomic::AtomicI64::new(0),
        }
    }
}

/// The names taken, aliases first mapped to Redis's main name.
fn canonical(name: &str) -> Option<&'static str> {
    Some(match name {
        "repl-backlog-size" => "repl-backlog-size",
        "repl-backlog-ttl" => "repl-backlog-ttl",
        "repl-diskless-sync" => "repl-diskless-sync",
        "repl-diskless-sync-delay" => "repl-diskless-sync-delay",
        "repl-diskless-sync-max-replicas" => "repl-diskless-sync-max-replicas",
        "repl-diskless-load" => "repl-diskless-load",
        "min-replicas-to-write" | "min-slaves-to-write" => "min-replicas-to-write",
        "min-replicas-max-lag" | "min-slaves-max-lag" => "min-replicas-max-lag",
        "replica-serve-stale-data" | "slave-serve-stale-data" => "replica-serve-stale-data",
        "client-output-buffer-limit" => "client-output-buffer-limit",
        "repl-timeout" => "repl-timeout",
        "repl-ping-replica-period" | "repl-ping-slave-period" => "repl-ping-replica-period",
        "rdb-key-save-delay" => "rdb-key-save-delay",
        _ => return None,
    })
}

fn yes_no(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err("argument must be 'yes' or 'no'".into()),
    }
}

fn number(v: &str) -> Result<u64, String> {
    v.trim().parse::<u64>().map_err(|_| "argument couldn't be parsed into an integer".into())
}

/// An integer in Redis's `int` range, negative allowed.
fn signed(v: &str) -> Result<i64, String> {
    v.trim().parse::<i32>().map(i64::from).map_err(|_| "argument couldn't be parsed into an integer".into())
}

fn memory(v: &str) -> Result<u64, String> {
    crate::numbers::parse_bytes(v).ok_or_else(|| "argument must be a memory value".into())
}

/// `class hard soft seconds ...` of `client-output-buffer-limit`, applied
/// over `into`.
fn buffer_limits(v: &str, into: &mut [BufferLimit; 3]) -> Result<(), String> {
    let words: Vec<&str> = v.split_whitespace().collect();
    if words.is_empty() || !words.len().is_multiple_of(4) {
        return Err("Wrong number of arguments in buffer limit configuration.".into());
    }
    for w in words.chunks(4) {
        let class = match w.first().map(|c| c.to_ascii_lowercase()).as_deref() {
            Some("normal") => 0,
            Some("replica" | "slave") => 1,
            Some("pubsub") => 2,
            _ => return Err("Invalid client class specified in buffer limit configuration.".into()),
        };
        let get = |i: usize| w.get(i).copied().unwrap_or_default();
        let (hard, soft) = (memory(get(1))?, memory(get(2))?);
        let secs = number(get(3)).map_err(|_| "Error in soft_seconds setting in buffer limit configuration.")?;
        if let Some(slot) = into.get_mut(class) {
            *slot = (hard, soft, secs);
        }
    }
    Ok(())
}

impl Settings {
    /// Whether `name` is one of these settings.
    pub fn knows(name: &str) -> bool {
        canonical(name).is_some()
    }

    /// Checks `value` for `name`: Redis's error text (without the CONFIG
    /// SET prefix) if it is refused.
    pub fn check(name: &str, value: &str) -> Result<(), String> {
        match canonical(name).ok_or_else(|| format!("unknown setting {name}"))? {
            "repl-backlog-size" => memory(value).map(drop),
            "repl-diskless-sync" | "replica-serve-stale-data" => yes_no(value).map(drop),
            "client-output-buffer-limit" => buffer_limits(value, &mut [(0, 0, 0); 3]),
            "repl-diskless-load" => DisklessLoad::parse(value).map(drop),
            // Redis's range: at least a second.
            "repl-timeout" | "repl-ping-replica-period" => match number(value)? {
                0 => Err("argument must be between 1 and 2147483647 inclusive".into()),
                _ => Ok(()),
            },
            "rdb-key-save-delay" => signed(value).map(drop),
            _ => number(value).map(drop),
        }
    }

    /// Sets `name` to `value` (checked first: a bad value is the error).
    pub fn set(&self, name: &str, value: &str) -> Result<(), String> {
        Settings::check(name, value)?;
        let n = || number(value).unwrap_or(0);
        match canonical(name).unwrap_or_default() {
            // Redis raises a smaller backlog to its minimum.
            "repl-backlog-size" => self.backlog_size.store(memory(value)?.max(MIN_BACKLOG), Ordering::Relaxed),
            "repl-backlog-ttl" => self.backlog_ttl.store(n(), Ordering::Relaxed),
            "repl-diskless-sync" => self.diskless.store(yes_no(value)?, Ordering::Relaxed),
            "repl-diskless-sync-delay" => self.diskless_delay.store(n(), Ordering::Relaxed),
            "repl-diskless-sync-max-replicas" => self.diskless_max_replicas.store(n(), Ordering::Relaxed),
            "repl-diskless-load" => *self.diskless_load.lock() = DisklessLoad::parse(value)?,
            "min-replicas-to-write" => self.min_replicas.store(n(), Ordering::Relaxed),
            "min-replicas-max-lag" => self.min_replicas_lag.store(n(), Ordering::Relaxed),
            "replica-serve-stale-data" => self.serve_stale.store(yes_no(value)?, Ordering::Relaxed),
            "repl-timeout" => self.timeout.store(n(), Ordering::Relaxed),
            "repl-ping-replica-period" => self.ping_period.store(n(), Ordering::Relaxed),
            "rdb-key-save-delay" => self.key_save_delay.store(signed(value)?, Ordering::Relaxed),
            "client-output-buffer-limit" => {
                let mut l = self.obuf.lock();
                let mut next = *l;
                buffer_limits(value, &mut next)?;
                *l = next;
            }
            _ => {}
        }
        Ok(())
    }

    /// `(name, value)` for CONFIG GET, aliases included.
    pub fn params(&self) -> Vec<(&'static str, String)> {
        let yn = |b: bool| if b { "yes" } else { "no" }.to_string();
        let obuf = self.obuf.lock();
        let classes = ["normal", "slave", "pubsub"];
        let limits: Vec<String> =
            classes.iter().zip(obuf.iter()).map(|(c, (h, s, t))| format!("{c} {h} {s} {t}")).collect();
        let min = self.min_replicas().to_string();
        let lag = self.min_replicas_max_lag().to_string();
        vec![
            ("repl-backlog-size", self.backlog_size().to_string()),
            ("repl-backlog-ttl", self.backlog_ttl.load(Ordering::Relaxed).to_string()),
            ("repl-diskless-sync", yn(self.diskless())),
            ("repl-diskless-sync-delay", self.diskless_delay().to_string()),
            ("repl-diskless-sync-max-replicas", self.diskless_max_replicas().to_string()),
            ("repl-diskless-load", self.diskless_load().name().to_string()),
            ("min-replicas-to-write", min.clone()),
            ("min-slaves-to-write", min),
            ("min-replicas-max-lag", lag.clone()),
            ("min-slaves-max-lag", lag),
            ("replica-serve-stale-data", yn(self.serve_stale())),
            ("slave-serve-stale-data", yn(self.serve_stale())),
            ("client-output-buffer-limit", limits.join(" ")),
            ("repl-timeout", self.timeout.load(Ordering::Relaxed).to_string()),
            ("repl-ping-replica-period", self.ping_period.load(Ordering::Relaxed).to_string()),
            ("repl-ping-slave-period", self.ping_period.load(Ordering::Relaxed).to_string()),
            ("rdb-key-save-delay", self.key_save_delay().to_string()),
        ]
    }

    /// `rdb-key-save-delay`: microseconds per key written into an image
    /// (negative `-n`: one microsecond, once in `n` keys on average).
    pub fn key_save_delay(&self) -> i64 {
        self.key_save_delay.load(Ordering::Relaxed)
    }

    /// `repl-backlog-size` in bytes.
    pub fn backlog_size(&self) -> u64 {
        self.backlog_size.load(Ordering::Relaxed)
    }

    /// `repl-backlog-ttl` in seconds (0: never freed).
    pub fn backlog_ttl(&self) -> u64 {
        self.backlog_ttl.load(Ordering::Relaxed)
    }

    /// `repl-diskless-sync`.
    pub fn diskless(&self) -> bool {
        self.diskless.load(Ordering::Relaxed)
    }

    /// `repl-diskless-sync-delay` in seconds.
    pub fn diskless_delay(&self) -> u64 {
        self.diskless_delay.load(Ordering::Relaxed)
    }

    /// `repl-diskless-sync-max-replicas` (0: always wait the delay).
    pub fn diskless_max_replicas(&self) -> u64 {
        self.diskless_max_replicas.load(Ordering::Relaxed)
    }

    /// `repl-diskless-load`.
    pub fn diskless_load(&self) -> DisklessLoad {
        *self.diskless_load.lock()
    }

    /// `min-replicas-to-write` (0: off).
    pub fn min_replicas(&self) -> u64 {
        self.min_replicas.load(Ordering::Relaxed)
    }

    /// `min-replicas-max-lag` in seconds.
    pub fn min_replicas_max_lag(&self) -> u64 {
        self.min_replicas_lag.load(Ordering::Relaxed)
    }

    /// `repl-timeout`: how long a replication link may stay silent (a
    /// replica's reads, a primary's writes and waits) before it is dropped.
    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.timeout.load(Ordering::Relaxed).max(1))
    }

    /// `repl-ping-replica-period`: how often a primary with nothing to send
    /// pings its replicas (so their `repl-timeout` sees a live link).
    pub fn ping_period(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.ping_period.load(Ordering::Relaxed).max(1))
    }

    /// `replica-serve-stale-data`.
    pub fn serve_stale(&self) -> bool {
        self.serve_stale.load(Ordering::Relaxed)
    }

    /// The replica class's output buffer limits: hard bytes, soft bytes,
    /// soft seconds (0: none).
    pub fn replica_limit(&self) -> BufferLimit {
        self.obuf.lock().get(1).copied().unwrap_or((0, 0, 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_aliases_and_refusals() {
        let s = Settings::default();
        assert_eq!(s.backlog_size(), 1 << 20);
        s.set("repl-backlog-size", "16kb").unwrap();
        assert_eq!(s.backlog_size(), 16 << 10);
        s.set("repl-backlog-size", "100").unwrap();
        assert_eq!(s.backlog_size(), 16 << 10, "raised to Redis's minimum");
        assert!(s.set("repl-backlog-size", "lots").is_err());
        s.set("min-slaves-to-write", "2").unwrap();
        assert_eq!(s.min_replicas(), 2);
        assert!(s.set("replica-serve-stale-data", "maybe").is_err());
        s.set("slave-serve-stale-data", "no").unwrap();
        assert!(!s.serve_stale());
        assert_eq!(s.replica_limit(), (256 << 20, 64 << 20, 60));
        s.set("client-output-buffer-limit", "replica 1mb 0 0 pubsub 0 0 0").unwrap();
        assert_eq!(s.replica_limit(), (1 << 20, 0, 0));
        assert!(s.set("client-output-buffer-limit", "replica 1mb 0").is_err());
        assert!(s.set("client-output-buffer-limit", "other 1 1 1").is_err());
        let p = s.params();
        assert!(p.contains(&("client-output-buffer-limit", "normal 0 0 0 slave 1048576 0 0 pubsub 0 0 0".into())));
        assert_eq!(s.diskless_load(), DisklessLoad::Disabled);
        s.set("repl-diskless-load", "SWAPDB").unwrap();
        assert_eq!(s.diskless_load(), DisklessLoad::Swapdb);
        assert!(s.set("repl-diskless-load", "sometimes").is_err());
        assert!(s.params().contains(&("repl-diskless-load", "swapdb".into())));
        assert!(!Settings::knows("repl-diskless-loads"));
    }
}
