//! Random members: SRANDMEMBER, HRANDFIELD, ZRANDMEMBER. Without a count,
//! one element (or nil); with a positive count, that many distinct
//! elements at most; with a negative one, exactly that many, repeats
//! allowed; as Redis 7. The collection is read whole (Redis walks its own
//! dict); fine for the sizes these commands are used on.

use bytes::Bytes;
use rand::seq::SliceRandom;
use rand::Rng;

use super::{arg, is, read_typed, CmdError, CmdResult, Ctx};
use crate::keyspace::types::zset::{self, ALL};
use crate::keyspace::KeyType;
use crate::resp::Reply;

/// Most elements a negative count may ask for.
const MAX_REPEATS: i64 = 1 << 26;

/// The count argument: Redis accepts -LONG_MAX..=LONG_MAX, and with
/// values half that (the reply holds two entries per pick).
fn count_arg(b: &[u8], with_values: bool) -> Result<i64, CmdError> {
    let n = crate::numbers::parse_i64(b).ok_or(CmdError::NotInt)?;
    if n == i64::MIN {
        return Err(CmdError::Msg(format!(
            "ERR value is out of range, value must between {} and {}",
            -i64::MAX,
            i64::MAX
        )));
    }
    if with_values && !(-i64::MAX / 2..=i64::MAX / 2).contains(&n) {
        return Err(CmdError::Msg("ERR value is out of range".into()));
    }
    // Repeats are built in memory: a count Redis would also try (and run
    // out of memory on) is refused here instead.
    if n < -MAX_REPEATS {
        return Err(CmdError::Msg(format!("ERR value is out of range, at most {MAX_REPEATS} picks with repeats")));
    }
    Ok(n)
}

/// Picks from `items` as a count of `n` asks: distinct ones for `n >= 0`,
/// `-n` with repeats otherwise.
fn pick<T: Clone>(mut items: Vec<T>, n: i64) -> Vec<T> {
    let mut rng = rand::thread_rng();
    if items.is_empty() || n == 0 {
        return Vec::new();
    }
    if n < 0 {
        let want = usize::try_from(n.unsigned_abs()).unwrap_or(usize::MAX);
        return (0..want).filter_map(|_| items.get(rng.gen_range(0..items.len())).cloned()).collect();
    }
    items.shuffle(&mut rng);
    items.truncate(usize::try_from(n).unwrap_or(usize::MAX));
    items
}

/// Parses `[count [WITH...]]` from argument 2: (count, with values).
fn options(args: &[Bytes], word: &str) -> Result<Option<(i64, bool)>, CmdError> {
    match args.len() {
        2 => Ok(None),
        3 => Ok(Some((count_arg(arg(args, 2), false)?, false))),
        4 if is(arg(args, 3), word) => Ok(Some((count_arg(arg(args, 2), true)?, true))),
        _ => {
            // The count is checked before the option, as Redis does.
            count_arg(arg(args, 2), false)?;
            Err(CmdError::Syntax)
        }
    }
}

/// Pairs as Redis sends them: flat in RESP2, [a, b] arrays in RESP3.
fn pairs(proto: u8, items: Vec<(Reply, Reply)>) -> Reply {
    if proto >= 3 {
        Reply::Array(items.into_iter().map(|(a, b)| Reply::Array(vec![a, b])).collect())
    } else {
        Reply::Array(items.into_iter().flat_map(|(a, b)| [a, b]).collect())
    }
}

/// SRANDMEMBER key [count]
pub(crate) fn srandmember(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let opts = options(args, "")?;
    let members = super::sets::members(ctx, arg(args, 1))?;
    Ok(match opts {
        None => pick(members, 1).pop().map(Reply::bulk_vec).unwrap_or(Reply::Nil),
        Some((n, _)) => Reply::Array(pick(members, n).into_iter().map(Reply::bulk_vec).collect()),
    })
}

/// HRANDFIELD key [count [WITHVALUES]]
pub(crate) fn hrandfield(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let opts = options(args, "withvalues")?;
    let fields = super::hashes::all_fields(ctx, arg(args, 1))?;
    Ok(match opts {
        None => pick(fields, 1).pop().map(|(f, _)| Reply::bulk_vec(f)).unwrap_or(Reply::Nil),
        Some((n, false)) => Reply::Array(pick(fields, n).into_iter().map(|(f, _)| Reply::bulk_vec(f)).collect()),
        Some((n, true)) => pairs(
            ctx.proto,
            pick(fields, n).into_iter().map(|(f, v)| (Reply::bulk_vec(f), Reply::bulk_vec(v))).collect(),
        ),
    })
}

/// ZRANDMEMBER key [count [WITHSCORES]]
pub(crate) fn zrandmember(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let opts = options(args, "withscores")?;
    let key = arg(args, 1);
    let mut members = Vec::new();
    if read_typed(ctx, key, KeyType::ZSet)?.is_some() {
        members = zset::in_scores(&mut ctx.txn, key, ALL.0, ALL.1)?;
    }
    Ok(match opts {
        None => pick(members, 1).pop().map(|(m, _)| Reply::bulk_vec(m)).unwrap_or(Reply::Nil),
        Some((n, false)) => Reply::Array(pick(members, n).into_iter().map(|(m, _)| Reply::bulk_vec(m)).collect()),
        Some((n, true)) => pairs(
            ctx.proto,
            pick(members, n).into_iter().map(|(m, s)| (Reply::bulk_vec(m), Reply::Double(s))).collect(),
        ),
    })
}
