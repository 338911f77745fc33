//! Bit commands on string values: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP.
//! Bit 0 is the most significant bit of the first byte, as in Redis.

use bytes::Bytes;

use super::strings::MAX_STRING;
use super::{arg, int_arg, is, read_typed, CmdError, CmdResult, Ctx};
use crate::keyspace::types::string;
use crate::keyspace::KeyType;
use crate::resp::Reply;

/// A bit offset argument; with `field_bits`, `#n` means the n-th field of
/// that width (BITFIELD). Refused past the longest string.
pub(super) fn offset_arg(b: &[u8], field_bits: Option<u32>) -> Result<u64, CmdError> {
    let bad = || CmdError::Msg("ERR bit offset is not an integer or out of range".into());
    let (n, per) = match (b.split_first(), field_bits) {
        (Some((b'#', digits)), Some(bits)) => (crate::numbers::parse_i64(digits), i64::from(bits)),
        _ => (crate::numbers::parse_i64(b), 1),
    };
    let n = n.and_then(|n| n.checked_mul(per)).ok_or_else(bad)?;
    if n < 0 || (n as u64 >> 3) >= MAX_STRING {
        return Err(bad());
    }
    Ok(n as u64)
}

fn bit_at(v: &[u8], offset: u64) -> u8 {
    let byte = v.get((offset >> 3) as usize).copied().unwrap_or(0);
    (byte >> (7 - (offset & 7))) & 1
}

pub(crate) fn setbit(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let key = arg(args, 1);
    let offset = offset_arg(arg(args, 2), None)?;
    let on = match arg(args, 3) {
        b"1" => true,
        b"0" => false,
        _ => return Err(CmdError::Msg("ERR bit is not an integer or out of range".into())),
    };
    let old = ctx.txn.meta_for_write(key)?;
    let (mut body, expire) = match &old {
        None => (Vec::new(), 0),
        Some(m) if m.kind != KeyType::String => return Err(CmdError::WrongType),
        Some(m) => (m.body.clone(), m.expire_ms),
    };
    let prev = bit_at(&body, offset);
    let at = (offset >> 3) as usize;
    // An existing key that this leaves as it is is not written (Redis
    // counts no change either).
    if old.is_some() && body.len() > at && prev == u8::from(on) {
        return Ok(Reply::Int(i64::from(prev)));
    }
    if body.len() <= at {
        body.resize(at + 1, 0);
    }
    let mask = 1u8 << (7 - (offset & 7));
    if let Some(b) = body.get_mut(at) {
        if on {
            *b |= mask;
        } else {
            *b &= !mask;
        }
    }
    string::replace(&mut ctx.txn, key, old, body, expire)?;
    Ok(Reply::Int(i64::from(prev)))
}

pub(crate) fn getbit(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let offset = offset_arg(arg(args, 2), None)?;
    let v = read_typed(ctx, arg(args, 1), KeyType::String)?.map(|m| m.body).unwrap_or_default();
    Ok(Reply::Int(i64::from(bit_at(&v, offset))))
}

/// A `start end [BYTE|BIT]` range over `v` as a range of bit positions
/// (inclusive), after Redis's rules for negative and out-of-range indexes;
/// `None` when it is empty.
fn bit_range(v: &[u8], start: i64, end: i64, bits: bool) -> Option<(u64, u64)> {
    let total = if bits { (v.len() as i64).saturating_mul(8) } else { v.len() as i64 };
    let mut start = if start < 0 { total.saturating_add(start) } else { start };
    let mut end = if end < 0 { total.saturating_add(end) } else { end };
    start = start.max(0);
    end = end.max(0);
    if end >= total {
        end = total - 1;
    }
    if total == 0 || start > end {
        return None;
    }
    if bits {
        Some((start as u64, end as u64))
    } else {
        Some((start as u64 * 8, end as u64 * 8 + 7))
    }
}

/// The `BYTE|BIT` unit argument at `i`, if present.
fn unit_arg(args: &[Bytes], i: usize) -> Result<bool, CmdError> {
    match args.get(i) {
        None => Ok(false),
        Some(u) if is(u, "byte") => Ok(false),
        Some(u) if is(u, "bit") => Ok(true),
        Some(_) => Err(CmdError::Syntax),
    }
}

fn count_ones(v: &[u8], from: u64, to: u64) -> u64 {
    let mut n = 0u64;
    let mut i = from;
    while i <= to {
        if i & 7 == 0 && i + 7 <= to {
            n += u64::from(v.get((i >> 3) as usize).copied().unwrap_or(0).count_ones());
            i += 8;
        } else {
            n += u64::from(bit_at(v, i));
            i += 1;
        }
    }
    n
}

pub(crate) fn bitcount(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    // As Redis 7.0: the key is looked up before the range is parsed.
    let Some(meta) = read_typed(ctx, arg(args, 1), KeyType::String)? else { return Ok(Reply::Int(0)) };
    let v = meta.body;
    let range = match args.len() {
        2 => (!v.is_empty()).then(|| (0, v.len() as u64 * 8 - 1)),
        4 | 5 => {
            let (start, end) = (int_arg(arg(args, 2))?, int_arg(arg(args, 3))?);
            let bits = unit_arg(args, 4)?;
            // Both counted from the end and crossed: empty (Redis 7.0.15
            // BITCOUNT; its BITPOS clamps them instead).
            if start < 0 && end < 0 && start > end {
                return Ok(Reply::Int(0));
            }
            bit_range(&v, start, end, bits)
        }
        _ => return Err(CmdError::Syntax),
    };
    Ok(Reply::Int(range.map(|(a, b)| count_ones(&v, a, b) as i64).unwrap_or(0)))
}

pub(crate) fn bitpos(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let want = match int_arg(arg(args, 2))? {
        0 => 0u8,
        1 => 1u8,
        _ => return Err(CmdError::Msg("ERR The bit argument must be 1 or 0.".into())),
    };
    let Some(meta) = read_typed(ctx, arg(args, 1), KeyType::String)? else {
        return Ok(Reply::Int(if want == 1 { -1 } else { 0 }));
    };
    let v = meta.body;
    let end_given = args.len() >= 5;
    let range = match args.len() {
        3 => (!v.is_empty()).then(|| (0, v.len() as u64 * 8 - 1)),
        4..=6 => {
            let start = int_arg(arg(args, 3))?;
            let end = if end_given { int_arg(arg(args, 4))? } else { -1 };
            let bits = unit_arg(args, 5)?;
            bit_range(&v, start, end, bits)
        }
        _ => return Err(CmdError::Syntax),
    };
    let Some((from, to)) = range else { return Ok(Reply::Int(-1)) };
    let skip = if want == 1 { 0u8 } else { 0xff };
    let mut i = from;
    while i <= to {
        if i & 7 == 0 && i + 7 <= to && v.get((i >> 3) as usize).copied().unwrap_or(0) == skip {
            i += 8;
            continue;
        }
        if bit_at(&v, i) == want {
            return Ok(Reply::Int(i as i64));
        }
        i += 1;
    }
    // No clear bit in the string: without an explicit end, the string
    // counts as padded with zeros, so the first one is just past its end.
    if want == 0 && !end_given {
        return Ok(Reply::Int(((to >> 3) + 1) as i64 * 8));
    }
    Ok(Reply::Int(-1))
}

pub(crate) fn bitop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let op = arg(args, 1);
    let dest = arg(args, 2);
    let sources = args.get(3..).unwrap_or_default();
    #[derive(PartialEq)]
    enum Op {
        And,
        Or,
        Xor,
        Not,
    }
    let op = if is(op, "and") {
        Op::And
    } else if is(op, "or") {
        Op::Or
    } else if is(op, "xor") {
        Op::Xor
    } else if is(op, "not") {
        Op::Not
    } else {
        return Err(CmdError::Syntax);
    };
    if op == Op::Not && sources.len() != 1 {
        return Err(CmdError::Msg("ERR BITOP NOT must be called with a single source key.".into()));
    }
    let mut values = Vec::with_capacity(sources.len());
    for k in sources {
        values.push(read_typed(ctx, k, KeyType::String)?.map(|m| m.body).unwrap_or_default());
    }
    let len = values.iter().map(Vec::len).max().unwrap_or(0);
    let mut out = vec![0u8; len];
    for (j, o) in out.iter_mut().enumerate() {
        let byte = |v: &Vec<u8>| v.get(j).copied().unwrap_or(0);
        let mut it = values.iter().map(byte);
        let first = it.next().unwrap_or(0);
        *o = match op {
            Op::And => it.fold(first, |a, b| a & b),
            Op::Or => it.fold(first, |a, b| a | b),
            Op::Xor => it.fold(first, |a, b| a ^ b),
            Op::Not => !first,
        };
    }
    let old = ctx.txn.meta_for_write(dest)?;
    if out.is_empty() {
        if let Some(m) = old {
            ctx.txn.delete_key(dest, &m)?;
            ctx.txn.note("del", dest);
        }
    } else {
        string::replace(&mut ctx.txn, dest, old, out, 0)?;
    }
    Ok(Reply::Int(len as i64))
}
