//! Running a script: its KEYS/ARGV, the `redis.call` dispatch into the
//! command table over the caller's transaction, and the error reply Redis
//! builds from a failed script.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use mlua::{FromLuaMulti, Function, Lua, MultiValue, Table, Value};

use super::{convert, Scripts, State};
use crate::cmd::{flag, resolve, CmdError, Ctx, Run, Session};
use crate::resp::Reply;

/// How a script runs.
pub(crate) struct Opts<'a> {
    /// The name in error replies: the SHA1 (EVAL) or the function's name.
    pub name: &'a str,
    /// Write commands are refused.
    pub read_only: bool,
    /// EVAL (KEYS and ARGV are globals) rather than FCALL (arguments).
    pub eval: bool,
}

/// The message of an mlua error, without mlua's decorations.
pub(crate) fn plain_error(e: &mlua::Error) -> String {
    match e {
        mlua::Error::RuntimeError(m) | mlua::Error::MemoryError(m) => m.clone(),
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        mlua::Error::CallbackError { cause, .. } => plain_error(cause),
        other => other.to_string(),
    }
}

/// Runs `func` over `ctx` and returns the script's reply (an error reply
/// when it failed; its writes so far stay in `ctx`).
pub(crate) fn run(
    st: &mut State,
    scripts: &Scripts,
    ctx: &mut Ctx<'_>,
    func: &Function,
    keys: &[Bytes],
    argv: &[Bytes],
    opts: &Opts<'_>,
) -> Reply {
    let lua = &st.lua;
    let hidden = &st.hidden;
    let table = |items: &[Bytes]| -> mlua::Result<Table> {
        let t = lua.create_table_with_capacity(items.len(), 0)?;
        for (i, b) in items.iter().enumerate() {
            t.raw_set(i + 1, lua.create_string(b)?)?;
        }
        Ok(t)
    };
    let (kt, at) = match (table(keys), table(argv)) {
        (Ok(k), Ok(a)) => (k, a),
        _ => return Reply::err("ERR out of memory creating script arguments"),
    };
    if opts.eval && (st.globals.raw_set("KEYS", kt.clone()).is_err() || st.globals.raw_set("ARGV", at.clone()).is_err())
    {
        return Reply::err("ERR could not set KEYS and ARGV");
    }
    let (db, proto) = (ctx.db, ctx.proto);
    ctx.in_script = true;
    scripts.kill.store(false, Ordering::Release);
    scripts.wrote.store(false, Ordering::Release);
    scripts.function.store(!opts.eval, Ordering::Release);
    let now = crate::keyspace::now_ms().max(1);
    // Only a script on an event loop (inside EXEC) is stopped by the
    // server: it leaves that loop's clients no way to send SCRIPT KILL.
    let stop_at = if super::worker::on_worker() {
        0
    } else {
        now.saturating_add(super::lua_time_limit(ctx.shared)).saturating_add(1000)
    };
    scripts.deadline.store(stop_at, Ordering::Release);
    scripts.running_since.store(now, Ordering::Release);
    let state = RefCell::new(Call { ctx, read_only: opts.read_only, wrote: &scripts.wrote, session: None });
    let result = lua.scope(|scope| {
        hidden.raw_set("resp", 2)?;
        let d = scope.create_function(|lua, args: MultiValue| dispatch(lua, &state, hidden, args))?;
        hidden.raw_set("dispatch", d)?;
        let runner: Function = hidden.raw_get("run")?;
        let out = runner.call::<(bool, Value)>((func.clone(), kt, at));
        hidden.raw_set("dispatch", Value::Nil)?;
        let (ok, v) = out?;
        let resp: u8 = hidden.raw_get::<Option<u8>>("resp").ok().flatten().unwrap_or(2);
        Ok(if ok { convert::to_reply(&v, resp, 0) } else { error_reply(&v, opts.name) })
    });
    scripts.running_since.store(0, Ordering::Release);
    scripts.deadline.store(0, Ordering::Release);
    scripts.kill.store(false, Ordering::Release);
    let call = state.into_inner();
    if call.ctx.is_dirty() {
        // A script's keys are not known before it runs: every lock stripe
        // moves on, so WATCHes see the change (a false alarm for other
        // keys) and blocked clients look again. Under the locks of all
        // stripes, as before the commit that follows.
        call.ctx.shared.locks.bump::<&[u8]>(&[], true);
    }
    call.ctx.select(db);
    call.ctx.proto = proto;
    call.ctx.in_script = false;
    if opts.eval {
        let _ = st.globals.raw_set("KEYS", Value::Nil);
        let _ = st.globals.raw_set("ARGV", Value::Nil);
    }
    result.unwrap_or_else(|e| Reply::err(format!("ERR Error running script {}, {}", opts.name, plain_error(&e))))
}

/// The reply for a script that raised `v` (a table from the error handler).
fn error_reply(v: &Value, name: &str) -> Reply {
    if let Value::Table(t) = v {
        if let Ok(Some(err)) = t.raw_get::<Option<mlua::LuaString>>("err") {
            let msg = err.to_string_lossy();
            let source = t.raw_get::<Option<String>>("source").ok().flatten();
            let line = t.raw_get::<Option<i64>>("line").ok().flatten();
            return Reply::Error(match (source, line) {
                (Some(s), Some(l)) => format!("{msg} script: {name}, on {s}:{l}."),
                _ => msg,
            });
        }
    }
    Reply::err(format!("ERR Error running script {name}, execution failure"))
}

/// The error handler scripts run under (`xpcall`): makes the error a
/// table `{err=..., source=..., line=...}` pointing at the script's line.
pub(crate) fn handler(lua: &Lua, err: Value) -> mlua::Result<Table> {
    let t = match err {
        Value::Table(t) => t,
        other => {
            let msg = match &other {
                Value::String(s) => s.to_string_lossy(),
                Value::Error(e) => plain_error(e),
                Value::Nil => "nil".into(),
                Value::Boolean(b) => b.to_string(),
                Value::Integer(i) => i.to_string(),
                Value::Number(n) => convert::number_text(*n),
                v => v.type_name().to_string(),
            };
            let t = lua.create_table()?;
            t.raw_set("err", format!("ERR {msg}"))?;
            t
        }
    };
    for level in 0..200 {
        let found = lua.inspect_stack(level, |d| {
            let src = d.source().source.map(|s| s.into_owned());
            (src, d.current_line())
        });
        match found {
            None => break,
            Some((Some(src), Some(line))) if src.starts_with("@user_") => {
                t.raw_set("source", src)?;
                t.raw_set("line", line)?;
                break;
            }
            _ => {}
        }
    }
    Ok(t)
}

/// What `redis.call` runs commands over.
struct Call<'c, 'a> {
    ctx: &'c mut Ctx<'a>,
    read_only: bool,
    wrote: &'c AtomicBool,
    /// The session the script's connection-level commands (PING, INFO
    /// ...) run in, made on first use.
    session: Option<Session>,
}

/// Redis 7.0 commands this server does not have yet, all flagged
/// `noscript` there: a script calling one gets Redis's answer. Each leaves
/// this list when it joins the command table (a test checks).
const ABSENT_NOSCRIPT: &[&str] = &["cluster", "monitor", "acl"];

impl Call<'_, '_> {
    fn call(&mut self, args: &[Bytes], resp: u8) -> Reply {
        let Some((_, spec)) = resolve(args) else {
            let name = args.first().map(|a| a.as_ref()).unwrap_or_default();
            if ABSENT_NOSCRIPT.iter().any(|n| name.eq_ignore_ascii_case(n.as_bytes())) {
                return Reply::err("ERR This Redis command is not allowed from script");
            }
            return Reply::err("ERR Unknown Redis command called from script");
        };
        if !spec.arity_ok(args.len()) {
            return Reply::err("ERR Wrong number of args calling Redis command from script");
        }
        if spec.has(flag::NOSCRIPT) {
            return Reply::err("ERR This Redis command is not allowed from script");
        }
        if spec.has(flag::WRITE) {
            if self.ctx.shared.replication.refuses_writes() {
                return Reply::err(crate::cmd::READONLY);
            }
            // min-replicas-to-write, as Redis checks a script's writes.
            if self.ctx.shared.replication.too_few_replicas() {
                return Reply::err("NOREPLICAS Not enough good replicas to write.");
            }
            if self.read_only {
                return Reply::err("ERR Write commands are not allowed from read-only scripts.");
            }
            self.wrote.store(true, Ordering::Release);
        }
        let name = spec.name;
        let ctx = &mut *self.ctx;
        match spec.run {
            Run::Data(f) => {
                let proto = ctx.proto;
                ctx.proto = resp;
                let r = crate::cmd::notify::call(ctx, spec, f, args).unwrap_or_else(CmdError::into_reply);
                ctx.proto = proto;
                r
            }
            Run::Session(_) if name == "select" => {
                match crate::cmd::connection::db_index(ctx.shared, args.get(1).map(|a| a.as_ref()).unwrap_or_default())
                {
                    Ok(db) => {
                        ctx.select(db);
                        Reply::ok()
                    }
                    Err(e) => Reply::err(e),
                }
            }
            Run::Session(f) => {
                let sess = self.session.get_or_insert_with(|| Session::new(ctx.shared, "lua".into()));
                sess.db = ctx.db;
                sess.proto = resp;
                f(ctx.shared, sess, args)
            }
        }
    }
}

/// `redis.call` / `redis.pcall`: the command's reply as a Lua value, and
/// whether `redis.call` must raise it.
fn dispatch(lua: &Lua, state: &RefCell<Call<'_, '_>>, hidden: &Table, args: MultiValue) -> mlua::Result<(Value, bool)> {
    let (raise, n, list): (bool, usize, Table) = FromLuaMulti::from_lua_multi(args, lua)?;
    let mut cmd: Vec<Bytes> = Vec::with_capacity(n);
    for i in 1..=n {
        match list.raw_get::<Value>(i)? {
            Value::String(s) => cmd.push(Bytes::copy_from_slice(&s.as_bytes())),
            Value::Integer(i) => cmd.push(Bytes::from(i.to_string())),
            Value::Number(n) => cmd.push(Bytes::from(convert::number_text(n))),
            _ => {
                let e = convert::err_table(lua, "ERR Lua redis lib command arguments must be strings or integers")?;
                return Ok((e, raise));
            }
        }
    }
    if cmd.is_empty() {
        let e = convert::err_table(lua, "ERR Please specify at least one argument for this redis lib call")?;
        return Ok((e, raise));
    }
    let resp: u8 = hidden.raw_get::<Option<u8>>("resp").ok().flatten().unwrap_or(2);
    let reply = match state.try_borrow_mut() {
        Ok(mut call) => call.call(&cmd, resp),
        Err(_) => Reply::err("ERR redis.call recursive call detected"),
    };
    match reply {
        Reply::Error(e) => Ok((convert::err_table(lua, &e)?, raise)),
        r => Ok((convert::to_lua(lua, r, resp, 0)?, false)),
    }
}

#[cfg(test)]
mod tests {
    use super::ABSENT_NOSCRIPT;

    /// A command that joined the table answers from its own flags.
    #[test]
    fn absent_commands_are_not_in_the_table() {
        for name in ABSENT_NOSCRIPT {
            assert!(crate::cmd::lookup(name.as_bytes()).is_none(), "{name} is in the table now: remove it here");
        }
    }
}
