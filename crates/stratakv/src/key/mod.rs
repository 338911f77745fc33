//! Internal keys: a user key followed by an 8-byte trailer.
//!
//! The byte layout is in FORMAT.md, "Internal keys".
//! Internal keys order by user key ascending, then trailer *descending*,
//! so the newest version of a key comes first. Kinds are written to disk
//! and must never be renumbered.
//!
//! Besides internal keys, this module holds what every layer of the tree
//! shares about keys: the key hash that filters and hash indexes use, the
//! 8-byte key prefix word that skiplists, rows and fences compare first,
//! the [`Lookup`] answer of one layer, [`KeyRange`] and the optional
//! [`PrefixExtractor`].

pub(crate) mod partition;
mod prefix;
mod range;

pub(crate) use prefix::prefix_hash;
pub use prefix::{range_prefix, FixedPrefix, PrefixExtractor};
pub use range::KeyRange;

use std::cmp::Ordering;

/// A sequence number: every write gets the next one.
pub type SeqNo = u64;

/// The largest sequence number (56 bits).
pub const MAX_SEQ: SeqNo = (1 << 56) - 1;

/// Limits on user input (DESIGN.md §6).
pub const MAX_KEY_LEN: usize = 64 << 10;
/// Largest value accepted.
pub const MAX_VALUE_LEN: usize = 256 << 20;

/// What an entry does to its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// A tombstone.
    Delete = 0,
    /// A value.
    Put = 1,
}

impl Kind {
    /// Decodes a kind byte.
    pub fn from_u8(b: u8) -> Option<Kind> {
        match b {
            0 => Some(Kind::Delete),
            1 => Some(Kind::Put),
            _ => None,
        }
    }
}

/// The kind used in seek keys: the largest, so a seek for (k, s) lands on
/// the newest entry with sequence <= s.
pub const KIND_FOR_SEEK: Kind = Kind::Put;

/// Packs a sequence number and kind.
pub fn trailer(seq: SeqNo, kind: Kind) -> u64 {
    (seq << 8) | kind as u64
}

/// Builds an internal key into `dst` (cleared first).
pub fn make_internal_key(dst: &mut Vec<u8>, user_key: &[u8], seq: SeqNo, kind: Kind) {
    dst.clear();
    dst.reserve(user_key.len() + 8);
    dst.extend_from_slice(user_key);
    dst.extend_from_slice(&trailer(seq, kind).to_le_bytes());
}

/// A new internal key.
pub fn internal_key(user_key: &[u8], seq: SeqNo, kind: Kind) -> Vec<u8> {
    let mut v = Vec::new();
    make_internal_key(&mut v, user_key, seq, kind);
    v
}

/// An internal key split into parts. Only built from keys that are at least
/// 8 bytes long; see [`ParsedKey::parse`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParsedKey<'a> {
    /// The user's key.
    pub user_key: &'a [u8],
    /// Its sequence number.
    pub seq: SeqNo,
    /// What it does.
    pub kind: Kind,
}

impl<'a> ParsedKey<'a> {
    /// Splits an internal key; `None` if it is too short or the kind is unknown.
    pub fn parse(ikey: &'a [u8]) -> Option<ParsedKey<'a>> {
        let n = ikey.len().checked_sub(8)?;
        let t = u64::from_le_bytes(ikey.get(n..)?.try_into().ok()?);
        Some(ParsedKey { user_key: ikey.get(..n)?, seq: t >> 8, kind: Kind::from_u8(t as u8)? })
    }
}

/// The user-key part of an internal key (the whole slice if it is too short).
pub fn user_key(ikey: &[u8]) -> &[u8] {
    ikey.get(..ikey.len().saturating_sub(8)).unwrap_or(ikey)
}

/// The trailer of an internal key (0 if it is too short).
pub fn key_trailer(ikey: &[u8]) -> u64 {
    let n = ikey.len().saturating_sub(8);
    ikey.get(n..).and_then(|t| t.try_into().ok()).map(u64::from_le_bytes).unwrap_or(0)
}

/// The internal-key order: user key ascending, then trailer descending.
pub fn compare_internal(a: &[u8], b: &[u8]) -> Ordering {
    match user_key(a).cmp(user_key(b)) {
        Ordering::Equal => key_trailer(b).cmp(&key_trailer(a)),
        o => o,
    }
}

/// Hash of a user key, used by every filter and hash index (stable across
/// versions: table filters and matrix rows store it).
pub fn key_hash(user_key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(user_key)
}

/// The first 8 bytes of a user key, zero padded, as a big-endian number:
/// if `a < b` then `key_prefix(a) <= key_prefix(b)`, so comparing prefixes
/// orders two keys whenever their prefixes differ.
pub fn key_prefix(user_key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = user_key.len().min(8);
    b[..n].copy_from_slice(&user_key[..n]);
    u64::from_be_bytes(b)
}

/// Result of a point lookup in one layer of the tree.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup {
    /// The newest visible version is a value.
    Found(Vec<u8>),
    /// The newest visible version is a tombstone.
    Deleted,
    /// This layer has no version of the key.
    Missing,
}

/// A key shorter than or equal to `limit`'s user key that is >= `start`:
/// used for index-block separators. Works on user keys.
pub fn shortest_separator(start: &[u8], limit: &[u8]) -> Vec<u8> {
    let common = start.iter().zip(limit).take_while(|(a, b)| a == b).count();
    if common < start.len() && common < limit.len() {
        if let (Some(&s), Some(&l)) = (start.get(common), limit.get(common)) {
            if s < 0xff && s + 1 < l {
                let mut out = start[..common].to_vec();
                out.push(s + 1);
                return out;
            }
        }
    }
    start.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newer_versions_sort_first() {
        let a = internal_key(b"k", 10, Kind::Put);
        let b = internal_key(b"k", 5, Kind::Put);
        let c = internal_key(b"l", 99, Kind::Put);
        assert_eq!(compare_internal(&a, &b), Ordering::Less);
        assert_eq!(compare_internal(&b, &c), Ordering::Less);
        let seek = internal_key(b"k", 7, KIND_FOR_SEEK);
        assert_eq!(compare_internal(&seek, &b), Ordering::Less);
        assert_eq!(compare_internal(&a, &seek), Ordering::Less);
    }

    #[test]
    fn parse_rejects_short_and_unknown_kind() {
        assert!(ParsedKey::parse(b"short").is_none());
        let mut k = internal_key(b"x", 3, Kind::Delete);
        let p = ParsedKey::parse(&k).unwrap();
        assert_eq!((p.user_key, p.seq, p.kind), (&b"x"[..], 3, Kind::Delete));
        let n = k.len();
        k[n - 8] = 9;
        assert!(ParsedKey::parse(&k).is_none());
    }

    #[test]
    fn separator_is_between() {
        let s = shortest_separator(b"abcdef", b"abzz");
        assert!(s.as_slice() >= &b"abcdef"[..] && s.as_slice() < &b"abzz"[..]);
        assert_eq!(s, b"abd");
        assert_eq!(shortest_separator(b"abc", b"abd"), b"abc");
    }
}
