//! The serialized values of DUMP and RESTORE: one value in Redis's RDB
//! object format, followed by the RDB version (2 bytes, little-endian) and
//! a CRC-64 (Jones, as Redis computes it) of everything before it.
//!
//! DUMP writes the plain RDB types (string, list, set, hash, sorted set
//! with binary scores), which Redis 7 restores too. RESTORE also reads the
//! compact encodings Redis 7.0 and 7.2 dump (listpacks, quicklists of
//! listpacks, intsets), LZF-compressed and integer-encoded strings, and
//! the ziplists of payloads from Redis 6 and older.
//!
//! The same value format is what an RDB file holds per key: [`write`]
//! streams a whole keyspace as an RDB file (a full sync's image, from a
//! store's point-in-time view) and [`read`] parses one (a Redis primary's
//! full sync, a `dump.rdb`), both on this module's encoders and
//! [`decode`]'s decoders.

mod decode;
pub mod digest;
pub mod image;
pub mod read;
pub mod write;

use decode::{Budget, Decoder, SliceInput};

/// RDB version written after a dumped value and at the head of an RDB
/// file (Redis 7.0's).
pub const DUMP_VERSION: u16 = 10;
/// Newest RDB version RESTORE and the RDB reader accept (Redis 7.2's).
pub const NEWEST_VERSION: u16 = 11;
/// Longest string RESTORE takes (the server's longest string value).
const MAX_LEN: u64 = crate::keyspace::MAX_STRING;
/// What one RESTORE may decode, counting each element's bytes plus
/// [`ENTRY_COST`]: a payload is small (compressed, or integers packed in a
/// few bits) but becomes one entry per element in the command's
/// transaction, so without a bound a 75 KB payload took a gigabyte.
const BUDGET: u64 = 256 << 20;
/// What an element costs beyond its bytes, as a transaction holds it.
const ENTRY_COST: u64 = 256;

/// CRC-64 (Jones) as Redis computes it, of payloads and of RDB files.
static CRC: crc::Crc<u64> = crc::Crc::<u64>::new(&crc::CRC_64_REDIS);

pub use crate::keyspace::Pairs;

/// One key's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A string.
    String(Vec<u8>),
    /// A list's elements, head first.
    List(Vec<Vec<u8>>),
    /// A set's members.
    Set(Vec<Vec<u8>>),
    /// A hash's fields and values.
    Hash(Pairs),
    /// A sorted set's members and scores.
    ZSet(Vec<(Vec<u8>, f64)>),
}

/// Why a payload was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Too short, a newer RDB version, or a wrong checksum.
    VersionOrChecksum,
    /// Not a value this reader understands, an empty collection, or
    /// duplicate members (as Redis refuses them).
    BadFormat,
    /// Larger than this server restores in one command (a string over
    /// [`MAX_LEN`], or more than [`BUDGET`] decoded).
    TooLarge,
}

// RDB object types.
pub(crate) const T_STRING: u8 = 0;
pub(crate) const T_LIST: u8 = 1;
pub(crate) const T_SET: u8 = 2;
pub(crate) const T_ZSET: u8 = 3;
pub(crate) const T_HASH: u8 = 4;
pub(crate) const T_ZSET_2: u8 = 5;
pub(crate) const T_LIST_ZIPLIST: u8 = 10;
pub(crate) const T_SET_INTSET: u8 = 11;
pub(crate) const T_ZSET_ZIPLIST: u8 = 12;
pub(crate) const T_HASH_ZIPLIST: u8 = 13;
pub(crate) const T_LIST_QUICKLIST: u8 = 14;
pub(crate) const T_HASH_LISTPACK: u8 = 16;
pub(crate) const T_ZSET_LISTPACK: u8 = 17;
pub(crate) const T_LIST_QUICKLIST_2: u8 = 18;
pub(crate) const T_SET_LISTPACK: u8 = 20;

/// `value` serialized as DUMP answers it.
pub fn dump(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    match value {
        Value::String(s) => {
            out.push(T_STRING);
            put_string(&mut out, s);
        }
        Value::List(items) | Value::Set(items) => {
            out.push(if matches!(value, Value::List(_)) { T_LIST } else { T_SET });
            put_len(&mut out, items.len() as u64);
            for i in items {
                put_string(&mut out, i);
            }
        }
        Value::Hash(pairs) => {
            out.push(T_HASH);
            put_len(&mut out, pairs.len() as u64);
            for (f, v) in pairs {
                put_string(&mut out, f);
                put_string(&mut out, v);
            }
        }
        Value::ZSet(members) => {
            out.push(T_ZSET_2);
            put_len(&mut out, members.len() as u64);
            for (m, score) in members {
                put_string(&mut out, m);
                out.extend_from_slice(&score.to_le_bytes());
            }
        }
    }
    seal(out)
}

/// `body` (one serialized value) followed by the RDB version DUMP writes
/// and the checksum: a payload RESTORE checks as valid.
pub fn seal(mut body: Vec<u8>) -> Vec<u8> {
    body.extend_from_slice(&DUMP_VERSION.to_le_bytes());
    let crc = CRC.checksum(&body);
    body.extend_from_slice(&crc.to_le_bytes());
    body
}

/// The value in a DUMP payload, checked as RESTORE checks it.
pub fn restore(payload: &[u8]) -> Result<Value, Refused> {
    let Some(body_len) = payload.len().checked_sub(10) else { return Err(Refused::VersionOrChecksum) };
    let (body, footer) = payload.split_at(body_len);
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    let crc = footer.get(2..10).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
    if version > NEWEST_VERSION || crc != Some(CRC.checksum(payload.get(..body_len + 2).unwrap_or_default())) {
        return Err(Refused::VersionOrChecksum);
    }
    let mut budget = Budget { left: BUDGET, entry_cost: ENTRY_COST };
    let mut input = SliceInput::new(body);
    let value = Decoder { input: &mut input, budget: &mut budget }.object()?;
    // An empty collection (which Redis never dumps), or members twice:
    // refused as Redis refuses them. (Bytes after the value are ignored,
    // as there.)
    if is_empty(&value) || !members_unique(&value) {
        return Err(Refused::BadFormat);
    }
    Ok(value)
}

/// Whether `value` is a collection without elements (Redis dumps none,
/// and skips one when loading an RDB file).
pub(crate) fn is_empty(value: &Value) -> bool {
    match value {
        Value::String(_) => false,
        Value::List(v) | Value::Set(v) => v.is_empty(),
        Value::Hash(v) => v.is_empty(),
        Value::ZSet(v) => v.is_empty(),
    }
}

/// Whether no member (set member, hash field, sorted-set member) of
/// `value` is there twice (Redis refuses such a value).
pub(crate) fn members_unique(value: &Value) -> bool {
    fn unique<'k>(keys: impl Iterator<Item = &'k Vec<u8>>) -> bool {
        let mut seen = ahash::AHashSet::new();
        keys.into_iter().all(|k| seen.insert(k.as_slice()))
    }
    match value {
        Value::String(_) | Value::List(_) => true,
        Value::Set(v) => unique(v.iter()),
        Value::Hash(v) => unique(v.iter().map(|(f, _)| f)),
        Value::ZSet(v) => unique(v.iter().map(|(m, _)| m)),
    }
}

/// An RDB length (the 6-, 14-, 32- or 64-bit forms).
pub(crate) fn put_len(out: &mut Vec<u8>, n: u64) {
    if n < 1 << 6 {
        out.push(n as u8);
    } else if n < 1 << 14 {
        out.push(0x40 | (n >> 8) as u8);
        out.push(n as u8);
    } else if n <= u64::from(u32::MAX) {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// An RDB string: its length, then its bytes (never compressed here).
pub(crate) fn put_string(out: &mut Vec<u8>, s: &[u8]) {
    put_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_footer(mut body: Vec<u8>, version: u16) -> Vec<u8> {
        body.extend_from_slice(&version.to_le_bytes());
        let crc = CRC.checksum(&body);
        body.extend_from_slice(&crc.to_le_bytes());
        body
    }

    #[test]
    fn every_type_round_trips() {
        let values = [
            Value::String(b"hello".to_vec()),
            Value::String(vec![b'x'; 70000]),
            Value::List(vec![b"a".to_vec(), Vec::new(), vec![7; 300]]),
            Value::Set(vec![b"m1".to_vec(), b"m2".to_vec()]),
            Value::Hash(vec![(b"f".to_vec(), b"v".to_vec()), (b"g".to_vec(), vec![0; 20000])]),
            Value::ZSet(vec![(b"a".to_vec(), 1.5), (b"b".to_vec(), f64::NEG_INFINITY), (b"c".to_vec(), -0.0)]),
        ];
        for v in values {
            assert_eq!(restore(&dump(&v)), Ok(v));
        }
    }

    fn unhex(h: &str) -> Vec<u8> {
        (0..h.len()).step_by(2).map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap()).collect()
    }

    fn strs(v: &[&str]) -> Vec<Vec<u8>> {
        v.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn redis_payloads_are_read() {
        // What redis-server 7.0.15 answered DUMP with: a listpack hash with
        // integers of every width, a listpack sorted set, an LZF-compressed
        // intset, a plain set, a quicklist of a listpack, and strings
        // stored as integers or compressed.
        let h = "1032320000000a0081610201018162028568656c6c6f06816302f178ec03816402f270110104816502f400e68ee7fdffffff09ff0a0002054361825c35b3";
        let hash = [("a", "1"), ("b", "hello"), ("c", "-5000"), ("d", "70000"), ("e", "-9000000000")];
        let hash = hash.iter().map(|(f, v)| (f.as_bytes().to_vec(), v.as_bytes().to_vec())).collect();
        assert_eq!(restore(&unhex(h)), Ok(Value::Hash(hash)));
        let z = "111d1d0000000600826d3203dffe02826d310383312e3504826d33030301ff0a00b40d8ecb3e643fe5";
        let zset = vec![(b"m2".to_vec(), -2.0), (b"m1".to_vec(), 1.5), (b"m3".to_vec(), 3.0)];
        assert_eq!(restore(&unhex(z)), Ok(Value::ZSet(zset)));
        let si = "0bc32128040800000004200302d4feff60000001200b4000017011a00902f2052a200900000a00795f43387e43e5e1";
        assert_eq!(restore(&unhex(si)), Ok(Value::Set(strs(&["-300", "1", "70000", "5000000000"]))));
        assert_eq!(restore(&unhex("0202017901780a000cdf6b3db330bcf0")), Ok(Value::Set(strs(&["y", "x"]))));
        let l = "120102151500000004008161020c01f26079fe0482626203ff0a008b4b31c9810c7224";
        assert_eq!(restore(&unhex(l)), Ok(Value::List(strs(&["a", "12", "-100000", "bb"]))));
        assert_eq!(restore(&unhex("00c139300a009d94ea2793fc08b9")), Ok(Value::String(b"12345".to_vec())));
        assert_eq!(restore(&unhex("00c0f90a005e26d130d7a242ab")), Ok(Value::String(b"-7".to_vec())));
        let lz = "00c3094064016161e057000161610a00e8a3b507b06df271";
        assert_eq!(restore(&unhex(lz)), Ok(Value::String(vec![b'a'; 100])));
    }

    #[test]
    fn ziplists_of_older_redis_are_read() {
        // Entries: "ab", the immediate 12, the 16-bit 12345, the 24-bit -2.
        let entries =
            [&[0x00, 0x02, b'a', b'b'][..], &[0x04, 0xfd], &[0x02, 0xc0, 0x39, 0x30], &[0x04, 0xf0, 0xfe, 0xff, 0xff]];
        let mut zl = Vec::new();
        let total = 10 + entries.iter().map(|e| e.len()).sum::<usize>() + 1;
        zl.extend_from_slice(&(total as u32).to_le_bytes());
        zl.extend_from_slice(&0u32.to_le_bytes());
        zl.extend_from_slice(&4u16.to_le_bytes());
        for e in entries {
            zl.extend_from_slice(e);
        }
        zl.push(0xff);
        let mut body = vec![T_LIST_ZIPLIST];
        put_string(&mut body, &zl);
        assert_eq!(restore(&with_footer(body, 9)), Ok(Value::List(strs(&["ab", "12", "12345", "-2"]))));
        let mut body = vec![T_HASH_ZIPLIST];
        put_string(&mut body, &zl);
        let want = vec![(b"ab".to_vec(), b"12".to_vec()), (b"12345".to_vec(), b"-2".to_vec())];
        assert_eq!(restore(&with_footer(body, 9)), Ok(Value::Hash(want)));
    }

    /// A listpack of `entries` (encoded entries, each with its back length).
    fn listpack_of(entries: &[Vec<u8>]) -> Vec<u8> {
        let body: Vec<u8> = entries.concat();
        let mut lp = ((6 + body.len() + 1) as u32).to_le_bytes().to_vec();
        lp.extend_from_slice(&(entries.len() as u16).to_le_bytes());
        lp.extend_from_slice(&body);
        lp.push(0xff);
        lp
    }

    #[test]
    fn listpack_back_lengths_follow_redis_bounds() {
        // A 32-bit string entry of n bytes is 5 + n long; Redis writes its
        // back length in 2 bytes below 16383 and in 3 from there.
        for (n, back) in [(16377usize, 2usize), (16378, 3), (16379, 3), (2_097_145, 3), (2_097_146, 4)] {
            let mut e = vec![0xf0];
            e.extend_from_slice(&(n as u32).to_le_bytes());
            e.extend(std::iter::repeat_n(b'x', n));
            e.extend(std::iter::repeat_n(0u8, back));
            let mut body = vec![T_LIST_QUICKLIST_2, 1, 2];
            put_string(&mut body, &listpack_of(&[e]));
            assert_eq!(restore(&with_footer(body, 10)), Ok(Value::List(vec![vec![b'x'; n]])), "{n}");
        }
    }

    #[test]
    fn payloads_that_decode_past_the_budget_are_refused() {
        // 2M one-byte elements: a 4 MB payload that would be 2M entries.
        let n = 2_000_000u64;
        let mut body = vec![T_LIST];
        put_len(&mut body, n);
        for _ in 0..n {
            body.extend_from_slice(&[1, b'a']);
        }
        assert_eq!(restore(&with_footer(body, 10)), Err(Refused::TooLarge));
        // A compressed string that claims to inflate past the value limit
        // is refused before it is inflated.
        let mut body = vec![T_STRING, 0xc3, 2];
        put_len(&mut body, 300 << 20);
        body.extend_from_slice(&[0, b'a']);
        assert_eq!(restore(&with_footer(body, 10)), Err(Refused::TooLarge));
        // Duplicate members are refused, as Redis refuses them.
        let dup = vec![T_SET, 2, 1, b'a', 1, b'a'];
        assert_eq!(restore(&with_footer(dup, 10)), Err(Refused::BadFormat));
    }

    #[test]
    fn damage_is_refused() {
        let good = dump(&Value::List(vec![b"a".to_vec(), b"b".to_vec()]));
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x01;
            assert!(restore(&bad).is_err(), "flipped byte {i} accepted");
        }
        assert_eq!(restore(&good[..5]), Err(Refused::VersionOrChecksum));
        assert_eq!(restore(&with_footer(vec![T_STRING, 0x01, b'a'], 12)), Err(Refused::VersionOrChecksum));
        assert_eq!(restore(&with_footer(vec![T_LIST, 0x00], 10)), Err(Refused::BadFormat));
        assert_eq!(restore(&with_footer(vec![T_STRING, 0x05, b'a'], 10)), Err(Refused::BadFormat));
        // Bytes after the value are ignored, as Redis ignores them.
        assert_eq!(restore(&with_footer(vec![T_STRING, 0x01, b'a', 0], 10)), Ok(Value::String(b"a".to_vec())));
        assert_eq!(restore(&with_footer(vec![T_LIST, 0x80, 0xff, 0xff, 0xff, 0xff], 10)), Err(Refused::BadFormat));
        assert_eq!(restore(&with_footer(vec![99], 10)), Err(Refused::BadFormat));
    }
}
