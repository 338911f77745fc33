//! Server commands: CONFIG, INFO, DBSIZE, COMMAND, TIME, SAVE/BGSAVE,
//! LASTSAVE, SHUTDOWN, FLUSHDB, FLUSHALL.

use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::{arg, is, wrong_args, CmdResult, Ctx, Session, Shared};
use crate::glob::glob_match;
use crate::resp::Reply;

pub(crate) fn config(shared: &Shared, _: &mut Session, args: &[Bytes]) -> Reply {
    let sub = arg(args, 1);
    if is(sub, "get") {
        if args.len() < 3 {
            return wrong_args("config|get");
        }
        let mut out = Vec::new();
        let mut params: Vec<(&str, Bytes)> = shared
            .config
            .params()
            .into_iter()
            .chain(shared.tuning.params())
            .map(|(n, v)| (n, Bytes::from(v)))
            .collect();
        params.push(("notify-keyspace-events", crate::pubsub::events::format(shared.pubsub.notify_flags()).into()));
        // Set at run time too (the password binary safe).
        params.push(("requirepass", shared.requirepass.read().clone().unwrap_or_default()));
        let protected = if shared.protected_mode.load(Ordering::Relaxed) { "yes" } else { "no" };
        params.push(("protected-mode", Bytes::from_static(protected.as_bytes())));
        let read_only = if shared.replication.read_only() { "yes" } else { "no" };
        params.push(("replica-read-only", Bytes::from_static(read_only.as_bytes())));
        params.push(("slave-read-only", Bytes::from_static(read_only.as_bytes())));
        let (user, pass) = shared.replication.auth();
        params.push(("masteruser", Bytes::from(user.unwrap_or_default())));
        params.push(("masterauth", Bytes::from(pass.unwrap_or_default())));
        let of = shared.replication.role();
        let of = match of {
            crate::replication::RoleView::Replica { host, port, .. } => format!("{host} {port}"),
            crate::replication::RoleView::Primary { .. } => String::new(),
        };
        params.push(("replicaof", Bytes::from(of)));
        params.extend(shared.replication.settings.params().into_iter().map(|(n, v)| (n, Bytes::from(v))));
        for (name, value) in params {
            if args.iter().skip(2).any(|p| glob_match(&p.to_ascii_lowercase(), name.as_bytes())) {
                out.push((Reply::bulk(name), Reply::Bulk(value)));
            }
        }
        Reply::Map(out)
    } else if is(sub, "resetstat") {
        shared.stats.total_commands.store(0, Ordering::Relaxed);
        shared.stats.total_connections.store(0, Ordering::Relaxed);
        shared.stats.rejected_connections.store(0, Ordering::Relaxed);
        shared.stats.expired_keys.store(0, Ordering::Relaxed);
        shared.cmdstats.reset();
        shared.stats.total_error_replies.store(0, Ordering::Relaxed);
        shared.stats.errors.lock().clear();
        Reply::ok()
    } else if is(sub, "set") {
        config_set(shared, args)
    } else if is(sub, "rewrite") {
        if args.len() != 2 {
            return wrong_args("config|rewrite");
        }
        config_rewrite(shared)
    } else {
        Reply::err(format!("ERR unknown subcommand '{}'. Try CONFIG HELP.", String::from_utf8_lossy(sub)))
    }
}

/// CONFIG REWRITE: writes the `--config` file back with the replication
/// setting as it is now (what Sentinel changes at a failover): every
/// `replicaof`/`slaveof` line goes, and `replicaof host port` is appended
/// while a replica; the other lines are kept as they are. Without a config
/// file it is Redis's error.
fn config_rewrite(shared: &Shared) -> Reply {
    let Some(path) = shared.config.config_file.as_ref() else {
        return Reply::err("ERR The server is running without a config file");
    };
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => return Reply::err(format!("ERR Rewriting config file: {e}")),
    };
    let mut out = String::new();
    for line in text.lines() {
        let first = line.split_whitespace().next().unwrap_or("").to_ascii_lowercase();
        if first == "replicaof" || first == "slaveof" {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    if let crate::replication::RoleView::Replica { host, port, .. } = shared.replication.role() {
        out.push_str(&format!("replicaof {host} {port}\n"));
    }
    let tmp = path.with_extension("rewrite.tmp");
    let written = std::fs::write(&tmp, out.as_bytes())
        .and_then(|()| std::fs::File::open(&tmp).and_then(|f| f.sync_all()))
        .and_then(|()| std::fs::rename(&tmp, path));
    match written {
        Ok(()) => Reply::ok(),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Reply::err(format!("ERR Rewriting config file: {e}"))
        }
    }
}

/// CONFIG SET name value [name value ...]: all or nothing, as Redis 7.
fn config_set(shared: &Shared, args: &[Bytes]) -> Reply {
    let pairs = args.get(2..).unwrap_or_default();
    if pairs.is_empty() || pairs.len() % 2 != 0 {
        return wrong_args("config|set");
    }
    let mut checked = Vec::new();
    let mut notify = None;
    let mut password: Option<Bytes> = None;
    let mut protected: Option<bool> = None;
    let mut replica_ro: Option<bool> = None;
    let mut master_auth: Vec<(bool, String)> = Vec::new();
    let mut repl: Vec<(String, String)> = Vec::new();
    // Duplicates first, before any value is looked at, as Redis checks.
    let mut seen: Vec<String> = Vec::new();
    for pair in pairs.chunks(2) {
        let name = String::from_utf8_lossy(arg(pair, 0)).to_ascii_lowercase();
        if seen.contains(&name) {
            return Reply::err(format!(
                "ERR CONFIG SET failed (possibly related to argument '{name}') - duplicate parameter"
            ));
        }
        seen.push(name);
    }
    for pair in pairs.chunks(2) {
        let name = String::from_utf8_lossy(arg(pair, 0)).to_ascii_lowercase();
        if name == "requirepass" {
            // The default user's password; empty: none (nopass). Clients
            // already authenticated stay so, as in Redis.
            password = Some(pair.get(1).cloned().unwrap_or_default());
            continue;
        }
        if name == "protected-mode" {
            let v = arg(pair, 1);
            protected = Some(match () {
                _ if v.eq_ignore_ascii_case(b"yes") => true,
                _ if v.eq_ignore_ascii_case(b"no") => false,
                _ => {
                    return Reply::err(
                        "ERR CONFIG SET failed (possibly related to argument 'protected-mode') - argument must be \
                         'yes' or 'no'",
                    )
                }
            });
            continue;
        }
        if name == "replica-read-only" || name == "slave-read-only" {
            let v = arg(pair, 1);
            replica_ro = Some(match () {
                _ if v.eq_ignore_ascii_case(b"yes") => true,
                _ if v.eq_ignore_ascii_case(b"no") => false,
                _ => {
                    return Reply::err(format!(
                        "ERR CONFIG SET failed (possibly related to argument '{name}') - argument must be 'yes' or \
                         'no'"
                    ))
                }
            });
            continue;
        }
        if crate::replication::Settings::knows(&name) {
            let v = String::from_utf8_lossy(arg(pair, 1)).into_owned();
            if let Err(e) = crate::replication::Settings::check(&name, &v) {
                return Reply::err(format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {e}"));
            }
            repl.push((name, v));
            continue;
        }
        if name == "masterauth" || name == "masteruser" {
            master_auth.push((name == "masteruser", String::from_utf8_lossy(arg(pair, 1)).into_owned()));
            continue;
        }
        if name == "notify-keyspace-events" {
            match crate::pubsub::events::parse(arg(pair, 1)) {
                Some(f) => notify = Some(f),
                None => {
                    return Reply::err(
                        "ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - Invalid \
                         event class character. Use 'Ag$lshzxeKEtmdn'.",
                    )
                }
            }
            continue;
        }
        // A setting of the server's own, set to the value it has: nothing
        // to change (test harnesses restore what CONFIG GET showed).
        let own = shared.config.params().into_iter().find(|(n, _)| *n == name);
        if let Some((_, v)) = own.filter(|_| !crate::tuning::Tuning::knows(&name)) {
            if v.as_bytes() == arg(pair, 1) {
                continue;
            }
            // Set at start only (flags or config file).
            return Reply::err(format!(
                "ERR CONFIG SET failed (possibly related to argument '{name}') - can't set immutable config"
            ));
        }
        match crate::tuning::Tuning::check(&name, arg(pair, 1)) {
            Ok(v) => checked.push((name, v)),
            Err(e) => return Reply::err(e),
        }
    }
    shared.tuning.set(checked);
    if let Some(p) = password {
        *shared.requirepass.write() = if p.is_empty() { None } else { Some(p) };
    }
    if let Some(p) = protected {
        shared.protected_mode.store(p, Ordering::Relaxed);
    }
    if let Some(f) = notify {
        shared.pubsub.notify.store(f, Ordering::Relaxed);
    }
    if let Some(on) = replica_ro {
        shared.replication.set_read_only(on);
    }
    for (user, v) in master_auth {
        shared.replication.set_auth(user, &v);
    }
    for (name, v) in repl {
        let _ = shared.replication.settings.set(&name, &v);
        if name == "repl-backlog-size" {
            shared.replication.resize_backlog();
        } else if name == "client-output-buffer-limit" {
            shared.replication.relimit_replicas();
        }
    }
    Reply::ok()
}

fn section(out: &mut String, title: &str, fields: &[(String, String)]) {
    if !out.is_empty() {
        out.push_str("\r\n");
    }
    out.push_str(&format!("# {title}\r\n"));
    for (k, v) in fields {
        out.push_str(&format!("{k}:{v}\r\n"));
    }
}

fn human(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= (1u64 << 30) as f64 {
        format!("{:.2}G", b / (1u64 << 30) as f64)
    } else if b >= (1u64 << 20) as f64 {
        format!("{:.2}M", b / (1u64 << 20) as f64)
    } else if b >= 1024.0 {
        format!("{:.2}K", b / 1024.0)
    } else {
        format!("{bytes}B")
    }
}

/// The INFO text for the requested sections.
pub fn info_text(shared: &Shared, wanted: &[String]) -> String {
    // Redis 7's section groups: "default" (also no argument) is every
    // section but commandstats and latencystats, which "all" and
    // "everything" add.
    let default = wanted.is_empty() || wanted.iter().any(|w| w == "default");
    let all = wanted.iter().any(|w| w == "all" || w == "everything");
    let want =
        |s: &str| all || wanted.iter().any(|w| w == s) || (default && !matches!(s, "commandstats" | "latencystats"));
    let st = &shared.stats;
    let kv = |k: &str, v: String| (k.to_string(), v);
    let mut out = String::new();
    let uptime = shared.started.elapsed().as_secs();
    if want("server") {
        section(
            &mut out,
            "Server",
            &[
                kv("redis_version", super::connection::REDIS_VERSION.into()),
                kv("strata_version", env!("CARGO_PKG_VERSION").into()),
                kv("redis_mode", "standalone".into()),
                kv("os", std::env::consts::OS.into()),
                kv("arch_bits", "64".into()),
                kv("process_id", std::process::id().to_string()),
                kv("tcp_port", shared.config.port.to_string()),
                kv("uptime_in_seconds", uptime.to_string()),
                kv("uptime_in_days", (uptime / 86400).to_string()),
            ],
        );
    }
    if want("clients") {
        section(
            &mut out,
            "Clients",
            &[
                kv("connected_clients", st.connected_clients.load(Ordering::Relaxed).to_string()),
                kv("maxclients", shared.config.maxclients.to_string()),
                kv("blocked_clients", st.blocked_clients.load(Ordering::Relaxed).to_string()),
            ],
        );
    }
    if want("memory") {
        let used = shared.store.used_memory();
        section(
            &mut out,
            "Memory",
            &[
                kv("used_memory", used.to_string()),
                kv("used_memory_human", human(used)),
                kv("used_memory_lua", shared.scripts.lua_memory().to_string()),
                kv("number_of_cached_scripts", shared.scripts.cached().to_string()),
                kv("maxmemory", "0".into()),
                kv("maxmemory_policy", "noeviction".into()),
            ],
        );
    }
    if want("errorstats") {
        let errors = st.errors.lock();
        let fields: Vec<_> =
            errors.iter().map(|(code, n)| kv(&format!("errorstat_{code}"), format!("count={n}"))).collect();
        section(&mut out, "Errorstats", &fields);
    }
    if want("persistence") {
        let mut f = vec![kv("loading", "0".into())];
        f.push(kv("durability", if shared.config.durability_sync { "sync" } else { "default" }.into()));
        f.push(kv(
            "rdb_bgsave_in_progress",
            u8::from(shared.bgsave_running.load(Ordering::Relaxed) || shared.replication.image_in_progress())
                .to_string(),
        ));
        f.extend(shared.store.info());
        section(&mut out, "Persistence", &f);
    }
    if want("stats") {
        let (channels, patterns, shard) = shared.pubsub.counts();
        section(
            &mut out,
            "Stats",
            &[
                kv("total_connections_received", st.total_connections.load(Ordering::Relaxed).to_string()),
                kv("total_commands_processed", st.total_commands.load(Ordering::Relaxed).to_string()),
                kv("rejected_connections", st.rejected_connections.load(Ordering::Relaxed).to_string()),
                kv("expired_keys", st.expired_keys.load(Ordering::Relaxed).to_string()),
                kv("evicted_keys", "0".into()),
                kv("total_error_replies", st.total_error_replies.load(Ordering::Relaxed).to_string()),
                kv("pass_groups", st.pass_groups.load(Ordering::Relaxed).to_string()),
                kv("pass_grouped_commands", st.pass_grouped_commands.load(Ordering::Relaxed).to_string()),
                kv("pubsub_channels", channels.to_string()),
                kv("pubsub_patterns", patterns.to_string()),
                kv("pubsubshard_channels", shard.to_string()),
            ]
            .into_iter()
            .chain(shared.replication.stats())
            .collect::<Vec<_>>(),
        );
    }
    if want("replication") {
        section(&mut out, "Replication", &shared.replication.info());
    }
    if want("cpu") {
        section(&mut out, "CPU", &cpu_fields());
    }
    if want("commandstats") {
        section(&mut out, "Commandstats", &shared.cmdstats.commandstats());
    }
    if want("keyspace") {
        let mut f = Vec::new();
        for (n, db) in shared.dbs.iter().enumerate() {
            let keys = db.keys.load(Ordering::Relaxed).max(0);
            let expires = db.expires.load(Ordering::Relaxed).max(0);
            if keys > 0 {
                f.push((format!("db{n}"), format!("keys={keys},expires={expires},avg_ttl=0")));
            }
        }
        section(&mut out, "Keyspace", &f);
    }
    out.push_str("\r\n");
    out
}

/// INFO cpu: the process's and its waited-for children's CPU seconds,
/// from /proc/self/stat (in clock ticks: 100 a second on Linux, which
/// USER_HZ fixes for /proc whatever the kernel's own tick).
fn cpu_fields() -> Vec<(String, String)> {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<f64> = rest.split_whitespace().map(|x| x.parse().unwrap_or(0.0)).collect();
    // utime, stime, cutime, cstime are fields 14-17 of the line, 12-15 here.
    let secs = |i: usize| format!("{:.6}", f.get(i).copied().unwrap_or(0.0) / 100.0);
    vec![
        ("used_cpu_sys".into(), secs(12)),
        ("used_cpu_user".into(), secs(11)),
        ("used_cpu_sys_children".into(), secs(14)),
        ("used_cpu_user_children".into(), secs(13)),
    ]
}

pub(crate) fn info(shared: &Shared, _: &mut Session, args: &[Bytes]) -> Reply {
    let wanted: Vec<String> = args.iter().skip(1).map(|a| String::from_utf8_lossy(a).to_ascii_lowercase()).collect();
    Reply::bulk(info_text(shared, &wanted))
}

pub(crate) fn dbsize(shared: &Shared, sess: &mut Session, _: &[Bytes]) -> Reply {
    Reply::Int(shared.db(sess.db).keys.load(Ordering::Relaxed).max(0))
}

pub(crate) fn time(_: &Shared, _: &mut Session, _: &[Bytes]) -> Reply {
    let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    Reply::Array(vec![Reply::bulk(d.as_secs().to_string()), Reply::bulk(d.subsec_micros().to_string())])
}

/// SAVE: a snapshot now, in the foreground (Redis's SAVE blocks too).
pub(crate) fn save(shared: &Shared, _: &mut Session, _: &[Bytes]) -> Reply {
    if shared.bgsave_running.load(Ordering::Acquire) {
        return Reply::err("ERR Background save already in progress");
    }
    match shared.store.save() {
        Ok(()) => Reply::ok(),
        Err(e) => Reply::err(format!("ERR {e}")),
    }
}

/// BGSAVE [SCHEDULE]: the snapshot is written by a thread of its own
/// while clients go on (the memory store copies its map a chunk at a time,
/// writers recording what they change meanwhile; the engine flushes).
pub(crate) fn bgsave(shared: &Shared, _: &mut Session, args: &[Bytes]) -> Reply {
    if args.len() > 2 || (args.len() == 2 && !is(arg(args, 1), "schedule")) {
        return Reply::err("ERR syntax error");
    }
    if shared.bgsave_running.swap(true, Ordering::AcqRel) {
        return Reply::err("ERR Background save already in progress");
    }
    let store = shared.store.clone();
    let running = shared.bgsave_running.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new().name("strata-bgsave".into()).spawn(move || {
        let mut tx = Some(tx);
        let mut started = || {
            if let Some(tx) = tx.take() {
                let _ = tx.send(());
            }
        };
        if let Err(e) = store.save_notify(&mut started) {
            eprintln!("strata-server: BGSAVE failed: {e}");
        }
        started(); // if the save failed before its start
        running.store(false, Ordering::Release);
    });
    match spawned {
        Ok(_) => {
            // The reply follows the moment the copy is of, as Redis's
            // follows its fork: it holds every write acknowledged before.
            let _ = rx.recv();
            Reply::Simple("Background saving started")
        }
        Err(e) => {
            shared.bgsave_running.store(false, Ordering::Release);
            Reply::err(format!("ERR could not start the background save: {e}"))
        }
    }
}

pub(crate) fn lastsave(shared: &Shared, _: &mut Session, _: &[Bytes]) -> Reply {
    let from_store = shared
        .store
        .info()
        .into_iter()
        .find(|(k, _)| k == "rdb_last_save_time")
        .and_then(|(_, v)| v.parse::<i64>().ok());
    let start = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs().saturating_sub(shared.started.elapsed().as_secs()) as i64)
        .unwrap_or(0);
    Reply::Int(from_store.unwrap_or(start))
}

/// SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]: NOSAVE writes no final
/// snapshot even if snapshots are configured, SAVE writes one even if not
/// (the command log and the engine are made durable either way, as Redis
/// fsyncs its AOF). Refused inside MULTI (see `cmd::execute`).
pub(crate) fn shutdown(shared: &Shared, sess: &mut Session, args: &[Bytes]) -> Reply {
    let (mut nosave, mut save, mut abort) = (false, false, false);
    for a in args.iter().skip(1) {
        if is(a, "nosave") {
            nosave = true;
        } else if is(a, "save") {
            save = true;
        } else if is(a, "abort") {
            abort = true;
        } else if !(is(a, "now") || is(a, "force")) {
            return Reply::err("ERR syntax error");
        }
    }
    if (nosave && save) || (abort && args.len() > 2) {
        return Reply::err("ERR syntax error");
    }
    if abort {
        return Reply::err("ERR No shutdown in progress.");
    }
    // Redis checks this in the command: SHUTDOWN is allowed while a script
    // is busy, but only with NOSAVE.
    if !nosave && shared.scripts.running() && shared.scripts.busy(super::script::lua_time_limit(shared)) {
        return Reply::err(shared.scripts.busy_error());
    }
    let mode = if nosave {
        crate::store::ShutdownSave::NoSave
    } else if save {
        crate::store::ShutdownSave::Save
    } else {
        crate::store::ShutdownSave::Default
    };
    shared.request_shutdown_saving(mode);
    sess.quit = true;
    sess.silent = true;
    Reply::ok()
}

fn flush_args(args: &[Bytes]) -> Result<(), super::CmdError> {
    match args.get(1) {
        None => Ok(()),
        Some(a) if args.len() == 2 && (is(a, "async") || is(a, "sync")) => Ok(()),
        Some(_) => Err(super::CmdError::Syntax),
    }
}

/// FLUSHDB: empties the selected database (engine: db 0 with one range
/// tombstone, db n by dropping its partition; see `store::engine`).
pub(crate) fn flushdb(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    flush_args(args)?;
    ctx.txn.clear_all();
    Ok(Reply::ok())
}

/// FLUSHALL: empties every database in one step (engine: one range
/// tombstone over every partition), so a crash leaves all of them flushed
/// or none; database 0's transaction carries it, the others only forget
/// what they held.
pub(crate) fn flushall(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    use crate::keyspace::ClearScope;
    flush_args(args)?;
    for db in 0..ctx.shared.dbs.len() {
        let scope = if db == 0 { ClearScope::Everything } else { ClearScope::Covered };
        ctx.txn_of(db).clear(scope);
    }
    Ok(Reply::ok())
}
