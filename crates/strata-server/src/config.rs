//! Configuration: command-line flags named like Redis's configuration,
//! optionally read from a redis.conf-style file (`--config FILE`); flags
//! given on the command line win over the file.

use std::collections::HashMap;
use std::path::PathBuf;

use anyhow::{anyhow, bail, Context};
use clap::Parser;

use crate::numbers::parse_bytes;
use crate::resp::Limits;
use crate::store::aof::FsyncPolicy;

/// Command-line flags. Every flag may also be a `name value` line in the
/// `--config` file (same names without the dashes).
#[derive(Parser, Debug, Default)]
#[command(name = "strata-server", version, about = "The StrataKV engine behind the Redis protocol")]
pub struct Flags {
    /// redis.conf-style file with the settings below (`port 6380`, ...).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// TCP port. Default 6379.
    #[arg(long)]
    pub port: Option<u16>,
    /// Address to listen on. Default 127.0.0.1.
    #[arg(long)]
    pub bind: Option<String>,
    /// Data directory. Default ./strata-data.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Directory of the engine's PM region file (DAX mount, /dev/shm, ...).
    #[arg(long = "pm-dir")]
    pub pm_dir: Option<PathBuf>,
    /// Size of a new PM region (e.g. 4gb). Default: the engine's (4 GiB).
    #[arg(long = "pm-size")]
    pub pm_size: Option<String>,
    /// Engine profile of a new database: `matrix` (default), `sstable` or
    /// `single-level` or `pm-only`. An existing database keeps the one it was made with.
    #[arg(long)]
    pub profile: Option<String>,
    /// Index of the tables the engine writes from now on: `binary`
    /// (default) or `learned` (TridentKV's model; tables of both kinds mix).
    #[arg(long = "table-index")]
    pub table_index: Option<String>,
    /// Engine memtable size (e.g. 64mb). Default 8 MiB: Redis-style values
    /// are small, and a smaller skiplist stays in the CPU cache.
    #[arg(long = "write-buffer-size")]
    pub write_buffer_size: Option<String>,
    /// `sync`: reply only once the write is durable (group commit);
    /// `default`: the engine's default durability class.
    #[arg(long)]
    pub durability: Option<String>,
    /// `engine` (data in StrataKV) or `memory` (DRAM map).
    #[arg(long)]
    pub storage: Option<String>,
    /// Memory storage: command log fsync policy (`always`, `everysec`, `no`).
    #[arg(long)]
    pub appendfsync: Option<String>,
    /// Memory storage: `yes` enables the command log (everysec unless
    /// `--appendfsync` says otherwise).
    #[arg(long)]
    pub appendonly: Option<String>,
    /// Memory storage: snapshot every N seconds when data changed.
    #[arg(long = "snapshot-seconds")]
    pub snapshot_seconds: Option<u64>,
    /// Password every client must give with AUTH (or HELLO ... AUTH).
    #[arg(long)]
    pub requirepass: Option<String>,
    /// Most simultaneous clients. Default 10000.
    #[arg(long)]
    pub maxclients: Option<usize>,
    /// Close a client idle this many seconds (0: never). Default 0.
    #[arg(long)]
    pub timeout: Option<u64>,
    /// Event-loop threads serving connections (each runs its clients'
    /// commands inline, like Redis's main thread). Default 1.
    #[arg(long = "event-loops")]
    pub event_loops: Option<usize>,
    /// Nice value (0-19) of the engine's flush and compaction threads, so
    /// they give way to the event loops when cores are short. Default 10.
    #[arg(long = "background-nice")]
    pub background_nice: Option<u32>,
    /// `yes` (default): an event loop sends the replies of a pass to all
    /// its connections in one io_uring submission where the kernel allows
    /// it; `no`: one `write` per connection.
    #[arg(long = "io-uring")]
    pub io_uring: Option<String>,
    /// `yes` (default, as Redis): while no password is set, clients from
    /// addresses other than loopback are refused; `no`: served.
    #[arg(long = "protected-mode")]
    pub protected_mode: Option<String>,
    /// Largest bulk argument (e.g. 512mb). Default 512 MiB.
    #[arg(long = "proto-max-bulk-len")]
    pub proto_max_bulk_len: Option<String>,
    /// Largest unparsed query buffer per client (e.g. 1gb). Default 1 GiB.
    #[arg(long = "client-query-buffer-limit")]
    pub client_query_buffer_limit: Option<String>,
    /// Databases SELECT can choose (Redis's `databases`; default 16 with
    /// `--storage engine`, where db 0 is the engine's default partition and
    /// db n a partition "dbn"; `--storage memory` has db 0 only).
    #[arg(long)]
    pub databases: Option<u64>,
    /// Engine storage: DRAM cache of meta entries and whole collections
    /// read (e.g. 64mb; 0: none). Default 256 MiB.
    #[arg(long = "read-cache-size")]
    pub read_cache_size: Option<String>,
    /// Engine storage: keep every key's type and expiry in DRAM (`yes`,
    /// default) so that writes skip reading the old entry from the engine;
    /// costs some 40 bytes plus the key's length per key.
    #[arg(long = "key-directory")]
    pub key_directory: Option<String>,
    /// Engine storage: the engine's block cache of table blocks read from
    /// SSD (e.g. 32mb). Default 256 MiB. With `read-cache-size`,
    /// `write-buffer-size` and `pm-size` (a PM region in /dev/shm is
    /// memory too) it bounds what the server holds in memory.
    #[arg(long = "block-cache-size")]
    pub block_cache_size: Option<String>,
    /// Engine storage through the sharded front end (p2KVS) with this many
    /// shards; 0 (default): one engine. Fixed when the directory is created.
    #[arg(long)]
    pub shards: Option<u64>,
    /// TLS port (0 or unset: none). With `--port 0` the server speaks TLS only.
    #[arg(long = "tls-port")]
    pub tls_port: Option<u16>,
    /// The server's certificate chain (PEM) for the TLS port.
    #[arg(long = "tls-cert-file")]
    pub tls_cert_file: Option<PathBuf>,
    /// The server's private key (PEM) for the TLS port.
    #[arg(long = "tls-key-file")]
    pub tls_key_file: Option<PathBuf>,
    /// CA certificates (PEM) that client certificates must chain to.
    #[arg(long = "tls-ca-cert-file")]
    pub tls_ca_cert_file: Option<PathBuf>,
    /// Client certificates: `yes` (required; the default when a CA is
    /// given), `optional` (checked if sent), `no`.
    #[arg(long = "tls-auth-clients")]
    pub tls_auth_clients: Option<String>,
    /// Follow a Redis primary from the start: `"host port"` (as
    /// `replicaof host port` in redis.conf).
    #[arg(long)]
    pub replicaof: Option<String>,
    /// Password given to the primary (AUTH) when following one.
    #[arg(long)]
    pub masterauth: Option<String>,
    /// User name given to the primary with `masterauth`.
    #[arg(long)]
    pub masteruser: Option<String>,
    /// `yes` (default): a replica refuses clients' writes; `no`: serves them.
    #[arg(long = "replica-read-only")]
    pub replica_read_only: Option<String>,
}

/// Whether TLS clients must present a certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsAuthClients {
    /// Required (and verified against the CA).
    Yes,
    /// Verified if presented.
    Optional,
    /// Not asked for.
    No,
}

/// The TLS port's settings.
#[derive(Clone, Debug)]
pub struct TlsConfig {
    /// Port to listen on.
    pub port: u16,
    /// Certificate chain file (PEM).
    pub cert_file: PathBuf,
    /// Private key file (PEM).
    pub key_file: PathBuf,
    /// CA file for client certificates (PEM).
    pub ca_cert_file: Option<PathBuf>,
    /// Client certificate policy.
    pub auth_clients: TlsAuthClients,
}

impl TlsConfig {
    /// The TLS settings from the flags (or file values); `None` without a
    /// TLS port.
    fn resolve(
        port: Option<u64>,
        cert: Option<String>,
        key: Option<String>,
        ca: Option<String>,
        auth: Option<String>,
    ) -> anyhow::Result<Option<TlsConfig>> {
        let port = match port {
            None | Some(0) => return Ok(None),
            Some(p) => u16::try_from(p).map_err(|_| anyhow!("tls-port out of range: {p}"))?,
        };
        let (Some(cert), Some(key)) = (cert, key) else {
            bail!("--tls-port needs --tls-cert-file and --tls-key-file");
        };
        let ca_cert_file = ca.map(PathBuf::from);
        let auth_clients = match auth.as_deref().map(str::to_ascii_lowercase).as_deref() {
            None | Some("yes") => TlsAuthClients::Yes,
            Some("optional") => TlsAuthClients::Optional,
            Some("no") => TlsAuthClients::No,
            Some(other) => bail!("tls-auth-clients must be yes, no or optional, not {other}"),
        };
        let auth_clients = if ca_cert_file.is_none() { TlsAuthClients::No } else { auth_clients };
        Ok(Some(TlsConfig { port, cert_file: cert.into(), key_file: key.into(), ca_cert_file, auth_clients }))
    }
}

/// Event loops when not configured.
pub const DEFAULT_EVENT_LOOPS: usize = 1;
/// Default engine memtable size: measured with redis-benchmark -P 16 on 1M
/// keys, 16 MiB did 20-25% more SET/GET than the engine's 64 MiB; with one
/// hash index per matrix segment (more rows cost reads little), 8 MiB took
/// about 14% less CPU per SET than 16 MiB and the same per GET.
pub const DEFAULT_WRITE_BUFFER: u64 = 8 << 20;
/// Default nice value of the engine's background threads: measured with
/// redis-benchmark -P 16 on 2 cores (server, client and background work
/// competing), nice 10 cut SET/INCR/HSET/MSET p99 by 10-30% against 0,
/// with throughput the same or higher.
pub const DEFAULT_BACKGROUND_NICE: u32 = 10;
/// The engine store's read cache unless `--read-cache-size` says otherwise.
/// 256 MiB: a Redis user's data sits in DRAM whole; this holds the hot part
/// of a few hundred MiB of records (Kvrocks's RocksDB block cache defaults
/// to 4 GiB).
pub const DEFAULT_READ_CACHE: u64 = 256 << 20;

/// Databases of `--storage engine` unless `databases` says otherwise (Redis's default).
pub const DEFAULT_DATABASES: u64 = 16;
/// Most databases `databases` may ask for.
pub const MAX_DATABASES: u64 = 1 << 16;

/// Where the server keeps data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StorageMode {
    /// The StrataKV engine.
    Engine,
    /// A DRAM map with optional command log or snapshots.
    Memory,
}

/// The resolved configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// TCP port.
    pub port: u16,
    /// Listen address.
    pub bind: String,
    /// Data directory.
    pub dir: PathBuf,
    /// PM region directory (engine).
    pub pm_dir: Option<PathBuf>,
    /// PM region size for a new region (engine).
    pub pm_size: Option<u64>,
    /// Engine profile for a new database.
    pub profile: stratakv::L0Kind,
    /// Index kind of new tables.
    pub table_index: stratakv::IndexKind,
    /// Engine memtable size.
    pub write_buffer_size: u64,
    /// Reply only after the write is durable.
    pub durability_sync: bool,
    /// Engine or memory.
    pub storage: StorageMode,
    /// Command log policy (memory).
    pub appendfsync: Option<FsyncPolicy>,
    /// Snapshot period in seconds, 0 = none (memory).
    pub snapshot_seconds: u64,
    /// Required password.
    pub requirepass: Option<String>,
    /// Client limit.
    pub maxclients: usize,
    /// Idle timeout in seconds (0: none).
    pub timeout: u64,
    /// Event-loop threads (at least 1).
    pub event_loops: usize,
    /// Nice value of the engine's background threads.
    pub background_nice: u32,
    /// Batch each pass's sends through io_uring (where allowed).
    pub io_uring: bool,
    /// Refuse clients from other than loopback while no password is set.
    pub protected_mode: bool,
    /// Request limits.
    pub limits: Limits,
    /// Databases SELECT can choose: 0..databases.
    pub databases: usize,
    /// Engine shards (0: one plain engine).
    pub shards: usize,
    /// Bytes of the engine store's read cache (0: none).
    pub read_cache_size: u64,
    /// A DRAM key directory in front of the engine store.
    pub key_directory: bool,
    /// Bytes of the engine's block cache (`None`: the engine's default).
    pub block_cache_size: Option<u64>,
    /// The TLS port, if any.
    pub tls: Option<TlsConfig>,
    /// Settings of the config file that CONFIG SET also takes (the tuning
    /// parameters), checked, in file order: applied at start.
    pub startup_tuning: Vec<(String, String)>,
    /// `notify-keyspace-events` of the config file, parsed.
    pub notify_keyspace_events: Option<u32>,
    /// Redis settings of the config file that mean nothing here (see
    /// [`REDIS_ONLY`]), for the warning at start.
    pub ignored: Vec<String>,
    /// The primary to follow from the start (`replicaof host port`).
    pub replicaof: Option<(String, u16)>,
    /// `masterauth`.
    pub masterauth: Option<String>,
    /// `masteruser`.
    pub masteruser: Option<String>,
    /// `replica-read-only`.
    pub replica_read_only: bool,
    /// The `--config` file, which CONFIG REWRITE writes back.
    pub config_file: Option<PathBuf>,
    /// Replication settings of the config file (`repl-backlog-size`,
    /// `min-replicas-to-write`, ...: see [`crate::replication::Settings`]),
    /// checked, in file order: applied at start.
    pub repl_settings: Vec<(String, String)>,
}

/// redis.conf settings with no meaning here (logging, RDB/AOF files,
/// replication, cluster, modules): a config file may hold them, and they
/// are listed at start and ignored; values that would change behaviour are
/// refused (see `refused_value`).
pub const REDIS_ONLY: &[&str] = &[
    "always-show-logo",
    "daemonize",
    "pidfile",
    "logfile",
    "syslog-enabled",
    "syslog-ident",
    "syslog-facility",
    "supervised",
    "set-proc-title",
    "proc-title-template",
    "crash-log-enabled",
    "crash-memcheck-enabled",
    "unixsocket",
    "unixsocketperm",
    "tcp-backlog",
    "tcp-keepalive",
    "save",
    "dbfilename",
    "rdbcompression",
    "rdbchecksum",
    "rdb-del-sync-files",
    "stop-writes-on-bgsave-error",
    "appendfilename",
    "appenddirname",
    "no-appendfsync-on-rewrite",
    "auto-aof-rewrite-percentage",
    "auto-aof-rewrite-min-size",
    "aof-load-truncated",
    "aof-use-rdb-preamble",
    "aof-timestamp-enabled",
    "aof-rewrite-incremental-fsync",
    "rdb-save-incremental-fsync",
    "repl-disable-tcp-nodelay",
    "replica-priority",
    "slave-priority",
    "cluster-enabled",
    "enable-protected-configs",
    "enable-debug-command",
    "enable-module-command",
    "propagation-error-behavior",
    "io-threads",
    "io-threads-do-reads",
    "jemalloc-bg-thread",
    "oom-score-adj",
    "disable-thp",
    "lfu-log-factor",
    "lfu-decay-time",
    "maxmemory",
    "maxmemory-policy",
    "maxmemory-samples",
    "acllog-max-len",
    "oom-score-adj-values",
];

/// Values of [`REDIS_ONLY`] settings that would change behaviour: refused.
fn refused_value(name: &str, value: &str) -> bool {
    let v = value.trim().to_ascii_lowercase();
    match name {
        "daemonize" | "cluster-enabled" => v == "yes",
        "maxmemory" => parse_bytes(&v) != Some(0),
        _ => false,
    }
}

/// Settings of a config file that set this server's own options (its
/// command-line flags).
const KNOWN: &[&str] = &[
    "port",
    "bind",
    "dir",
    "pm-dir",
    "pm-size",
    "write-buffer-size",
    "durability",
    "storage",
    "appendfsync",
    "appendonly",
    "snapshot-seconds",
    "requirepass",
    "maxclients",
    "timeout",
    "proto-max-bulk-len",
    "client-query-buffer-limit",
    "event-loops",
    "background-nice",
    "io-uring",
    "databases",
    "shards",
    "read-cache-size",
    "block-cache-size",
    "key-directory",
    "tls-port",
    "tls-cert-file",
    "tls-key-file",
    "tls-ca-cert-file",
    "tls-auth-clients",
    "profile",
    "table-index",
    "protected-mode",
    "replicaof",
    "slaveof",
    "masterauth",
    "masteruser",
    "replica-read-only",
    "slave-read-only",
];

/// Settings of a config file that take several values (the others take
/// exactly one, as in Redis).
const MULTI_VALUE: &[&str] =
    &["bind", "replicaof", "slaveof", "save", "client-output-buffer-limit", "oom-score-adj-values"];

/// Reads `name value...` lines in file order; `#` starts a comment; values
/// may be quoted. A setting this server knows that takes one value must
/// have exactly one.
pub fn read_conf_file(text: &str) -> anyhow::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for (no, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let args = crate::resp::parse::split_inline(line.as_bytes())
            .ok_or_else(|| anyhow!("line {}: unbalanced quotes", no + 1))?;
        let mut it = args.into_iter().map(|a| String::from_utf8_lossy(&a).into_owned());
        let name = it.next().unwrap_or_default().to_ascii_lowercase();
        let value: Vec<String> = it.collect();
        let single =
            KNOWN.contains(&name.as_str()) || crate::tuning::Tuning::knows(&name) || name == "notify-keyspace-events";
        if value.len() != 1 && single && !MULTI_VALUE.contains(&name.as_str()) {
            bail!("line {}: '{name}' takes one value (wrong number of arguments)", no + 1);
        }
        out.push((name, value.join(" ")));
    }
    Ok(out)
}

impl Config {
    /// Resolves flags (and the file they name) into a configuration.
    pub fn from_flags(f: Flags) -> anyhow::Result<Config> {
        let config_file = f.config.clone();
        let lines = match &f.config {
            Some(p) => {
                let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
                read_conf_file(&text).with_context(|| format!("in {}", p.display()))?
            }
            None => Vec::new(),
        };
        // A setting given twice: the last line wins, as in Redis.
        let file: HashMap<String, String> = lines.iter().cloned().collect();
        let known = KNOWN;
        let mut startup_tuning = Vec::new();
        let mut notify_keyspace_events = None;
        let mut ignored: Vec<String> = Vec::new();
        let mut save_seconds = None;
        let mut repl_settings = Vec::new();
        for (name, value) in &lines {
            let value = value.as_str();
            if known.contains(&name.as_str()) {
                continue;
            }
            if name == "notify-keyspace-events" {
                let flags = crate::pubsub::events::parse(value.as_bytes())
                    .ok_or_else(|| anyhow!("notify-keyspace-events: invalid event class in '{value}'"))?;
                notify_keyspace_events = Some(flags);
            } else if crate::tuning::Tuning::knows(name) {
                let v = crate::tuning::Tuning::check(name, value.as_bytes())
                    .map_err(|e| anyhow!("{name}: {}", e.trim_start_matches("ERR ")))?;
                startup_tuning.push((name.clone(), v));
            } else if crate::replication::Settings::knows(name) {
                crate::replication::Settings::check(name, value).map_err(|e| anyhow!("{name}: {e}"))?;
                repl_settings.push((name.clone(), value.to_string()));
            } else if REDIS_ONLY.contains(&name.as_str()) {
                if refused_value(name, value) {
                    bail!("'{name} {value}' is not supported by strata-server");
                }
                if name == "save" {
                    // `save <seconds> <changes> ...`: the shortest period.
                    let secs = value.split_whitespace().step_by(2).filter_map(|s| s.parse::<u64>().ok()).min();
                    save_seconds = Some(secs.unwrap_or(0));
                }
                if !ignored.contains(name) {
                    ignored.push(name.clone());
                }
            } else {
                bail!("unknown configuration setting '{name}'");
            }
        }
        let pick = |cli: Option<String>, name: &str| cli.or_else(|| file.get(name).cloned());
        let num = |v: Option<String>, name: &str| -> anyhow::Result<Option<u64>> {
            v.map(|s| s.trim().parse::<u64>().map_err(|_| anyhow!("{name}: not a number: {s}"))).transpose()
        };
        let bytes = |v: Option<String>, name: &str| -> anyhow::Result<Option<u64>> {
            v.map(|s| parse_bytes(&s).ok_or_else(|| anyhow!("{name}: not a size: {s}"))).transpose()
        };

        let port = num(pick(f.port.map(|p| p.to_string()), "port"), "port")?.unwrap_or(6379);
        let port = u16::try_from(port).map_err(|_| anyhow!("port out of range: {port}"))?;
        let path = |p: Option<PathBuf>| p.map(|p| p.display().to_string());
        let tls = TlsConfig::resolve(
            num(pick(f.tls_port.map(|p| p.to_string()), "tls-port"), "tls-port")?,
            pick(path(f.tls_cert_file), "tls-cert-file"),
            pick(path(f.tls_key_file), "tls-key-file"),
            pick(path(f.tls_ca_cert_file), "tls-ca-cert-file"),
            pick(f.tls_auth_clients, "tls-auth-clients"),
        )?;
        if port == 0 && tls.is_none() {
            bail!("--port 0 needs --tls-port (nothing to listen on)");
        }
        let bind = pick(f.bind, "bind").unwrap_or_else(|| "127.0.0.1".into());
        // redis.conf allows several addresses; we listen on the first.
        let bind = bind.split_whitespace().next().unwrap_or("127.0.0.1").to_string();
        let dir = pick(f.dir.map(|d| d.display().to_string()), "dir").unwrap_or_else(|| "./strata-data".into());
        let pm_dir = pick(f.pm_dir.map(|d| d.display().to_string()), "pm-dir").map(PathBuf::from);
        let pm_size = bytes(pick(f.pm_size, "pm-size"), "pm-size")?;
        let profile = match pick(f.profile, "profile") {
            None => stratakv::L0Kind::Matrix,
            Some(p) => stratakv::L0Kind::parse(&p.to_ascii_lowercase())
                .ok_or_else(|| anyhow!("profile must be matrix, sstable, single-level or pm-only, not {p}"))?,
        };
        let table_index = match pick(f.table_index, "table-index").as_deref().map(str::to_ascii_lowercase).as_deref() {
            None | Some("binary") => stratakv::IndexKind::Binary,
            Some("learned") => stratakv::IndexKind::Learned,
            Some(other) => bail!("table-index must be binary or learned, not {other}"),
        };
        let write_buffer_size =
            bytes(pick(f.write_buffer_size, "write-buffer-size"), "write-buffer-size")?.unwrap_or(DEFAULT_WRITE_BUFFER);
        let durability_sync = match pick(f.durability, "durability").as_deref().map(str::to_ascii_lowercase).as_deref()
        {
            None | Some("default") => false,
            Some("sync") => true,
            Some(other) => bail!("durability must be sync or default, not {other}"),
        };
        let storage = match pick(f.storage, "storage").as_deref().map(str::to_ascii_lowercase).as_deref() {
            None | Some("engine") => StorageMode::Engine,
            Some("memory") => StorageMode::Memory,
            Some(other) => bail!("storage must be engine or memory, not {other}"),
        };
        let io_uring = match pick(f.io_uring, "io-uring").as_deref().map(str::to_ascii_lowercase).as_deref() {
            None | Some("yes") => true,
            Some("no") => false,
            Some(other) => bail!("io-uring must be yes or no, not {other}"),
        };
        let protected_mode =
            match pick(f.protected_mode, "protected-mode").as_deref().map(str::to_ascii_lowercase).as_deref() {
                None | Some("yes") => true,
                Some("no") => false,
                Some(other) => bail!("protected-mode must be yes or no, not {other}"),
            };
        let appendonly = match pick(f.appendonly, "appendonly").as_deref().map(str::to_ascii_lowercase).as_deref() {
            None => None,
            Some("yes") => Some(true),
            Some("no") => Some(false),
            Some(other) => bail!("appendonly must be yes or no, not {other}"),
        };
        let mut appendfsync = match pick(f.appendfsync, "appendfsync") {
            None => None,
            Some(s) => {
                Some(FsyncPolicy::parse(&s).ok_or_else(|| anyhow!("appendfsync must be always, everysec or no"))?)
            }
        };
        match appendonly {
            Some(true) if appendfsync.is_none() => appendfsync = Some(FsyncPolicy::EverySec),
            Some(false) => appendfsync = None,
            _ => {}
        }
        let snapshot_given =
            num(pick(f.snapshot_seconds.map(|s| s.to_string()), "snapshot-seconds"), "snapshot-seconds")?;
        // redis.conf's `save` is the memory store's snapshot period when
        // no `snapshot-seconds` is given; the engine keeps everything anyway.
        let snapshot_seconds = match (snapshot_given, storage) {
            (Some(s), _) => s,
            (None, StorageMode::Memory) => save_seconds.unwrap_or(0),
            (None, StorageMode::Engine) => 0,
        };
        if storage == StorageMode::Memory && snapshot_given.is_none() && save_seconds.is_some() {
            ignored.retain(|n| n != "save");
        }
        if storage == StorageMode::Engine && (appendfsync.is_some() || snapshot_seconds > 0) {
            bail!("--appendfsync/--appendonly/--snapshot-seconds apply to --storage memory only");
        }
        if durability_sync && storage == StorageMode::Memory && appendfsync != Some(FsyncPolicy::Always) {
            // Otherwise replies would claim a durability nothing provides.
            bail!("--durability sync with --storage memory needs --appendfsync always");
        }
        let requirepass = pick(f.requirepass, "requirepass").filter(|p| !p.is_empty());
        let maxclients =
            num(pick(f.maxclients.map(|m| m.to_string()), "maxclients"), "maxclients")?.unwrap_or(10_000) as usize;
        let timeout = num(pick(f.timeout.map(|t| t.to_string()), "timeout"), "timeout")?.unwrap_or(0);
        let event_loops = num(pick(f.event_loops.map(|n| n.to_string()), "event-loops"), "event-loops")?
            .unwrap_or(DEFAULT_EVENT_LOOPS as u64);
        if !(1..=64).contains(&event_loops) {
            bail!("event-loops must be between 1 and 64");
        }
        let background_nice =
            num(pick(f.background_nice.map(|n| n.to_string()), "background-nice"), "background-nice")?
                .unwrap_or(u64::from(DEFAULT_BACKGROUND_NICE));
        if background_nice > 19 {
            bail!("background-nice must be between 0 and 19");
        }
        let databases = num(pick(f.databases.map(|n| n.to_string()), "databases"), "databases")?;
        let shards = num(pick(f.shards.map(|n| n.to_string()), "shards"), "shards")?.unwrap_or(0);
        let read_cache_size =
            bytes(pick(f.read_cache_size, "read-cache-size"), "read-cache-size")?.unwrap_or(DEFAULT_READ_CACHE);
        let block_cache_size = bytes(pick(f.block_cache_size, "block-cache-size"), "block-cache-size")?;
        let key_directory =
            match pick(f.key_directory, "key-directory").as_deref().map(str::to_ascii_lowercase).as_deref() {
                None | Some("yes") => storage == StorageMode::Engine,
                Some("no") => false,
                Some(other) => bail!("key-directory must be yes or no, not {other}"),
            };
        if shards > 256 {
            bail!("shards must be at most 256");
        }
        if shards > 0 && storage == StorageMode::Memory {
            bail!("--shards applies to --storage engine only");
        }
        let databases = match (storage, databases) {
            (_, Some(0)) => bail!("databases must be at least 1"),
            (StorageMode::Engine, None | Some(1)) if shards > 0 => 1,
            (StorageMode::Engine, Some(_)) if shards > 0 => {
                bail!("--shards has one database (db 0): databases must be 1")
            }
            (StorageMode::Engine, Some(n)) if n > MAX_DATABASES => bail!("databases must be at most {MAX_DATABASES}"),
            (StorageMode::Engine, n) => n.unwrap_or(DEFAULT_DATABASES) as usize,
            (StorageMode::Memory, None | Some(1)) => 1,
            (StorageMode::Memory, Some(_)) => bail!("--storage memory has one database (db 0): databases must be 1"),
        };
        let replicaof = match pick(f.replicaof, "replicaof").or_else(|| file.get("slaveof").cloned()) {
            None => None,
            Some(v) if v.trim().eq_ignore_ascii_case("no one") => None,
            Some(v) => {
                let mut it = v.split_whitespace();
                let (Some(host), Some(port), None) = (it.next(), it.next(), it.next()) else {
                    bail!("replicaof takes a host and a port, not '{v}'");
                };
                let port: u16 = port.parse().map_err(|_| anyhow!("replicaof: bad port {port}"))?;
                Some((host.to_string(), port))
            }
        };
        let masterauth = pick(f.masterauth, "masterauth").filter(|p| !p.is_empty());
        let masteruser = pick(f.masteruser, "masteruser").filter(|p| !p.is_empty());
        let read_only = pick(f.replica_read_only, "replica-read-only").or_else(|| file.get("slave-read-only").cloned());
        let replica_read_only = match read_only.as_deref().map(str::to_ascii_lowercase).as_deref() {
            None | Some("yes") => true,
            Some("no") => false,
            Some(other) => bail!("replica-read-only must be yes or no, not {other}"),
        };
        let mut limits = Limits::default();
        if let Some(b) = bytes(pick(f.proto_max_bulk_len, "proto-max-bulk-len"), "proto-max-bulk-len")? {
            limits.max_bulk_len = b as usize;
        }
        if let Some(b) =
            bytes(pick(f.client_query_buffer_limit, "client-query-buffer-limit"), "client-query-buffer-limit")?
        {
            limits.max_query_buffer = b as usize;
        }
        Ok(Config {
            port,
            bind,
            dir: PathBuf::from(dir),
            pm_dir,
            pm_size,
            profile,
            table_index,
            write_buffer_size,
            durability_sync,
            storage,
            appendfsync,
            snapshot_seconds,
            requirepass,
            maxclients,
            timeout,
            event_loops: event_loops as usize,
            background_nice: background_nice as u32,
            io_uring,
            protected_mode,
            limits,
            databases,
            shards: shards as usize,
            read_cache_size,
            key_directory,
            block_cache_size,
            tls,
            startup_tuning,
            notify_keyspace_events,
            ignored,
            replicaof,
            masterauth,
            masteruser,
            replica_read_only,
            config_file,
            repl_settings,
        })
    }

    /// `(name, value)` pairs CONFIG GET can report.
    pub fn params(&self) -> Vec<(&'static str, String)> {
        let save = if self.snapshot_seconds > 0 { format!("{} 1", self.snapshot_seconds) } else { String::new() };
        vec![
            ("port", self.port.to_string()),
            ("tls-port", self.tls.as_ref().map_or(0, |t| t.port).to_string()),
            ("bind", self.bind.clone()),
            ("dir", self.dir.display().to_string()),
            ("save", save),
            ("appendonly", if self.appendfsync.is_some() { "yes" } else { "no" }.into()),
            ("appendfsync", self.appendfsync.map(|p| p.name()).unwrap_or("everysec").into()),
            ("maxclients", self.maxclients.to_string()),
            ("timeout", self.timeout.to_string()),
            ("event-loops", self.event_loops.to_string()),
            ("background-nice", self.background_nice.to_string()),
            ("io-uring", if self.io_uring { "yes" } else { "no" }.into()),
            ("databases", self.databases.to_string()),
            ("shards", self.shards.to_string()),
            ("read-cache-size", self.read_cache_size.to_string()),
            ("key-directory", if self.key_directory { "yes" } else { "no" }.into()),
            (
                "block-cache-size",
                self.block_cache_size.unwrap_or(stratakv::Options::default().block_cache_bytes).to_string(),
            ),
            ("maxmemory", "0".into()),
            ("maxmemory-policy", "noeviction".into()),
            ("proto-max-bulk-len", self.limits.max_bulk_len.to_string()),
            ("client-query-buffer-limit", self.limits.max_query_buffer.to_string()),
            (
                "storage",
                match self.storage {
                    StorageMode::Engine => "engine",
                    StorageMode::Memory => "memory",
                }
                .into(),
            ),
            ("durability", if self.durability_sync { "sync" } else { "default" }.into()),
            ("snapshot-seconds", self.snapshot_seconds.to_string()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse_bytes("512mb"), Some(512 << 20));
        assert_eq!(parse_bytes("1gb"), Some(1 << 30));
        assert_eq!(parse_bytes("100"), Some(100));
        assert_eq!(parse_bytes("1x"), None);
    }

    #[test]
    fn file_and_flags() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("strata.conf");
        std::fs::write(&p, "# comment\nport 7000\nstorage memory\nappendonly yes\nrequirepass \"s e\"\n").unwrap();
        let f = Flags { config: Some(p.clone()), port: Some(7001), ..Flags::default() };
        let c = Config::from_flags(f).unwrap();
        assert_eq!(c.port, 7001);
        assert_eq!(c.storage, StorageMode::Memory);
        assert_eq!(c.appendfsync, Some(FsyncPolicy::EverySec));
        assert_eq!(c.requirepass.as_deref(), Some("s e"));
        std::fs::write(&p, "bogus 1\n").unwrap();
        assert!(Config::from_flags(Flags { config: Some(p), ..Flags::default() }).is_err());
    }

    #[test]
    fn replicaof_and_masterauth_in_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("redis.conf");
        let text = "replicaof 10.0.0.5 6380\nmasterauth s3\nmasteruser u\nreplica-read-only no\n";
        std::fs::write(&p, text).unwrap();
        let c = Config::from_flags(Flags { config: Some(p.clone()), ..Flags::default() }).unwrap();
        assert_eq!(c.replicaof, Some(("10.0.0.5".into(), 6380)));
        assert_eq!((c.masterauth.as_deref(), c.masteruser.as_deref()), (Some("s3"), Some("u")));
        assert!(!c.replica_read_only);
        let none = Config::from_flags(Flags::default()).unwrap();
        assert_eq!(none.replicaof, None);
        assert!(none.replica_read_only);
        std::fs::write(&p, "replicaof 10.0.0.5\n").unwrap();
        assert!(Config::from_flags(Flags { config: Some(p), ..Flags::default() }).is_err());
    }

    #[test]
    fn replication_settings_in_the_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.conf");
        let text = "repl-backlog-size 16kb\nmin-slaves-to-write 1\nclient-output-buffer-limit replica 1mb 0 0\n";
        std::fs::write(&p, text).unwrap();
        let c = Config::from_flags(Flags { config: Some(p.clone()), ..Flags::default() }).unwrap();
        assert_eq!(c.repl_settings.len(), 3);
        assert_eq!(c.repl_settings[0], ("repl-backlog-size".into(), "16kb".into()));
        assert!(c.ignored.is_empty());
        std::fs::write(&p, "repl-backlog-size lots\n").unwrap();
        assert!(Config::from_flags(Flags { config: Some(p), ..Flags::default() }).is_err());
    }

    #[test]
    fn background_nice_defaults_to_10_and_stays_in_range() {
        assert_eq!(Config::from_flags(Flags::default()).unwrap().background_nice, DEFAULT_BACKGROUND_NICE);
        let f = Flags { background_nice: Some(0), ..Flags::default() };
        assert_eq!(Config::from_flags(f).unwrap().background_nice, 0);
        assert!(Config::from_flags(Flags { background_nice: Some(20), ..Flags::default() }).is_err());
    }

    #[test]
    fn durability_sync_on_memory_needs_appendfsync_always() {
        let sync = |fsync: Option<&str>| Flags {
            storage: Some("memory".into()),
            durability: Some("sync".into()),
            appendfsync: fsync.map(Into::into),
            ..Flags::default()
        };
        assert!(Config::from_flags(sync(Some("always"))).is_ok());
        assert!(Config::from_flags(sync(Some("everysec"))).is_err());
        assert!(Config::from_flags(sync(Some("no"))).is_err());
        assert!(Config::from_flags(sync(None)).is_err());
    }

    #[test]
    fn databases_default_to_16_on_the_engine_and_1_in_memory() {
        assert_eq!(Config::from_flags(Flags::default()).unwrap().databases, 16);
        assert_eq!(Config::from_flags(Flags { databases: Some(4), ..Flags::default() }).unwrap().databases, 4);
        assert!(Config::from_flags(Flags { databases: Some(0), ..Flags::default() }).is_err());
        let mem = |n: Option<u64>| Flags { storage: Some("memory".into()), databases: n, ..Flags::default() };
        assert_eq!(Config::from_flags(mem(None)).unwrap().databases, 1);
        assert!(Config::from_flags(mem(Some(2))).is_err());
        let sharded = |n: Option<u64>| Flags { shards: Some(2), databases: n, ..Flags::default() };
        assert_eq!(Config::from_flags(sharded(None)).unwrap().databases, 1);
        assert!(Config::from_flags(sharded(Some(4))).is_err());
        let mem_sharded = Flags { shards: Some(2), storage: Some("memory".into()), ..Flags::default() };
        assert!(Config::from_flags(mem_sharded).is_err());
    }

    #[test]
    fn engine_refuses_memory_settings() {
        let f = Flags { appendfsync: Some("always".into()), ..Flags::default() };
        assert!(Config::from_flags(f).is_err());
    }

    #[test]
    fn tls_flags() {
        let tls = |port, cert: bool, ca: bool, auth: Option<&str>| Flags {
            port: Some(port),
            tls_port: Some(6380),
            tls_cert_file: cert.then(|| "c.pem".into()),
            tls_key_file: cert.then(|| "k.pem".into()),
            tls_ca_cert_file: ca.then(|| "ca.pem".into()),
            tls_auth_clients: auth.map(Into::into),
            ..Flags::default()
        };
        assert!(Config::from_flags(tls(6379, false, false, None)).is_err(), "a TLS port needs a certificate");
        assert!(Config::from_flags(Flags { port: Some(0), ..Flags::default() }).is_err(), "nothing to listen on");
        let c = Config::from_flags(tls(0, true, true, None)).unwrap();
        assert_eq!(c.port, 0);
        assert_eq!(c.tls.as_ref().map(|t| (t.port, t.auth_clients)), Some((6380, TlsAuthClients::Yes)));
        let c = Config::from_flags(tls(6379, true, false, Some("yes"))).unwrap();
        assert_eq!(c.tls.map(|t| t.auth_clients), Some(TlsAuthClients::No), "no CA: no client certificates");
        let c = Config::from_flags(tls(6379, true, true, Some("optional"))).unwrap();
        assert_eq!(c.tls.map(|t| t.auth_clients), Some(TlsAuthClients::Optional));
        assert!(Config::from_flags(tls(6379, true, true, Some("maybe"))).is_err());
    }
}
