//! Conversions between command replies and Lua values, by Redis's rules:
//! integer → number, bulk → string, nil → false (RESP2) or nil (RESP3),
//! array → table, status → `{ok=...}`, error → `{err=...}`, and RESP3's
//! map, set and double as `{map=...}`, `{set=...}`, `{double=...}`; back
//! again for what a script returns (a number is truncated to an integer,
//! true is 1, false is nil).

use bytes::Bytes;
use mlua::{Lua, Table, Value};

use crate::resp::Reply;

/// Deepest nesting of a reply converted from a script's return value.
const MAX_DEPTH: usize = 1000;

/// The text Redis gives a Lua number passed as a command argument.
pub(crate) fn number_text(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e17 {
        format!("{}", n as i64)
    } else if n.is_nan() {
        "nan".into()
    } else if n.is_infinite() {
        if n > 0.0 { "inf" } else { "-inf" }.into()
    } else {
        format!("{n}")
    }
}

/// An error table `{err=msg}` (without the CR/LF Redis trims).
pub(crate) fn err_table(lua: &Lua, msg: &str) -> mlua::Result<Value> {
    let t = lua.create_table()?;
    t.raw_set("err", msg.trim_matches(|c| c == '\r' || c == '\n'))?;
    Ok(Value::Table(t))
}

fn seq(lua: &Lua, items: Vec<Reply>, resp: u8, depth: usize) -> mlua::Result<Value> {
    let t = lua.create_table_with_capacity(items.len(), 0)?;
    for (i, r) in items.into_iter().enumerate() {
        t.raw_set(i + 1, to_lua(lua, r, resp, depth + 1)?)?;
    }
    Ok(Value::Table(t))
}

fn wrap(lua: &Lua, field: &str, v: Value) -> mlua::Result<Value> {
    let t = lua.create_table()?;
    t.raw_set(field, v)?;
    Ok(Value::Table(t))
}

/// A command's reply as the Lua value `redis.call` returns (with the
/// script's protocol, `redis.setresp`).
pub(crate) fn to_lua(lua: &Lua, r: Reply, resp: u8, depth: usize) -> mlua::Result<Value> {
    Ok(match r {
        Reply::Simple(s) => wrap(lua, "ok", Value::String(lua.create_string(s)?))?,
        Reply::Status(s) => wrap(lua, "ok", Value::String(lua.create_string(s)?))?,
        Reply::Error(e) => err_table(lua, &e)?,
        Reply::Int(n) => Value::Number(n as f64),
        Reply::Bulk(b) => Value::String(lua.create_string(&b)?),
        Reply::Nil | Reply::NilArray => {
            if resp >= 3 {
                Value::Nil
            } else {
                Value::Boolean(false)
            }
        }
        Reply::Bool(b) => {
            if resp >= 3 {
                Value::Boolean(b)
            } else {
                Value::Number(f64::from(u8::from(b)))
            }
        }
        // Push frames and multi-frame replies come from pub/sub commands,
        // which scripts may not call; as arrays, should one get here.
        Reply::Array(items) | Reply::Push(items) | Reply::Many(items) => seq(lua, items, resp, depth)?,
        Reply::Set(items) if resp >= 3 => {
            let t = lua.create_table()?;
            for r in items {
                t.raw_set(to_lua(lua, r, resp, depth + 1)?, true)?;
            }
            wrap(lua, "set", Value::Table(t))?
        }
        Reply::Set(items) => seq(lua, items, resp, depth)?,
        Reply::Map(pairs) if resp >= 3 => {
            let t = lua.create_table()?;
            for (k, v) in pairs {
                t.raw_set(to_lua(lua, k, resp, depth + 1)?, to_lua(lua, v, resp, depth + 1)?)?;
            }
            wrap(lua, "map", Value::Table(t))?
        }
        Reply::Map(pairs) => seq(lua, pairs.into_iter().flat_map(|(k, v)| [k, v]).collect(), resp, depth)?,
        Reply::Double(d) if resp >= 3 => wrap(lua, "double", Value::Number(d))?,
        Reply::Double(d) => Value::String(lua.create_string(crate::resp::reply::format_double(d))?),
    })
}

fn one_line(s: &str) -> String {
    s.chars().map(|c| if c == '\r' || c == '\n' { ' ' } else { c }).collect()
}

/// A script's return value as the reply to the client; `resp` is the
/// script's protocol (booleans differ).
pub(crate) fn to_reply(v: &Value, resp: u8, depth: usize) -> Reply {
    if depth > MAX_DEPTH {
        return Reply::err("ERR reached lua stack limit");
    }
    match v {
        Value::String(s) => Reply::Bulk(Bytes::copy_from_slice(&s.as_bytes())),
        Value::Boolean(b) if resp >= 3 => Reply::Bool(*b),
        Value::Boolean(true) => Reply::Int(1),
        Value::Boolean(false) => Reply::Nil,
        Value::Integer(i) => Reply::Int(*i),
        Value::Number(n) => Reply::Int(*n as i64),
        Value::Table(t) => table_reply(t, resp, depth),
        _ => Reply::Nil,
    }
}

fn table_reply(t: &Table, resp: u8, depth: usize) -> Reply {
    if let Ok(Value::String(e)) = t.raw_get::<Value>("err") {
        return Reply::Error(one_line(&e.to_string_lossy()));
    }
    if let Ok(Value::String(s)) = t.raw_get::<Value>("ok") {
        return Reply::Status(one_line(&s.to_string_lossy()));
    }
    if let Ok(Value::Number(d)) = t.raw_get::<Value>("double") {
        return Reply::Double(d);
    }
    if let Ok(Value::Integer(d)) = t.raw_get::<Value>("double") {
        return Reply::Double(d as f64);
    }
    if let Ok(Value::String(s)) = t.raw_get::<Value>("big_number") {
        return Reply::Status(one_line(&s.to_string_lossy()));
    }
    if let Ok(Value::Table(m)) = t.raw_get::<Value>("map") {
        let mut pairs = Vec::new();
        for (k, v) in m.pairs::<Value, Value>().flatten() {
            pairs.push((to_reply(&k, resp, depth + 1), to_reply(&v, resp, depth + 1)));
        }
        return Reply::Map(pairs);
    }
    if let Ok(Value::Table(s)) = t.raw_get::<Value>("set") {
        let items = s.pairs::<Value, Value>().flatten().map(|(k, _)| to_reply(&k, resp, depth + 1)).collect();
        return Reply::Set(items);
    }
    let mut items = Vec::new();
    for j in 1.. {
        match t.raw_get::<Value>(j) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(v) => items.push(to_reply(&v, resp, depth + 1)),
        }
    }
    Reply::Array(items)
}

/// The largest key and the number of keys of `t` when every key is a
/// positive integer (an array as cjson and cmsgpack see one), else `None`.
pub(crate) fn integer_keys(t: &mlua::Table) -> mlua::Result<Option<(usize, usize)>> {
    let (mut max, mut count) = (0usize, 0usize);
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        let n = match k {
            Value::Integer(i) if i >= 1 => i as usize,
            Value::Number(f) if f >= 1.0 && f == f.trunc() => f as usize,
            _ => return Ok(None),
        };
        max = max.max(n);
        count += 1;
    }
    Ok(Some((max, count)))
}
