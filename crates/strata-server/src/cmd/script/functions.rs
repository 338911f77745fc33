//! Redis 7 functions: FUNCTION LOAD runs a library's code once, whose
//! `redis.register_function` calls name its functions; FCALL / FCALL_RO
//! run one with KEYS and ARGV as arguments. Libraries live in the Lua
//! state (not in the keyspace: they are lost on restart).

use std::cell::RefCell;

use bytes::Bytes;
use mlua::{Function, Value};

use super::run::{self, Opts};
use super::{keys_and_args, shebang_with, State};
use crate::cmd::{arg, is, wrong_args, CmdError, CmdResult, Ctx, Session, Shared};
use crate::resp::Reply;

/// One loaded library.
pub(crate) struct Library {
    code: Bytes,
    funcs: Vec<Func>,
}

struct Func {
    name: String,
    func: Function,
    flags: Vec<String>,
    description: Option<String>,
}

impl Library {
    /// The library's code, as loaded.
    pub(crate) fn code(&self) -> Bytes {
        self.code.clone()
    }
}

impl Func {
    fn no_writes(&self) -> bool {
        self.flags.iter().any(|f| f == "no-writes")
    }
}

const FLAGS: &[&str] = &["no-writes", "allow-oom", "allow-stale", "no-cluster", "allow-cross-slot-keys"];

fn valid_name(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

fn register(out: &RefCell<Vec<Func>>, name: Value, cb: Value, flags: Value, desc: Value) -> mlua::Result<()> {
    let Value::String(name) = name else {
        return Err(mlua::Error::runtime("function_name argument given to redis.register_function must be a string"));
    };
    let name = name.to_string_lossy();
    let Value::Function(func) = cb else {
        return Err(mlua::Error::runtime("callback argument given to redis.register_function must be a function"));
    };
    let mut fl = Vec::new();
    match flags {
        Value::Nil => {}
        Value::Table(t) => {
            for v in t.sequence_values::<String>() {
                let v = v.map_err(|_| mlua::Error::runtime("unknown flag given"))?;
                if !FLAGS.contains(&v.as_str()) {
                    return Err(mlua::Error::runtime("unknown flag given"));
                }
                fl.push(v);
            }
        }
        _ => {
            return Err(mlua::Error::runtime(
                "flags argument to redis.register_function must be a table representing function flags",
            ))
        }
    }
    let description = match desc {
        Value::Nil => None,
        Value::String(s) => Some(s.to_string_lossy()),
        _ => {
            return Err(mlua::Error::runtime("description argument given to redis.register_function must be a string"))
        }
    };
    if !valid_name(&name) {
        return Err(mlua::Error::runtime(
            "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long",
        ));
    }
    let mut out = out.borrow_mut();
    if out.iter().any(|f| f.name == name) {
        return Err(mlua::Error::runtime("Function already exists in the library"));
    }
    out.push(Func { name, func, flags: fl, description });
    Ok(())
}

fn err_text(v: &Value) -> String {
    if let Value::Table(t) = v {
        if let Ok(Some(s)) = t.raw_get::<Option<String>>("err") {
            return s.strip_prefix("ERR ").map(str::to_string).unwrap_or(s);
        }
    }
    "execution failure".into()
}

impl State {
    /// FUNCTION LOAD: the library's name, or the error text.
    pub(crate) fn load_library(&mut self, code: &[u8], replace: bool) -> Result<String, String> {
        if !code.starts_with(b"#!") {
            return Err("ERR Missing library metadata".into());
        }
        let (_, skip, name) = shebang_with(code, true).map_err(|e| format!("ERR {e}"))?;
        let Some(name) = name else { return Err("ERR Library name was not given".into()) };
        if !valid_name(&name) {
            return Err("ERR Library names can only contain letters, numbers, or underscores(_) and must be at least \
                        one character long"
                .into());
        }
        if self.libs.contains_key(&name) && !replace {
            return Err(format!("ERR Library '{name}' already exists"));
        }
        let chunk = self
            .lua
            .load(code.get(skip..).unwrap_or_default())
            .set_name("@user_function")
            .set_mode(mlua::chunk::ChunkMode::Text)
            .set_environment(self.env.clone())
            .into_function()
            .map_err(|e| format!("ERR Error compiling function: {}", run::plain_error(&e)))?;
        let found = RefCell::new(Vec::new());
        let hidden = &self.hidden;
        let out = self.lua.scope(|scope| {
            let r = scope
                .create_function(|_, (n, cb, fl, d): (Value, Value, Value, Value)| register(&found, n, cb, fl, d))?;
            hidden.raw_set("register", r)?;
            let runner: Function = hidden.raw_get("run")?;
            let out = runner.call::<(bool, Value)>((chunk, Value::Nil, Value::Nil));
            hidden.raw_set("register", Value::Nil)?;
            out
        });
        let funcs = match out {
            Ok((true, _)) => found.into_inner(),
            Ok((false, v)) => return Err(format!("ERR Error registering functions: {}", err_text(&v))),
            Err(e) => return Err(format!("ERR Error registering functions: {}", run::plain_error(&e))),
        };
        if funcs.is_empty() {
            return Err("ERR No functions registered".into());
        }
        for f in &funcs {
            if self.libs.iter().any(|(l, lib)| *l != name && lib.funcs.iter().any(|g| g.name == f.name)) {
                return Err(format!("ERR Function {} already exists", f.name));
            }
        }
        self.libs.insert(name.clone(), Library { code: Bytes::copy_from_slice(code), funcs });
        Ok(name)
    }

    fn find(&self, name: &[u8]) -> Option<&Func> {
        self.libs.values().flat_map(|l| l.funcs.iter()).find(|f| f.name.as_bytes() == name)
    }

    fn list(&self, code: bool, pattern: Option<&[u8]>) -> Reply {
        let libs = self.libs.iter().filter(|(n, _)| pattern.is_none_or(|p| crate::glob::glob_match(p, n.as_bytes())));
        let libs = libs.map(|(name, lib)| {
            let funcs = lib.funcs.iter().map(|f| {
                Reply::Map(vec![
                    (Reply::bulk("name"), Reply::bulk(&f.name)),
                    (Reply::bulk("description"), f.description.as_ref().map_or(Reply::Nil, Reply::bulk)),
                    (Reply::bulk("flags"), Reply::Set(f.flags.iter().map(|s| Reply::Status(s.clone())).collect())),
                ])
            });
            let mut m = vec![
                (Reply::bulk("library_name"), Reply::bulk(name)),
                (Reply::bulk("engine"), Reply::bulk("LUA")),
                (Reply::bulk("functions"), Reply::Array(funcs.collect())),
            ];
            if code {
                m.push((Reply::bulk("library_code"), Reply::Bulk(lib.code.clone())));
            }
            Reply::Map(m)
        });
        Reply::Array(libs.collect())
    }
}

fn fcall_generic(ctx: &mut Ctx<'_>, args: &[Bytes], ro: bool) -> CmdResult {
    let scripts = &ctx.shared.scripts;
    let name = arg(args, 1);
    let r = scripts.with_state(|st| {
        let Some(f) = st.find(name) else { return Err("ERR Function not found".into()) };
        let (func, no_writes, fname) = (f.func.clone(), f.no_writes(), f.name.clone());
        if ro && !no_writes {
            return Err("ERR Can not execute a script with write flag using *_ro command.".into());
        }
        // A function may write unless flagged `no-writes`: refused before
        // it runs, as in Redis.
        if !ro && !no_writes && ctx.shared.replication.too_few_replicas() {
            return Err("NOREPLICAS Not enough good replicas to write.".into());
        }
        let (keys, argv) = keys_and_args(args).map_err(|e| match e.into_reply() {
            Reply::Error(s) => s,
            _ => "ERR syntax error".into(),
        })?;
        let opts = Opts { name: &fname, read_only: ro || no_writes, eval: false };
        Ok(run::run(st, scripts, ctx, &func, keys, argv, &opts))
    });
    r.map_err(CmdError::Msg)
}

pub(crate) fn fcall(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    fcall_generic(ctx, args, false)
}

pub(crate) fn fcall_ro(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    fcall_generic(ctx, args, true)
}

/// FUNCTION LOAD | DELETE | FLUSH | LIST | KILL | STATS | HELP.
pub(crate) fn function(shared: &Shared, _: &mut Session, args: &[Bytes]) -> Reply {
    let sub = arg(args, 1);
    let scripts = &shared.scripts;
    let lower = String::from_utf8_lossy(sub).to_ascii_lowercase();
    let r = match lower.as_str() {
        "load" => {
            let (replace, code) = match args.len() {
                3 => (false, arg(args, 2)),
                4 if is(arg(args, 2), "replace") => (true, arg(args, 3)),
                4 => return Reply::err(format!("ERR Unknown option given: {}", String::from_utf8_lossy(arg(args, 2)))),
                2 => return Reply::err("ERR Function code is missing"),
                _ => return wrong_args("function|load"),
            };
            scripts.with_state(|st| st.load_library(code, replace).map(Reply::bulk))
        }
        "delete" if args.len() == 3 => scripts.with_state(|st| {
            let name = String::from_utf8_lossy(arg(args, 2)).into_owned();
            match st.libs.remove(&name) {
                Some(_) => Ok(Reply::ok()),
                None => Err("ERR Library not found".into()),
            }
        }),
        "flush" if args.len() <= 3 => {
            if args.len() == 3 && !is(arg(args, 2), "async") && !is(arg(args, 2), "sync") {
                return Reply::err("ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
            }
            scripts.with_state(|st| {
                st.libs.clear();
                Ok(Reply::ok())
            })
        }
        "list" => {
            let (mut code, mut pattern) = (false, None);
            let mut i = 2;
            while i < args.len() {
                if is(arg(args, i), "withcode") {
                    code = true;
                } else if is(arg(args, i), "libraryname") && i + 1 < args.len() {
                    pattern = Some(arg(args, i + 1));
                    i += 1;
                } else if is(arg(args, i), "libraryname") {
                    return Reply::err("ERR library name argument was not given");
                } else {
                    return Reply::err(format!("ERR Unknown argument {}", String::from_utf8_lossy(arg(args, i))));
                }
                i += 1;
            }
            scripts.with_state(|st| Ok(st.list(code, pattern)))
        }
        "kill" if args.len() == 2 => Ok(scripts.kill()),
        "stats" if args.len() == 2 => scripts.with_state(|st| {
            let n: usize = st.libs.values().map(|l| l.funcs.len()).sum();
            let lua = Reply::Map(vec![
                (Reply::bulk("libraries_count"), Reply::Int(st.libs.len() as i64)),
                (Reply::bulk("functions_count"), Reply::Int(n as i64)),
            ]);
            Ok(Reply::Map(vec![
                (Reply::bulk("running_script"), Reply::Nil),
                (Reply::bulk("engines"), Reply::Map(vec![(Reply::bulk("LUA"), lua)])),
            ]))
        }),
        "help" if args.len() == 2 => {
            let lines =
                ["FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", "LOAD", "DELETE", "FLUSH"];
            Ok(Reply::Array(lines.iter().map(|l| Reply::Status((*l).to_string())).collect()))
        }
        "delete" | "flush" | "kill" | "stats" | "help" => Ok(wrong_args(&format!("function|{lower}"))),
        _ => Err(format!("ERR unknown subcommand '{}'. Try FUNCTION HELP.", String::from_utf8_lossy(sub))),
    };
    r.unwrap_or_else(Reply::Error)
}
