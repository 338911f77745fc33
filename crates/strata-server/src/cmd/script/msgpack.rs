//! `cmsgpack` for scripts: lua-cmsgpack's pack, unpack, unpack_one and
//! unpack_limit (integers in the smallest form, floats as float32 when
//! exact, tables as arrays when their keys are 1..n, nesting cut at 16).

use mlua::{Lua, MultiValue, Table, Value};

/// Tables deeper than this are packed as nil.
const MAX_NESTING: usize = 16;

fn rt(msg: &str) -> mlua::Error {
    mlua::Error::runtime(msg)
}

fn pack_int(out: &mut Vec<u8>, n: i64) {
    if n >= 0 {
        match n {
            0..=127 => out.push(n as u8),
            128..=0xff => out.extend_from_slice(&[0xcc, n as u8]),
            0x100..=0xffff => {
                out.push(0xcd);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            }
            0x10000..=0xffff_ffff => {
                out.push(0xce);
                out.extend_from_slice(&(n as u32).to_be_bytes());
            }
            _ => {
                out.push(0xcf);
                out.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2147483648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn pack_len(out: &mut Vec<u8>, len: usize, fix: u8, fix_max: usize, tags: [u8; 2]) {
    if len < fix_max {
        out.push(fix | len as u8);
    } else if len <= 0xffff {
        out.push(tags[0]);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(tags[1]);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
}

fn pack_number(out: &mut Vec<u8>, n: f64) {
    if n.is_finite() && n == n.trunc() && n.abs() < 9.2e18 {
        pack_int(out, n as i64);
    } else if f64::from(n as f32) == n || n.is_nan() {
        out.push(0xca);
        out.extend_from_slice(&(n as f32).to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// The length of `t` if its keys are exactly 1..n.
fn array_len(t: &Table) -> mlua::Result<Option<usize>> {
    Ok(super::convert::integer_keys(t)?.and_then(|(max, count)| (max == count).then_some(count)))
}

fn pack(out: &mut Vec<u8>, v: &Value, level: usize) -> mlua::Result<()> {
    match v {
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => pack_int(out, *i),
        Value::Number(n) => pack_number(out, *n),
        Value::String(s) => {
            let b = s.as_bytes();
            let len = b.len();
            if len < 32 {
                out.push(0xa0 | len as u8);
            } else if len <= 0xff {
                out.extend_from_slice(&[0xd9, len as u8]);
            } else if len <= 0xffff {
                out.push(0xda);
                out.extend_from_slice(&(len as u16).to_be_bytes());
            } else {
                out.push(0xdb);
                out.extend_from_slice(&(len as u32).to_be_bytes());
            }
            out.extend_from_slice(&b);
        }
        Value::Table(_) if level == MAX_NESTING => out.push(0xc0),
        Value::Table(t) => match array_len(t)? {
            Some(n) => {
                pack_len(out, n, 0x90, 16, [0xdc, 0xdd]);
                for i in 1..=n {
                    pack(out, &t.raw_get::<Value>(i)?, level + 1)?;
                }
            }
            None => {
                // Counted first, then packed pair by pair: every value
                // held at once takes a slot of Lua's stack.
                let n = t.pairs::<Value, Value>().count();
                pack_len(out, n, 0x80, 16, [0xde, 0xdf]);
                for pair in t.pairs::<Value, Value>() {
                    let (k, val) = pair?;
                    pack(out, &k, level + 1)?;
                    pack(out, &val, level + 1)?;
                }
            }
        },
        _ => out.push(0xc0),
    }
    Ok(())
}

/// Deepest nesting unpacked (decoding recurses).
const MAX_UNPACK_DEPTH: usize = 1000;

struct Reader<'a> {
    s: &'a [u8],
    i: usize,
    depth: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> mlua::Result<&[u8]> {
        let end = self.i.checked_add(n).ok_or_else(|| rt("Missing bytes in input."))?;
        let b = self.s.get(self.i..end).ok_or_else(|| rt("Missing bytes in input."))?;
        self.i = end;
        Ok(b)
    }

    fn uint(&mut self, n: usize) -> mlua::Result<u64> {
        Ok(self.take(n)?.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }

    fn seq(&mut self, lua: &Lua, n: usize) -> mlua::Result<Value> {
        let t = lua.create_table_with_capacity(n.min(1 << 16), 0)?;
        for i in 1..=n {
            t.raw_set(i, self.value(lua)?)?;
        }
        Ok(Value::Table(t))
    }

    fn map(&mut self, lua: &Lua, n: usize) -> mlua::Result<Value> {
        let t = lua.create_table()?;
        for _ in 0..n {
            let k = self.value(lua)?;
            let v = self.value(lua)?;
            if !matches!(k, Value::Nil) {
                t.raw_set(k, v)?;
            }
        }
        Ok(Value::Table(t))
    }

    fn str(&mut self, lua: &Lua, n: usize) -> mlua::Result<Value> {
        let b = self.take(n)?;
        Ok(Value::String(lua.create_string(b)?))
    }

    fn value(&mut self, lua: &Lua) -> mlua::Result<Value> {
        if self.depth >= MAX_UNPACK_DEPTH {
            return Err(rt("Bad data format in input: nesting too deep."));
        }
        self.depth += 1;
        let v = self.value_at(lua);
        self.depth -= 1;
        v
    }

    fn value_at(&mut self, lua: &Lua) -> mlua::Result<Value> {
        let tag = self.uint(1)? as u8;
        Ok(match tag {
            0x00..=0x7f => Value::Number(f64::from(tag)),
            0x80..=0x8f => self.map(lua, usize::from(tag & 0x0f))?,
            0x90..=0x9f => self.seq(lua, usize::from(tag & 0x0f))?,
            0xa0..=0xbf => self.str(lua, usize::from(tag & 0x1f))?,
            0xc0 => Value::Nil,
            0xc2 => Value::Boolean(false),
            0xc3 => Value::Boolean(true),
            0xc4 | 0xd9 => {
                let n = self.uint(1)? as usize;
                self.str(lua, n)?
            }
            0xc5 | 0xda => {
                let n = self.uint(2)? as usize;
                self.str(lua, n)?
            }
            0xc6 | 0xdb => {
                let n = self.uint(4)? as usize;
                self.str(lua, n)?
            }
            0xca => Value::Number(f64::from(f32::from_bits(self.uint(4)? as u32))),
            0xcb => Value::Number(f64::from_bits(self.uint(8)?)),
            0xcc => Value::Number(self.uint(1)? as f64),
            0xcd => Value::Number(self.uint(2)? as f64),
            0xce => Value::Number(self.uint(4)? as f64),
            0xcf => Value::Number(self.uint(8)? as f64),
            0xd0 => Value::Number(f64::from(self.uint(1)? as u8 as i8)),
            0xd1 => Value::Number(f64::from(self.uint(2)? as u16 as i16)),
            0xd2 => Value::Number(f64::from(self.uint(4)? as u32 as i32)),
            0xd3 => Value::Number(self.uint(8)? as i64 as f64),
            0xdc => {
                let n = self.uint(2)? as usize;
                self.seq(lua, n)?
            }
            0xdd => {
                let n = self.uint(4)? as usize;
                self.seq(lua, n)?
            }
            0xde => {
                let n = self.uint(2)? as usize;
                self.map(lua, n)?
            }
            0xdf => {
                let n = self.uint(4)? as usize;
                self.map(lua, n)?
            }
            0xe0..=0xff => Value::Number(f64::from(tag as i8)),
            _ => return Err(rt("Bad data format in input.")),
        })
    }
}

/// Decodes up to `limit` objects (0: all) from `offset`; the offset after
/// them (-1 at the end of the input) and the objects.
fn unpack(lua: &Lua, s: &[u8], limit: usize, offset: usize) -> mlua::Result<(i64, Vec<Value>)> {
    let mut r = Reader { s, i: offset, depth: 0 };
    let mut out = Vec::new();
    while r.i < s.len() && (limit == 0 || out.len() < limit) {
        out.push(r.value(lua)?);
    }
    let next = if r.i >= s.len() { -1 } else { r.i as i64 };
    Ok((next, out))
}

/// Builds the `cmsgpack` table.
pub(crate) fn table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "pack",
        lua.create_function(|lua, args: MultiValue| {
            if args.is_empty() {
                return Err(rt("MessagePack pack needs input."));
            }
            let mut out = Vec::new();
            for v in args.iter() {
                pack(&mut out, v, 0)?;
            }
            lua.create_string(&out)
        })?,
    )?;
    t.raw_set(
        "unpack",
        lua.create_function(|lua, s: mlua::LuaString| {
            let (_, vals) = unpack(lua, &s.as_bytes(), 0, 0)?;
            Ok(MultiValue::from_iter(vals))
        })?,
    )?;
    t.raw_set(
        "unpack_one",
        lua.create_function(|lua, (s, offset): (mlua::LuaString, Option<i64>)| {
            let (next, vals) = unpack(lua, &s.as_bytes(), 1, offset.unwrap_or(0).max(0) as usize)?;
            Ok(MultiValue::from_iter(std::iter::once(Value::Number(next as f64)).chain(vals)))
        })?,
    )?;
    t.raw_set(
        "unpack_limit",
        lua.create_function(|lua, (s, limit, offset): (mlua::LuaString, Option<i64>, Option<i64>)| {
            let limit = limit.unwrap_or(0).max(0) as usize;
            let (next, vals) = unpack(lua, &s.as_bytes(), limit, offset.unwrap_or(0).max(0) as usize)?;
            Ok(MultiValue::from_iter(std::iter::once(Value::Number(next as f64)).chain(vals)))
        })?,
    )?;
    t.raw_set("_NAME", "cmsgpack")?;
    t.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    Ok(t)
}
