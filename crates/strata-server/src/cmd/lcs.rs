//! LCS: the longest common subsequence of two strings (Redis 7), as the
//! string itself, its length, or the matching ranges.

use bytes::Bytes;

use super::{arg, int_arg, is, read_typed, CmdError, CmdResult, Ctx};
use crate::keyspace::KeyType;
use crate::resp::Reply;

/// Largest dynamic-programming table (4-byte cells), as Redis bounds it
/// by `proto-max-bulk-len` (512 MB).
const MAX_TABLE_BYTES: u128 = 512 << 20;

/// What LCS answers.
struct Want {
    len: bool,
    idx: bool,
    with_match_len: bool,
    min_match_len: i64,
}

fn parse(args: &[Bytes]) -> Result<Want, CmdError> {
    let mut w = Want { len: false, idx: false, with_match_len: false, min_match_len: 0 };
    let mut i = 3;
    while i < args.len() {
        let opt = arg(args, i);
        if is(opt, "idx") {
            w.idx = true;
        } else if is(opt, "len") {
            w.len = true;
        } else if is(opt, "withmatchlen") {
            w.with_match_len = true;
        } else if is(opt, "minmatchlen") && i + 1 < args.len() {
            w.min_match_len = int_arg(arg(args, i + 1))?.max(0);
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if w.idx && w.len {
        return Err(CmdError::Msg("ERR If you want both the length and indexes, please just use IDX.".into()));
    }
    Ok(w)
}

fn string_of(ctx: &mut Ctx<'_>, key: &[u8]) -> Result<Vec<u8>, CmdError> {
    match read_typed(ctx, key, KeyType::String) {
        Ok(m) => Ok(m.map(|m| m.body).unwrap_or_default()),
        Err(CmdError::WrongType) => Err(CmdError::Msg("ERR The specified keys must contain string values".into())),
        Err(e) => Err(e),
    }
}

/// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n] [WITHMATCHLEN].
pub(crate) fn lcs(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let a = string_of(ctx, arg(args, 1))?;
    let b = string_of(ctx, arg(args, 2))?;
    let want = parse(args)?;
    let (alen, blen) = (a.len(), b.len());
    if (alen as u128 + 1) * (blen as u128 + 1) * 4 > MAX_TABLE_BYTES {
        return Err(CmdError::Msg(
            "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len".into(),
        ));
    }
    // table[i][j]: the LCS length of a[..i] and b[..j].
    let width = blen + 1;
    let mut table = vec![0u32; (alen + 1) * width];
    let at = |i: usize, j: usize| i * width + j;
    for i in 1..=alen {
        for j in 1..=blen {
            let v = if a.get(i - 1) == b.get(j - 1) {
                table.get(at(i - 1, j - 1)).copied().unwrap_or(0) + 1
            } else {
                let up = table.get(at(i - 1, j)).copied().unwrap_or(0);
                let left = table.get(at(i, j - 1)).copied().unwrap_or(0);
                up.max(left)
            };
            if let Some(c) = table.get_mut(at(i, j)) {
                *c = v;
            }
        }
    }
    let total = table.get(at(alen, blen)).copied().unwrap_or(0);
    if want.len {
        return Ok(Reply::Int(i64::from(total)));
    }
    // Walk back from the end as Redis does, collecting the common bytes
    // and the ranges where both strings match contiguously.
    let mut result = vec![0u8; total as usize];
    let mut matches = Vec::new();
    let (mut i, mut j, mut k) = (alen, blen, total as usize);
    let none = alen;
    let (mut a_start, mut a_end, mut b_start, mut b_end) = (none, 0, 0, 0);
    while i > 0 && j > 0 {
        let mut emit = false;
        if a.get(i - 1) == b.get(j - 1) {
            if let (Some(r), Some(&c)) = (result.get_mut(k.wrapping_sub(1)), a.get(i - 1)) {
                *r = c;
            }
            if a_start == none {
                (a_start, a_end, b_start, b_end) = (i - 1, i - 1, j - 1, j - 1);
            } else if a_start == i && b_start == j {
                a_start -= 1;
                b_start -= 1;
            } else {
                emit = true;
            }
            if a_start == 0 || b_start == 0 {
                emit = true;
            }
            k = k.saturating_sub(1);
            i -= 1;
            j -= 1;
        } else {
            let up = table.get(at(i - 1, j)).copied().unwrap_or(0);
            let left = table.get(at(i, j - 1)).copied().unwrap_or(0);
            if up > left {
                i -= 1;
            } else {
                j -= 1;
            }
            emit = a_start != none;
        }
        if emit {
            let len = (a_end - a_start + 1) as i64;
            if want.min_match_len == 0 || len >= want.min_match_len {
                let mut m = vec![
                    Reply::Array(vec![Reply::Int(a_start as i64), Reply::Int(a_end as i64)]),
                    Reply::Array(vec![Reply::Int(b_start as i64), Reply::Int(b_end as i64)]),
                ];
                if want.with_match_len {
                    m.push(Reply::Int(len));
                }
                matches.push(Reply::Array(m));
            }
            a_start = none;
        }
    }
    if want.idx {
        return Ok(Reply::Map(vec![
            (Reply::bulk("matches"), Reply::Array(matches)),
            (Reply::bulk("len"), Reply::Int(i64::from(total))),
        ]));
    }
    Ok(Reply::bulk_vec(result))
}
