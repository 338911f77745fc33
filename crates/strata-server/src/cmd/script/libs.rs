//! Libraries Redis gives scripts beyond Lua's own: `bit` (LuaBitOp's
//! 32-bit operations), `cjson` and `cmsgpack`, written here in Rust.

use mlua::{Lua, Variadic};

/// A number as LuaBitOp's 32-bit integer (rounded, wrapped modulo 2^32).
fn tobit(n: f64) -> i32 {
    if !n.is_finite() {
        return 0;
    }
    let r = n.round_ties_even() % 4294967296.0;
    (r as i64) as u32 as i32
}

fn num(v: i32) -> f64 {
    f64::from(v)
}

/// Installs the libraries as globals of `lua`.
pub(crate) fn install(lua: &Lua) -> mlua::Result<()> {
    let bit = lua.create_table()?;
    bit.raw_set("tobit", lua.create_function(|_, x: f64| Ok(num(tobit(x))))?)?;
    bit.raw_set("bnot", lua.create_function(|_, x: f64| Ok(num(!tobit(x))))?)?;
    let fold = |lua: &Lua, f: fn(i32, i32) -> i32| {
        lua.create_function(move |_, (x, rest): (f64, Variadic<f64>)| {
            Ok(num(rest.iter().fold(tobit(x), |acc, &y| f(acc, tobit(y)))))
        })
    };
    bit.raw_set("band", fold(lua, |a, b| a & b)?)?;
    bit.raw_set("bor", fold(lua, |a, b| a | b)?)?;
    bit.raw_set("bxor", fold(lua, |a, b| a ^ b)?)?;
    let shift = |lua: &Lua, f: fn(i32, u32) -> i32| {
        lua.create_function(move |_, (x, n): (f64, f64)| Ok(num(f(tobit(x), (tobit(n) as u32) & 31))))
    };
    bit.raw_set("lshift", shift(lua, |a, n| ((a as u32) << n) as i32)?)?;
    bit.raw_set("rshift", shift(lua, |a, n| ((a as u32) >> n) as i32)?)?;
    bit.raw_set("arshift", shift(lua, |a, n| a >> n)?)?;
    bit.raw_set("rol", shift(lua, |a, n| (a as u32).rotate_left(n) as i32)?)?;
    bit.raw_set("ror", shift(lua, |a, n| (a as u32).rotate_right(n) as i32)?)?;
    bit.raw_set("bswap", lua.create_function(|_, x: f64| Ok(num(tobit(x).swap_bytes())))?)?;
    bit.raw_set(
        "tohex",
        lua.create_function(|_, (x, n): (f64, Option<f64>)| {
            let n = n.map(tobit).unwrap_or(8);
            let upper = n < 0;
            let digits = (i64::from(n).unsigned_abs().min(8)) as usize;
            let v = tobit(x) as u32;
            let full = if upper { format!("{v:08X}") } else { format!("{v:08x}") };
            Ok(full.get(8 - digits..).unwrap_or_default().to_string())
        })?,
    )?;
    lua.globals().raw_set("bit", bit)?;
    lua.globals().raw_set("cjson", super::json::table(lua)?)?;
    lua.globals().raw_set("cmsgpack", super::msgpack::table(lua)?)?;
    Ok(())
}
