//! `cjson` for scripts: Lua CJSON's encode and decode as Redis ships
//! them (numbers with 14 significant digits, `/` escaped, an empty table
//! is `{}`, `cjson.null`, depth limits and the invalid-number switch).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use mlua::{LightUserData, Lua, Table, Value};

/// The deepest nesting either depth setting allows (encoding and decoding
/// recurse; the server's stack must hold them).
const MAX_DEPTH: u32 = 1000;

#[derive(Default)]
struct Cfg {
    encode_depth: AtomicU32,
    decode_depth: AtomicU32,
    invalid_numbers: AtomicBool,
}

/// The value `cjson.null` stands for.
fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

/// A number the way `%.14g` prints it.
pub(crate) fn fmt_g14(n: f64) -> String {
    if n.is_nan() {
        return "nan".into();
    }
    if n.is_infinite() {
        return if n > 0.0 { "inf" } else { "-inf" }.into();
    }
    if n == n.trunc() && n.abs() < 1e15 {
        return format!("{}", n as i64);
    }
    let sci = format!("{n:.13e}");
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..14).contains(&exp) {
        let mant = if mant.contains('.') { mant.trim_end_matches('0').trim_end_matches('.') } else { mant };
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mant}e{sign}{:02}", exp.abs())
    } else {
        let s = format!("{:.*}", (13 - exp).max(0) as usize, n);
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    }
}

fn escape(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            8 => out.extend_from_slice(b"\\b"),
            12 => out.extend_from_slice(b"\\f"),
            c if c < 0x20 || c == 0x7f => out.extend_from_slice(format!("\\u{c:04x}").as_bytes()),
            c => out.push(c),
        }
    }
    out.push(b'"');
}

fn rt(msg: impl Into<String>) -> mlua::Error {
    mlua::Error::runtime(msg.into())
}

fn encode_number(out: &mut Vec<u8>, n: f64, cfg: &Cfg) -> mlua::Result<()> {
    if !n.is_finite() && !cfg.invalid_numbers.load(Ordering::Relaxed) {
        return Err(rt("Cannot serialise number: must not be NaN or Inf"));
    }
    out.extend_from_slice(fmt_g14(n).as_bytes());
    Ok(())
}

/// The length of `t` as a JSON array, or `None` if it is an object.
fn array_len(t: &Table) -> mlua::Result<Option<usize>> {
    let Some((max, count)) = super::convert::integer_keys(t)? else { return Ok(None) };
    if max > 10 && max > count * 2 {
        return Err(rt("Cannot serialise table: excessively sparse array"));
    }
    Ok((max > 0).then_some(max))
}

fn encode(out: &mut Vec<u8>, v: &Value, depth: u32, cfg: &Cfg) -> mlua::Result<()> {
    match v {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(i) => out.extend_from_slice(i.to_string().as_bytes()),
        Value::Number(n) => encode_number(out, *n, cfg)?,
        Value::String(s) => escape(out, &s.as_bytes()),
        Value::Table(t) => {
            let depth = depth + 1;
            let max = cfg.encode_depth.load(Ordering::Relaxed);
            if depth > max {
                return Err(rt(format!("Cannot serialise, excessive nesting ({depth})")));
            }
            if let Some(len) = array_len(t)? {
                out.push(b'[');
                for i in 1..=len {
                    if i > 1 {
                        out.push(b',');
                    }
                    encode(out, &t.raw_get::<Value>(i)?, depth, cfg)?;
                }
                out.push(b']');
            } else {
                out.push(b'{');
                let mut first = true;
                for pair in t.pairs::<Value, Value>() {
                    let (k, val) = pair?;
                    if !first {
                        out.push(b',');
                    }
                    first = false;
                    match &k {
                        Value::String(s) => escape(out, &s.as_bytes()),
                        Value::Integer(i) => escape(out, i.to_string().as_bytes()),
                        Value::Number(n) => escape(out, fmt_g14(*n).as_bytes()),
                        _ => return Err(rt("Cannot serialise table: table key must be a number or string")),
                    }
                    out.push(b':');
                    encode(out, &val, depth, cfg)?;
                }
                out.push(b'}');
            }
        }
        other => return Err(rt(format!("Cannot serialise {}: type not supported", other.type_name()))),
    }
    Ok(())
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    max_depth: u32,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.s.get(self.i).is_some_and(|c| c.is_ascii_whitespace()) {
            self.i += 1;
        }
    }

    fn fail<T>(&self, what: &str) -> mlua::Result<T> {
        Err(rt(format!("Expected {what} but found invalid token at character {}", self.i + 1)))
    }

    fn value(&mut self, lua: &Lua, depth: u32) -> mlua::Result<Value> {
        self.ws();
        let Some(&c) = self.s.get(self.i) else { return self.fail("value") };
        match c {
            b'{' | b'[' => {
                let depth = depth + 1;
                if depth > self.max_depth {
                    return Err(rt(format!(
                        "Found too many nested data structures ({depth}) at character {}",
                        self.i + 1
                    )));
                }
                self.i += 1;
                let t = lua.create_table()?;
                let close = if c == b'{' { b'}' } else { b']' };
                self.ws();
                if self.s.get(self.i) == Some(&close) {
                    self.i += 1;
                    return Ok(Value::Table(t));
                }
                let mut n = 0;
                loop {
                    if c == b'{' {
                        self.ws();
                        if self.s.get(self.i) != Some(&b'"') {
                            return self.fail("object key string");
                        }
                        let k = self.string(lua)?;
                        self.ws();
                        if self.s.get(self.i) != Some(&b':') {
                            return self.fail("colon");
                        }
                        self.i += 1;
                        let v = self.value(lua, depth)?;
                        t.raw_set(k, v)?;
                    } else {
                        n += 1;
                        let v = self.value(lua, depth)?;
                        t.raw_set(n, v)?;
                    }
                    self.ws();
                    match self.s.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(&x) if x == close => {
                            self.i += 1;
                            return Ok(Value::Table(t));
                        }
                        _ => return self.fail("comma or close"),
                    }
                }
            }
            b'"' => Ok(Value::String(self.string(lua)?)),
            b't' if self.s[self.i..].starts_with(b"true") => {
                self.i += 4;
                Ok(Value::Boolean(true))
            }
            b'f' if self.s[self.i..].starts_with(b"false") => {
                self.i += 5;
                Ok(Value::Boolean(false))
            }
            b'n' if self.s[self.i..].starts_with(b"null") => {
                self.i += 4;
                Ok(null())
            }
            b'-' | b'0'..=b'9' => {
                let start = self.i;
                while self.s.get(self.i).is_some_and(|c| c.is_ascii_digit() || b"+-.eE".contains(c)) {
                    self.i += 1;
                }
                let text = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
                match text.parse::<f64>() {
                    Ok(n) => Ok(Value::Number(n)),
                    Err(_) => {
                        self.i = start;
                        self.fail("value")
                    }
                }
            }
            _ => self.fail("value"),
        }
    }

    fn hex4(&mut self) -> mlua::Result<u32> {
        let h = self.s.get(self.i..self.i + 4).and_then(|h| std::str::from_utf8(h).ok());
        match h.and_then(|h| u32::from_str_radix(h, 16).ok()) {
            Some(v) => {
                self.i += 4;
                Ok(v)
            }
            None => self.fail("unicode escape"),
        }
    }

    fn string(&mut self, lua: &Lua) -> mlua::Result<mlua::LuaString> {
        self.i += 1;
        let mut out = Vec::new();
        loop {
            let Some(&c) = self.s.get(self.i) else { return self.fail("string end") };
            self.i += 1;
            match c {
                b'"' => return lua.create_string(&out),
                b'\\' => {
                    let Some(&e) = self.s.get(self.i) else { return self.fail("escape") };
                    self.i += 1;
                    match e {
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'u' => {
                            let mut cp = self.hex4()?;
                            if (0xd800..0xdc00).contains(&cp) && self.s.get(self.i..self.i + 2) == Some(b"\\u") {
                                self.i += 2;
                                let lo = self.hex4()?;
                                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo.wrapping_sub(0xdc00) & 0x3ff);
                            }
                            let ch = char::from_u32(cp).unwrap_or('\u{fffd}');
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                        }
                        other => out.push(other),
                    }
                }
                c => out.push(c),
            }
        }
    }
}

/// Builds the `cjson` table.
pub(crate) fn table(lua: &Lua) -> mlua::Result<Table> {
    let cfg = Arc::new(Cfg::default());
    cfg.encode_depth.store(MAX_DEPTH, Ordering::Relaxed);
    cfg.decode_depth.store(MAX_DEPTH, Ordering::Relaxed);
    let t = lua.create_table()?;
    let c = cfg.clone();
    t.raw_set(
        "encode",
        lua.create_function(move |lua, v: Value| {
            let mut out = Vec::new();
            encode(&mut out, &v, 0, &c)?;
            lua.create_string(&out)
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "decode",
        lua.create_function(move |lua, s: mlua::LuaString| {
            let bytes = s.as_bytes();
            let mut p = Parser { s: &bytes, i: 0, max_depth: c.decode_depth.load(Ordering::Relaxed) };
            let v = p.value(lua, 0)?;
            p.ws();
            if p.i < bytes.len() {
                return p.fail("the end");
            }
            Ok(v)
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "encode_max_depth",
        lua.create_function(move |_, n: Option<u32>| {
            if let Some(n) = n {
                c.encode_depth.store(n.clamp(1, MAX_DEPTH), Ordering::Relaxed);
            }
            Ok(c.encode_depth.load(Ordering::Relaxed))
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "decode_max_depth",
        lua.create_function(move |_, n: Option<u32>| {
            if let Some(n) = n {
                c.decode_depth.store(n.clamp(1, MAX_DEPTH), Ordering::Relaxed);
            }
            Ok(c.decode_depth.load(Ordering::Relaxed))
        })?,
    )?;
    let c = cfg;
    t.raw_set(
        "encode_invalid_numbers",
        lua.create_function(move |_, on: Option<Value>| {
            if let Some(v) = on {
                c.invalid_numbers.store(!matches!(v, Value::Boolean(false) | Value::Nil), Ordering::Relaxed);
            }
            Ok(c.invalid_numbers.load(Ordering::Relaxed))
        })?,
    )?;
    for name in ["encode_keep_buffer", "encode_sparse_array", "decode_invalid_numbers", "encode_number_precision"] {
        t.raw_set(name, lua.create_function(|_, _: mlua::MultiValue| Ok(true))?)?;
    }
    t.raw_set("null", null())?;
    t.raw_set("_NAME", "cjson")?;
    t.raw_set("_VERSION", "2.1.0")?;
    Ok(t)
}
