//! Lua scripting (EVAL, EVALSHA, SCRIPT, FUNCTION, FCALL), as Redis 7.0
//! does it: one Lua 5.1 state for the server, behind a mutex, whose
//! globals are read-only to scripts. A script runs under the locks of the
//! whole keyspace inside the caller's one transaction, so each
//! `redis.call` sees the writes of the calls before it and all of the
//! script's writes commit as one engine batch (on a Lua error the writes
//! already made are kept, as in Redis).

mod api;
mod convert;
mod functions;
mod json;
mod libs;
mod msgpack;
mod run;
mod worker;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use mlua::{Function, Lua, Table};
use parking_lot::Mutex;

use super::{arg, is, wrong_args, CmdError, CmdResult, Ctx, Session, Shared};
use crate::resp::Reply;

pub(crate) use functions::{fcall, fcall_ro, function};
pub use worker::{collect, lua_time_limit, run_all, script_done, ScriptHost, ScriptJob, ScriptWait};
pub(crate) use worker::{offload, park_next};

/// The scripting engine of a server: the Lua state, the script cache and
/// the function libraries, and what other connections may see of a
/// running script (SCRIPT KILL, BUSY).
pub struct Scripts {
    state: Mutex<Option<State>>,
    /// Set by SCRIPT KILL / FUNCTION KILL; the running script stops at its
    /// next instruction hook.
    kill: Arc<AtomicBool>,
    /// When the running script started (ms since the epoch), 0 when none runs.
    running_since: AtomicU64,
    /// When the running script is stopped (ms since the epoch, 0: never):
    /// `lua-time-limit` plus a second, for a script run on an event loop
    /// (inside EXEC), which leaves that loop's clients no way to send
    /// SCRIPT KILL. Scripts on the script thread are never stopped so.
    deadline: Arc<AtomicU64>,
    /// Set at shutdown: the running script stops whatever it wrote, and
    /// its writes are dropped (see `worker`).
    abort: Arc<AtomicBool>,
    /// Scripts handed to the script thread and not finished.
    queued: AtomicUsize,
    /// The script thread's queue (started on first use).
    worker: Mutex<Option<std::sync::mpsc::Sender<worker::ScriptJob>>>,
    /// Scripts run (a GC step every so many).
    runs: AtomicU64,
    /// The running script has written (it can no longer be killed).
    wrote: AtomicBool,
    /// The running script is a function (FCALL), not EVAL.
    function: AtomicBool,
    /// Scripts in the EVAL cache (INFO).
    cached: AtomicUsize,
    /// Bytes the Lua state used after the last script (INFO).
    lua_memory: AtomicUsize,
}

/// What a script declares in its shebang line (`#!lua flags=...`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Flags {
    /// No shebang: Redis 6 rules.
    pub compat: bool,
    /// `no-writes`.
    pub no_writes: bool,
}

struct Script {
    func: Function,
    flags: Flags,
}

/// The Lua state and what lives in it.
pub(crate) struct State {
    lua: Lua,
    /// Hidden helpers shared with the Lua prelude (dispatch, run, resp).
    hidden: Table,
    /// The real globals (scripts see them through a read-only view).
    globals: Table,
    /// The view scripts get as their globals.
    env: Table,
    scripts: HashMap<String, Script>,
    libs: BTreeMap<String, functions::Library>,
}

impl Default for Scripts {
    fn default() -> Self {
        Scripts::new()
    }
}

impl Scripts {
    /// An engine whose Lua state is created on first use.
    pub fn new() -> Scripts {
        Scripts {
            state: Mutex::new(None),
            kill: Arc::new(AtomicBool::new(false)),
            running_since: AtomicU64::new(0),
            deadline: Arc::new(AtomicU64::new(0)),
            abort: Arc::new(AtomicBool::new(false)),
            queued: AtomicUsize::new(0),
            worker: Mutex::new(None),
            runs: AtomicU64::new(0),
            wrote: AtomicBool::new(false),
            function: AtomicBool::new(false),
            cached: AtomicUsize::new(0),
            lua_memory: AtomicUsize::new(0),
        }
    }

    /// Scripts in the EVAL cache.
    pub fn cached(&self) -> usize {
        self.cached.load(Ordering::Relaxed)
    }

    /// Bytes the Lua state uses (as of the last script).
    pub fn lua_memory(&self) -> usize {
        self.lua_memory.load(Ordering::Relaxed)
    }

    /// The `-BUSY` error other clients get while a script runs too long.
    pub fn busy_error(&self) -> &'static str {
        if self.function.load(Ordering::Acquire) {
            "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
        } else {
            "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
        }
    }

    /// Whether a script is running now.
    pub fn running(&self) -> bool {
        self.running_since.load(Ordering::Acquire) != 0
    }

    /// Whether a script has been running for more than `limit_ms`: other
    /// clients then get `-BUSY`.
    pub fn busy(&self, limit_ms: u64) -> bool {
        let since = self.running_since.load(Ordering::Acquire);
        since != 0 && crate::keyspace::now_ms().saturating_sub(since) > limit_ms
    }

    /// SCRIPT KILL / FUNCTION KILL.
    pub(crate) fn kill(&self) -> Reply {
        if self.running_since.load(Ordering::Acquire) == 0 {
            return Reply::err("NOTBUSY No scripts in execution right now.");
        }
        if self.wrote.load(Ordering::Acquire) {
            return Reply::err(
                "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either \
                 wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.",
            );
        }
        self.kill.store(true, Ordering::Release);
        Reply::ok()
    }

    /// SCRIPT FLUSH: a new Lua state without the cached scripts (as Redis
    /// resets its VM); the function libraries are loaded again.
    fn flush(&self) -> Result<(), String> {
        let mut guard = self.state.lock();
        let codes: Vec<Bytes> =
            guard.as_ref().map(|st| st.libs.values().map(|l| l.code()).collect()).unwrap_or_default();
        let mut st = State::new(self.kill.clone(), self.deadline.clone(), self.abort.clone())
            .map_err(|e| format!("ERR Lua init failed: {e}"))?;
        for code in codes {
            st.load_library(&code, true)?;
        }
        self.cached.store(0, Ordering::Relaxed);
        self.lua_memory.store(st.lua.used_memory(), Ordering::Relaxed);
        *guard = Some(st);
        Ok(())
    }

    /// Runs `f` with the Lua state (created on first use).
    pub(crate) fn with_state<R>(&self, f: impl FnOnce(&mut State) -> Result<R, String>) -> Result<R, String> {
        let mut guard = self.state.lock();
        if guard.is_none() {
            *guard = Some(
                State::new(self.kill.clone(), self.deadline.clone(), self.abort.clone())
                    .map_err(|e| format!("ERR Lua init failed: {e}"))?,
            );
        }
        match guard.as_mut() {
            Some(st) => {
                let r = f(st);
                if self.runs.fetch_add(1, Ordering::Relaxed) % 50 == 49 {
                    let _ = st.lua.gc_collect();
                }
                self.cached.store(st.scripts.len(), Ordering::Relaxed);
                self.lua_memory.store(st.lua.used_memory(), Ordering::Relaxed);
                r
            }
            None => Err("ERR Lua state unavailable".into()),
        }
    }
}

impl State {
    fn new(kill: Arc<AtomicBool>, deadline: Arc<AtomicU64>, abort: Arc<AtomicBool>) -> mlua::Result<State> {
        let libs = mlua::StdLib::TABLE | mlua::StdLib::STRING | mlua::StdLib::MATH;
        let lua = Lua::new_with(libs, mlua::LuaOptions::new())?;
        let (hidden, globals, env) = api::setup(&lua)?;
        let (k, d, a) = (kill.clone(), deadline.clone(), abort.clone());
        let killed = move || {
            let until = d.load(Ordering::Acquire);
            k.load(Ordering::Acquire) || a.load(Ordering::Acquire) || (until != 0 && crate::keyspace::now_ms() > until)
        };
        let check = killed.clone();
        hidden.raw_set("killed", lua.create_function(move |_, ()| Ok(check()))?)?;
        lua.set_hook(mlua::HookTriggers::new().every_nth_instruction(1000), move |_, _| {
            if kill.load(Ordering::Acquire) {
                return Err(mlua::Error::runtime("Script killed by user with SCRIPT KILL..."));
            }
            if abort.load(Ordering::Acquire) {
                return Err(mlua::Error::runtime("Script killed: the server is shutting down"));
            }
            if killed() {
                return Err(mlua::Error::runtime("Script killed: it ran more than a second past lua-time-limit"));
            }
            Ok(mlua::VmState::Continue)
        })?;
        lua.gc_collect()?;
        Ok(State { lua, hidden, globals, env, scripts: HashMap::new(), libs: BTreeMap::new() })
    }

    /// Compiles an EVAL body (once) and returns its SHA1.
    fn compile(&mut self, body: &[u8]) -> Result<String, String> {
        let sha = sha1hex(body);
        if self.scripts.contains_key(&sha) {
            return Ok(sha);
        }
        let (flags, skip) = shebang(body).map_err(|e| format!("ERR {e}"))?;
        let code = body.get(skip..).unwrap_or_default();
        let func = self
            .lua
            .load(code)
            .set_name("@user_script")
            .set_mode(mlua::chunk::ChunkMode::Text)
            .set_environment(self.env.clone())
            .into_function()
            .map_err(|e| format!("ERR Error compiling script (new function): {}", run::plain_error(&e)))?;
        self.scripts.insert(sha.clone(), Script { func, flags });
        Ok(sha)
    }
}

/// SHA1 of `data` in lower-case hex.
pub(crate) fn sha1hex(data: &[u8]) -> String {
    sha1_smol::Sha1::from(data).digest().to_string()
}

/// Parses a `#!lua name=... flags=...` first line: its flags, the bytes
/// to skip (the line without its newline, so line numbers stay) and the
/// options other than `flags` (`name=` for libraries).
pub(crate) fn shebang(body: &[u8]) -> Result<(Flags, usize), String> {
    shebang_with(body, false).map(|(f, n, _)| (f, n))
}

fn shebang_with(body: &[u8], library: bool) -> Result<(Flags, usize, Option<String>), String> {
    if !body.starts_with(b"#!") {
        return Ok((Flags { compat: true, no_writes: false }, 0, None));
    }
    let Some(end) = body.iter().position(|&c| c == b'\n') else {
        return Err("Invalid script shebang".into());
    };
    let line = String::from_utf8_lossy(body.get(..end).unwrap_or_default()).into_owned();
    let mut parts = line.split_ascii_whitespace();
    let engine = parts.next().unwrap_or_default();
    if engine != "#!lua" {
        return Err(if library {
            format!("Engine '{}' not found", engine.trim_start_matches("#!"))
        } else {
            format!("Unexpected engine in script shebang: {engine}")
        });
    }
    let mut flags = Flags::default();
    let mut name = None;
    for p in parts {
        if let Some(list) = p.strip_prefix("flags=") {
            for f in list.split(',') {
                match f {
                    "no-writes" => flags.no_writes = true,
                    "allow-oom" | "allow-stale" | "no-cluster" | "allow-cross-slot-keys" => {}
                    "" if list.is_empty() => {}
                    other => return Err(format!("Unexpected flag in script shebang: {other}")),
                }
            }
        } else if let (true, Some(n)) = (library, p.strip_prefix("name=")) {
            if name.is_some() {
                return Err("Invalid metadata value, name argument was given multiple times".into());
            }
            name = Some(n.to_string());
        } else if library {
            return Err(format!("Invalid metadata value given: {p}"));
        } else {
            return Err(format!("Unknown lua shebang option: {p}"));
        }
    }
    Ok((flags, end, name))
}

/// Splits `numkeys key... arg...` (from `args[2]`) into keys and args.
pub(crate) fn keys_and_args(args: &[Bytes]) -> Result<(&[Bytes], &[Bytes]), CmdError> {
    let n = super::int_arg(arg(args, 2))?;
    let rest = args.get(3..).unwrap_or_default();
    if n < 0 {
        return Err(CmdError::Msg("ERR Number of keys can't be negative".into()));
    }
    if n as u64 > rest.len() as u64 {
        return Err(CmdError::Msg("ERR Number of keys can't be greater than number of args".into()));
    }
    Ok(rest.split_at(n as usize))
}

fn eval_generic(ctx: &mut Ctx<'_>, args: &[Bytes], by_sha: bool, ro: bool) -> CmdResult {
    let (keys, argv) = keys_and_args(args)?;
    let scripts = &ctx.shared.scripts;
    let body = arg(args, 1);
    let r = scripts.with_state(|st| {
        let sha = if by_sha {
            let sha = String::from_utf8_lossy(body).to_ascii_lowercase();
            if !st.scripts.contains_key(&sha) {
                return Err("NOSCRIPT No matching script. Please use EVAL.".into());
            }
            sha
        } else {
            st.compile(body)?
        };
        let Some(script) = st.scripts.get(&sha) else { return Err("ERR script vanished".into()) };
        let (func, flags) = (script.func.clone(), script.flags);
        if ro && !flags.compat && !flags.no_writes {
            return Err("ERR Can not execute a script with write flag using *_ro command.".into());
        }
        // A script declared with a shebang may write unless it says
        // `no-writes`: refused before it runs, as in Redis (a script
        // without one is refused at its first write).
        if !ro && !flags.compat && !flags.no_writes && ctx.shared.replication.too_few_replicas() {
            return Err("NOREPLICAS Not enough good replicas to write.".into());
        }
        let opts = run::Opts { name: &sha, read_only: ro || (!flags.compat && flags.no_writes), eval: true };
        Ok(run::run(st, scripts, ctx, &func, keys, argv, &opts))
    });
    r.map_err(CmdError::Msg)
}

pub(crate) fn eval(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    eval_generic(ctx, args, false, false)
}

pub(crate) fn evalsha(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    eval_generic(ctx, args, true, false)
}

pub(crate) fn eval_ro(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    eval_generic(ctx, args, false, true)
}

pub(crate) fn evalsha_ro(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    eval_generic(ctx, args, true, true)
}

/// SCRIPT LOAD | EXISTS | FLUSH | KILL | HELP.
pub(crate) fn script(shared: &Shared, _: &mut Session, args: &[Bytes]) -> Reply {
    let sub = arg(args, 1);
    let scripts = &shared.scripts;
    let r = if is(sub, "load") && args.len() == 3 {
        scripts.with_state(|st| st.compile(arg(args, 2)).map(Reply::bulk))
    } else if is(sub, "exists") && args.len() >= 3 {
        scripts.with_state(|st| {
            let found = args.iter().skip(2).map(|s| {
                let sha = String::from_utf8_lossy(s).to_ascii_lowercase();
                Reply::Int(i64::from(st.scripts.contains_key(&sha)))
            });
            Ok(Reply::Array(found.collect()))
        })
    } else if is(sub, "flush") && args.len() <= 3 {
        if args.len() == 3 && !is(arg(args, 2), "async") && !is(arg(args, 2), "sync") {
            return Reply::err("ERR SCRIPT FLUSH only support SYNC|ASYNC option");
        }
        scripts.flush().map(|_| Reply::ok())
    } else if is(sub, "kill") && args.len() == 2 {
        Ok(scripts.kill())
    } else if is(sub, "help") && args.len() == 2 {
        let lines =
            ["SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", "EXISTS", "FLUSH", "KILL", "LOAD"];
        Ok(Reply::Array(lines.iter().map(|l| Reply::Status((*l).to_string())).collect()))
    } else if is(sub, "load") || is(sub, "exists") || is(sub, "flush") || is(sub, "kill") {
        Ok(wrong_args(&format!("script|{}", String::from_utf8_lossy(sub).to_ascii_lowercase())))
    } else {
        Err(format!("ERR unknown subcommand '{}'. Try SCRIPT HELP.", String::from_utf8_lossy(sub)))
    };
    r.unwrap_or_else(Reply::Error)
}
