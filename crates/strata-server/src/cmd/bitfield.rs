//! BITFIELD and BITFIELD_RO: signed and unsigned integers of 1 to 64 bits
//! (unsigned: 63) at any bit offset of a string, read, set and incremented
//! with Redis's overflow rules (WRAP, SAT, FAIL). Bit 0 is the most
//! significant bit of the first byte, as for SETBIT.

use bytes::Bytes;

use super::bits::offset_arg;
use super::{arg, is, read_typed, CmdError, CmdResult, Ctx};
use crate::keyspace::types::string;
use crate::keyspace::KeyType;
use crate::resp::Reply;

/// A field type: signedness and width in bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Field {
    signed: bool,
    bits: u32,
}

/// What happens when SET or INCRBY leaves the field's range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

/// One subcommand, in order.
enum Op {
    Get(Field, u64),
    Set(Field, u64, i64, Overflow),
    Incr(Field, u64, i64, Overflow),
}

fn field_arg(b: &[u8]) -> Result<Field, CmdError> {
    let bad = || {
        CmdError::Msg(
            "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.".into(),
        )
    };
    // Lower case only, and the width as Redis reads integers (no sign, no
    // leading zero).
    let (signed, digits) = match b.split_first() {
        Some((b'i', d)) => (true, d),
        Some((b'u', d)) => (false, d),
        _ => return Err(bad()),
    };
    let bits = crate::numbers::parse_i64(digits).ok_or_else(bad)?;
    if !(1..=64).contains(&bits) || (!signed && bits == 64) {
        return Err(bad());
    }
    Ok(Field { signed, bits: bits as u32 })
}

fn int_arg(b: &[u8]) -> Result<i64, CmdError> {
    crate::numbers::parse_i64(b).ok_or(CmdError::NotInt)
}

fn parse(args: &[Bytes], read_only: bool) -> Result<Vec<Op>, CmdError> {
    let mut ops = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut i = 2;
    while i < args.len() {
        let a = arg(args, i);
        let left = args.len() - i - 1;
        if is(a, "get") && left >= 2 {
            let f = field_arg(arg(args, i + 1))?;
            ops.push(Op::Get(f, offset_arg(arg(args, i + 2), Some(f.bits))?));
            i += 3;
        } else if (is(a, "set") || is(a, "incrby")) && left >= 3 {
            let f = field_arg(arg(args, i + 1))?;
            let off = offset_arg(arg(args, i + 2), Some(f.bits))?;
            let v = int_arg(arg(args, i + 3))?;
            ops.push(if is(a, "set") { Op::Set(f, off, v, overflow) } else { Op::Incr(f, off, v, overflow) });
            i += 4;
        } else if is(a, "overflow") && left >= 1 {
            let w = arg(args, i + 1);
            overflow = if is(w, "wrap") {
                Overflow::Wrap
            } else if is(w, "sat") {
                Overflow::Sat
            } else if is(w, "fail") {
                Overflow::Fail
            } else {
                return Err(CmdError::Msg("ERR Invalid OVERFLOW type specified".into()));
            };
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    // Refused only once every argument parsed, as Redis does.
    if read_only && ops.iter().any(|o| !matches!(o, Op::Get(..))) {
        return Err(CmdError::Msg("ERR BITFIELD_RO only supports the GET subcommand".into()));
    }
    Ok(ops)
}

/// The field's bits at `offset`, as an unsigned number (bytes past the
/// end read as zero).
fn read_bits(v: &[u8], offset: u64, bits: u32) -> u64 {
    let mut out = 0u64;
    for k in 0..u64::from(bits) {
        let pos = offset + k;
        let byte = v.get((pos >> 3) as usize).copied().unwrap_or(0);
        out = out << 1 | u64::from((byte >> (7 - (pos & 7))) & 1);
    }
    out
}

/// Writes the low `bits` bits of `value` at `offset` (`v` is long enough).
fn write_bits(v: &mut [u8], offset: u64, bits: u32, value: u64) {
    for k in 0..u64::from(bits) {
        let pos = offset + k;
        let bit = (value >> (u64::from(bits) - 1 - k)) & 1;
        if let Some(byte) = v.get_mut((pos >> 3) as usize) {
            let mask = 1u8 << (7 - (pos & 7));
            if bit == 1 {
                *byte |= mask;
            } else {
                *byte &= !mask;
            }
        }
    }
}

impl Field {
    /// The field's value from its raw bits.
    fn value(self, raw: u64) -> i64 {
        if self.signed && self.bits < 64 {
            let shift = 64 - self.bits;
            ((raw << shift) as i64) >> shift
        } else {
            raw as i64
        }
    }

    /// `value + incr` in the field, by Redis's overflow checks (kept
    /// exactly, edge cases included: with SAT, SET of `i64::MIN` into a
    /// field narrower than 64 bits saturates to the maximum, as there). `None`
    /// under FAIL when it does not fit.
    fn add(self, value: i64, incr: i64, overflow: Overflow) -> Option<i64> {
        if self.signed {
            signed_add(value, incr, self.bits, overflow)
        } else {
            unsigned_add(value as u64, incr, self.bits, overflow).map(|v| v as i64)
        }
    }

    /// The raw bits that store `v` (which fits).
    fn raw(self, v: i64) -> u64 {
        if self.bits == 64 {
            v as u64
        } else {
            (v as u64) & ((1u64 << self.bits) - 1)
        }
    }
}

/// Signed `value + incr` in `bits` bits (Redis's checkSignedBitfieldOverflow).
fn signed_add(value: i64, incr: i64, bits: u32, overflow: Overflow) -> Option<i64> {
    let max = if bits == 64 { i64::MAX } else { (1i64 << (bits - 1)) - 1 };
    let min = -max - 1;
    // These may wrap; they are only looked at once `value` is in range.
    let max_incr = (max as u64).wrapping_sub(value as u64) as i64;
    let min_incr = min.wrapping_sub(value);
    let wrap = || {
        let mut c = (value as u64).wrapping_add(incr as u64);
        if bits < 64 {
            let mask = u64::MAX << bits;
            c = if c & (1u64 << (bits - 1)) != 0 { c | mask } else { c & !mask };
        }
        c as i64
    };
    let over = value > max || (bits != 64 && incr > max_incr) || (value >= 0 && incr > 0 && incr > max_incr);
    let under = value < min || (bits != 64 && incr < min_incr) || (value < 0 && incr < 0 && incr < min_incr);
    match (over, under, overflow) {
        (false, false, _) => Some(value.wrapping_add(incr)),
        (_, _, Overflow::Fail) => None,
        (_, _, Overflow::Wrap) => Some(wrap()),
        (true, _, Overflow::Sat) => Some(max),
        (false, true, Overflow::Sat) => Some(min),
    }
}

/// Unsigned `value + incr` in `bits` bits (Redis's checkUnsignedBitfieldOverflow).
fn unsigned_add(value: u64, incr: i64, bits: u32, overflow: Overflow) -> Option<u64> {
    let max = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
    let max_incr = max.wrapping_sub(value) as i64;
    let min_incr = (value as i64).wrapping_neg();
    let wrap = || {
        let c = value.wrapping_add(incr as u64);
        if bits < 64 {
            c & !(u64::MAX << bits)
        } else {
            c
        }
    };
    let over = value > max || (bits != 64 && incr > max_incr) || (incr > 0 && incr > max_incr);
    let under = incr < 0 && incr < min_incr;
    match (over, under, overflow) {
        (false, false, _) => Some(value.wrapping_add(incr as u64)),
        (_, _, Overflow::Fail) => None,
        (_, _, Overflow::Wrap) => Some(wrap()),
        (true, _, Overflow::Sat) => Some(max),
        (false, true, Overflow::Sat) => Some(0),
    }
}

fn run(ctx: &mut Ctx<'_>, args: &[Bytes], read_only: bool) -> CmdResult {
    let key = arg(args, 1);
    let ops = parse(args, read_only)?;
    let writes = ops.iter().any(|o| !matches!(o, Op::Get(..)));
    if !writes {
        let v = read_typed(ctx, key, KeyType::String)?.map(|m| m.body).unwrap_or_default();
        return Ok(Reply::Array(
            ops.iter()
                .map(|o| match *o {
                    Op::Get(f, off) => Reply::Int(f.value(read_bits(&v, off, f.bits))),
                    _ => Reply::Nil,
                })
                .collect(),
        ));
    }
    let old = ctx.txn.meta_for_write(key)?;
    let (mut body, expire) = match &old {
        None => (Vec::new(), 0),
        Some(m) if m.kind != KeyType::String => return Err(CmdError::WrongType),
        Some(m) => (m.body.clone(), m.expire_ms),
    };
    let mut changed = false;
    let mut out = Vec::with_capacity(ops.len());
    for op in ops {
        let (f, off) = match op {
            Op::Get(f, off) | Op::Set(f, off, ..) | Op::Incr(f, off, ..) => (f, off),
        };
        let current = f.value(read_bits(&body, off, f.bits));
        let (new, reply) = match op {
            Op::Get(..) => {
                out.push(Reply::Int(current));
                continue;
            }
            // A write grows the string to hold the field even if it fails.
            // SET checks the value as `value + 0` (so an unsigned field
            // takes a negative one as its two's complement, past the top).
            Op::Set(_, _, v, ow) => (f.add(v, 0, ow), Reply::Int(current)),
            Op::Incr(_, _, by, ow) => {
                let n = f.add(current, by, ow);
                (n, n.map_or(Reply::Nil, Reply::Int))
            }
        };
        let need = ((off + u64::from(f.bits) - 1) >> 3) as usize + 1;
        if body.len() < need {
            body.resize(need, 0);
            changed = true;
        }
        match new {
            Some(n) => {
                changed |= read_bits(&body, off, f.bits) != f.raw(n);
                write_bits(&mut body, off, f.bits, f.raw(n));
                out.push(reply);
            }
            None => out.push(Reply::Nil),
        }
    }
    // Nothing changed (and the key existed): no write, as in Redis.
    if old.is_none() || changed {
        string::replace(&mut ctx.txn, key, old, body, expire)?;
    }
    Ok(Reply::Array(out))
}

pub(crate) fn bitfield(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    run(ctx, args, false)
}

pub(crate) fn bitfield_ro(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    run(ctx, args, true)
}

/// BITFIELD's key for COMMAND GETKEYSANDFLAGS (Redis's bitfieldGetKeys):
/// read only when every operation is a GET (an OVERFLOW changes nothing),
/// else read and updated (a syntax error counts as a write).
pub(crate) fn command_keys(args: &[Bytes]) -> Vec<(usize, u32)> {
    use super::spec::key_flag::{ACCESS, RO, RW, UPDATE};
    let mut i = 2;
    let mut read_only = true;
    while i < args.len() {
        let left = args.len() - i - 1;
        let a = &args[i];
        if a.eq_ignore_ascii_case(b"get") && left >= 2 {
            i += 3;
        } else if a.eq_ignore_ascii_case(b"overflow") && left >= 1 {
            i += 2;
        } else {
            read_only = false;
            break;
        }
    }
    vec![(1, if read_only { RO | ACCESS } else { RW | ACCESS | UPDATE })]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_fit_as_redis_fits_them() {
        let u8_ = Field { signed: false, bits: 8 };
        let i5 = Field { signed: true, bits: 5 };
        let i62 = Field { signed: true, bits: 62 };
        let i64_ = Field { signed: true, bits: 64 };
        assert_eq!(u8_.add(250, 50, Overflow::Wrap), Some(44));
        assert_eq!(u8_.add(-1, 0, Overflow::Wrap), Some(255));
        assert_eq!(u8_.add(-5, 0, Overflow::Sat), Some(255));
        assert_eq!(u8_.add(3, -5, Overflow::Sat), Some(0));
        assert_eq!(u8_.add(255, 1, Overflow::Fail), None);
        assert_eq!(i5.add(15, 1, Overflow::Wrap), Some(-16));
        assert_eq!(i5.add(-16, -1, Overflow::Wrap), Some(15));
        assert_eq!(i5.add(100, 0, Overflow::Sat), Some(15));
        assert_eq!(i5.add(-100, 0, Overflow::Sat), Some(-16));
        assert_eq!(i62.add(i64::MIN, 0, Overflow::Sat), Some((1 << 61) - 1));
        assert_eq!(i64_.add(i64::MAX, 1, Overflow::Wrap), Some(i64::MIN));
        assert_eq!(i5.value(i5.raw(-3)), -3);
        let mut v = vec![0u8; 3];
        write_bits(&mut v, 5, 11, 0b101_0000_0001);
        assert_eq!(read_bits(&v, 5, 11), 0b101_0000_0001);
        assert_eq!(read_bits(&v, 0, 5), 0);
    }
}
