//! `strata-server`: a Redis-protocol server over the StrataKV engine.
//!
//! ```text
//! strata-server [--port 6379] [--bind 127.0.0.1] [--dir ./strata-data] [--pm-dir DIR]
//!               [--durability sync|default] [--storage engine|memory]
//!               [--appendfsync always|everysec|no] [--snapshot-seconds N]
//!               [--requirepass PW] [--maxclients N] [--timeout SECS] [--event-loops N]
//!               [--databases N] [--config FILE]
//! ```

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Context;
use clap::Parser;
use strata_server::cmd::Shared;
use strata_server::config::{Config, Flags, StorageMode};
use strata_server::net::Loops;
use strata_server::store::cache::CachedStore;
use strata_server::store::directory::DirectoryStore;
use strata_server::store::engine::EngineStore;
use strata_server::store::memory::{MemoryPersistence, MemoryStore};
use strata_server::store::sharded::ShardedStore;
use strata_server::store::Backend;
use strata_server::{expiry, server, shutdown};

/// mimalloc: a server allocates and frees small buffers (keys, values,
/// replies) for every command; glibc malloc showed ~5% of a SET profile.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn open_store(cfg: &Config) -> anyhow::Result<Arc<dyn Backend>> {
    std::fs::create_dir_all(&cfg.dir).with_context(|| format!("creating {}", cfg.dir.display()))?;
    Ok(match cfg.storage {
        StorageMode::Engine => {
            let mut opts = stratakv::Options {
                pm_dir: cfg.pm_dir.clone(),
                write_buffer_size: cfg.write_buffer_size as usize,
                background_nice: cfg.background_nice as i32,
                // Collection scans (HGETALL, SMEMBERS, ZRANGEBYSCORE,
                // LRANGE) skip the matrix rows that hold none of their members.
                prefix_extractor: Some(Arc::new(strata_server::keyspace::MemberPrefix)),
                ..stratakv::Options::default()
            };
            if let Some(size) = cfg.pm_size {
                opts.pm_size = size;
            }
            if let Some(size) = cfg.block_cache_size {
                opts.block_cache_bytes = size;
            }
            opts.l0 = cfg.profile;
            opts.table_index = cfg.table_index;
            let store: Arc<dyn Backend> = if cfg.shards > 0 {
                let so = stratakv::ShardedOptions::new(cfg.shards, opts);
                Arc::new(ShardedStore::open(&cfg.dir, so).map_err(|e| anyhow::anyhow!("{e}"))?)
            } else {
                Arc::new(EngineStore::open(&cfg.dir, opts).map_err(|e| anyhow::anyhow!("{e}"))?)
            };
            let store: Arc<dyn Backend> = if cfg.read_cache_size == 0 {
                store
            } else {
                Arc::new(CachedStore::new(store, cfg.read_cache_size, cfg.databases))
            };
            if !cfg.key_directory {
                return Ok(store);
            }
            Arc::new(DirectoryStore::new(store, cfg.databases))
        }
        StorageMode::Memory => {
            let p = MemoryPersistence { appendfsync: cfg.appendfsync, snapshot_seconds: cfg.snapshot_seconds };
            Arc::new(MemoryStore::open(&cfg.dir, p).map_err(|e| anyhow::anyhow!("{e}"))?)
        }
    })
}

fn run() -> anyhow::Result<()> {
    let cfg = Config::from_flags(Flags::parse())?;
    let store = open_store(&cfg)?;
    let shared = Arc::new(Shared::new(store.clone(), cfg.clone()).map_err(|e| anyhow::anyhow!("{e}"))?);
    // The runtime only accepts connections and handles signals; the event
    // loops serve the connections.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the runtime")?;
    let tls_config = cfg.tls.as_ref().map(strata_server::tls::server_config).transpose()?;
    let bind = |port: u16| -> anyhow::Result<tokio::net::TcpListener> {
        let addr = format!("{}:{}", cfg.bind, port);
        rt.block_on(tokio::net::TcpListener::bind(&addr)).with_context(|| format!("listening on {addr}"))
    };
    // The ports open only after recovery, so a client that connects is served.
    // Port 0 with a TLS port: TLS only, as Redis.
    let plain = if cfg.port == 0 { None } else { Some(bind(cfg.port)?) };
    let tls = match (&cfg.tls, tls_config) {
        (Some(t), Some(c)) => Some((bind(t.port)?, c)),
        _ => None,
    };
    let mut addr = if cfg.port == 0 { String::new() } else { format!("{}:{}", cfg.bind, cfg.port) };
    if let Some(t) = &cfg.tls {
        addr.push_str(&format!("{}{}:{} (TLS)", if addr.is_empty() { "" } else { " and " }, cfg.bind, t.port));
    }
    let stop_sweeper = Arc::new(AtomicBool::new(false));
    let sweeper = expiry::spawn_sweeper(shared.clone(), stop_sweeper.clone()).context("starting the expiry thread")?;
    if !cfg.ignored.is_empty() {
        eprintln!("strata-server: ignoring Redis settings that do not apply here: {}", cfg.ignored.join(", "));
    }
    // Worded as Redis logs it ("PID: ", "Ready to accept connections"),
    // which scripts and test harnesses wait for.
    eprintln!(
        "strata-server {} PID: {} Ready to accept connections on {addr} (storage {:?}, durability {}, dir {})",
        env!("CARGO_PKG_VERSION"),
        std::process::id(),
        cfg.storage,
        if cfg.durability_sync { "sync" } else { "default" },
        cfg.dir.display()
    );
    strata_server::cmd::install_replication(&shared);
    if let Some((host, port)) = &cfg.replicaof {
        shared.replication.follow(host.clone(), *port).map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    let mut loops = Loops::start(&shared, cfg.event_loops).context("starting the event loops")?;
    rt.spawn(shutdown::on_signals(shared.clone()));
    rt.block_on(server::run(shared.clone(), plain, tls, &mut loops));
    // Requests already read are answered; then the loops exit.
    loops.stop(std::time::Duration::from_secs(30));
    // A script still running on the script thread (SHUTDOWN NOSAVE during
    // a busy script) is stopped and its writes dropped before the store
    // shuts down.
    shared.scripts.stop_all(std::time::Duration::from_secs(10));
    // The replication thread stops applying before the store shuts down.
    shared.replication.stop();
    eprintln!("strata-server shutting down: making data durable");
    stop_sweeper.store(true, Ordering::Release);
    let _ = sweeper.join();
    rt.shutdown_timeout(std::time::Duration::from_secs(5));
    // A BGSAVE still writing finishes first (its snapshot is whole).
    while shared.bgsave_running.load(Ordering::Acquire) {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    store.shutdown(shared.shutdown_save()).map_err(|e| anyhow::anyhow!("{e}"))?;
    drop(shared);
    drop(store);
    eprintln!("strata-server stopped");
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("strata-server: {e:#}");
            ExitCode::FAILURE
        }
    }
}
