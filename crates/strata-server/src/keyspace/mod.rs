//! How Redis types and expiry map onto the engine's ordered keyspace
//! (documented byte by byte in FORMAT.md, "Server keyspace encoding").
//!
//! ```text
//! 'm' | fnv1a32(key) u32 BE | key                      -> meta: type u8 | expire_ms u64 LE | body
//!                                                       (a small hash: its fields packed in the body)
//! 'H' | klen u32 BE | key | field                      -> hash field value
//! 'S' | klen u32 BE | key | member                     -> (empty) set member
//! 'Z' | klen u32 BE | key | member                     -> score f64 LE bits
//! 'z' | klen u32 BE | key | sortable(score) u64 BE | member -> (empty) score index
//! 'L' | klen u32 BE | key | index u64 BE               -> list element
//! 'e' | expire_ms u64 BE | key                         -> (empty) expiry index
//! '!version'                                           -> "1"
//! ```
//!
//! Meta keys are ordered by a hash of the user key so that SCAN's cursor
//! can be a plain number (the next hash to visit) and stay valid across
//! writes; members of one key are contiguous and ordered.

pub mod locks;
pub mod packed;
pub mod txn;
pub mod types;

pub use crate::layout::*;
pub use locks::KeyLocks;
pub use txn::{ClearScope, Txn};

/// The format marker key and its value.
pub const VERSION_KEY: &[u8] = b"!version";
/// Current encoding version: 2 added packed hashes (meta type 6).
pub const VERSION: &[u8] = b"2";

/// The earlier encoding version this server still reads (and upgrades to
/// [`VERSION`] when it opens the directory): the same keys without packed
/// hashes.
pub const VERSION_1: &[u8] = b"1";

/// The stored type byte of a hash whose fields are packed in its meta.
const PACKED_HASH: u8 = 6;

/// The type of a top-level key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyType {
    /// A string (value stored inline in the meta entry).
    String = 1,
    /// A hash (fields under `H`).
    Hash = 2,
    /// A list (elements under `L`, indexed between head and tail).
    List = 3,
    /// A set (members under `S`).
    Set = 4,
    /// A sorted set (members under `Z`, score index under `z`).
    ZSet = 5,
}

impl KeyType {
    fn from_u8(b: u8) -> Option<KeyType> {
        Some(match b {
            1 => KeyType::String,
            2 => KeyType::Hash,
            3 => KeyType::List,
            4 => KeyType::Set,
            5 => KeyType::ZSet,
            _ => return None,
        })
    }

    /// The name TYPE replies with.
    pub fn name(self) -> &'static str {
        match self {
            KeyType::String => "string",
            KeyType::Hash => "hash",
            KeyType::List => "list",
            KeyType::Set => "set",
            KeyType::ZSet => "zset",
        }
    }

    /// Parses a TYPE name (SCAN ... TYPE t).
    pub fn parse(s: &[u8]) -> Option<KeyType> {
        Some(match s.to_ascii_lowercase().as_slice() {
            b"string" => KeyType::String,
            b"hash" => KeyType::Hash,
            b"list" => KeyType::List,
            b"set" => KeyType::Set,
            b"zset" => KeyType::ZSet,
            _ => return None,
        })
    }

    /// Tag of the member entries of this type, if it has members.
    fn member_tags(self) -> &'static [u8] {
        match self {
            KeyType::String => &[],
            KeyType::Hash => &[tag::HASH],
            KeyType::List => &[tag::LIST],
            KeyType::Set => &[tag::SET],
            KeyType::ZSet => &[tag::ZSET, tag::ZSCORE],
        }
    }
}

/// The decoded meta entry of a key.
#[derive(Clone, Debug, PartialEq)]
pub struct Meta {
    /// The type.
    pub kind: KeyType,
    /// Absolute expiry in Unix milliseconds; 0 for none.
    pub expire_ms: u64,
    /// Strings: the value. Other types: see [`Meta::count`], [`Meta::list_bounds`];
    /// a packed hash: [`packed`]'s body (its count first).
    pub body: Vec<u8>,
    /// A hash whose fields are in `body` rather than entries of their own.
    pub packed: bool,
}

/// Middle of the list index space: a new list's head and tail start here.
pub const LIST_MID: u64 = 1 << 63;

/// (field, value) pairs of a hash, or (member, entry) pairs.
pub type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// The longest string value (SETRANGE, BITFIELD, RESTORE): the engine's
/// value limit less the meta header, below Redis's 512 MB.
pub const MAX_STRING: u64 = (256 << 20) - 64;

impl Meta {
    /// A string meta.
    pub fn string(value: Vec<u8>, expire_ms: u64) -> Meta {
        Meta { kind: KeyType::String, expire_ms, body: value, packed: false }
    }

    /// A hash, set or zset meta with `count` members.
    pub fn collection(kind: KeyType, count: u64, expire_ms: u64) -> Meta {
        Meta { kind, expire_ms, body: count.to_le_bytes().to_vec(), packed: false }
    }

    /// A hash with `pairs` (sorted by field) packed in its meta.
    pub fn packed_hash<F: AsRef<[u8]>, V: AsRef<[u8]>>(pairs: &[(F, V)], expire_ms: u64) -> Meta {
        Meta { kind: KeyType::Hash, expire_ms, body: packed::encode(pairs), packed: true }
    }

    /// A list meta with elements at indexes `head..tail`.
    pub fn list(head: u64, tail: u64, expire_ms: u64) -> Meta {
        let mut body = head.to_le_bytes().to_vec();
        body.extend_from_slice(&tail.to_le_bytes());
        Meta { kind: KeyType::List, expire_ms, body, packed: false }
    }

    /// Member count of a hash (packed or not), set or zset (0 if malformed).
    pub fn count(&self) -> u64 {
        read_u64_le(&self.body, 0).unwrap_or(0)
    }

    /// Sets the member count (of a collection whose members are entries
    /// of their own; a packed hash's body is rewritten whole instead).
    pub fn set_count(&mut self, n: u64) {
        self.packed = false;
        self.body = n.to_le_bytes().to_vec();
    }

    /// (head, tail) of a list.
    pub fn list_bounds(&self) -> (u64, u64) {
        (read_u64_le(&self.body, 0).unwrap_or(LIST_MID), read_u64_le(&self.body, 8).unwrap_or(LIST_MID))
    }

    /// Whether the key has expired at `now_ms`.
    pub fn expired(&self, now_ms: u64) -> bool {
        self.expire_ms != 0 && self.expire_ms <= now_ms
    }

    /// The stored bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(9 + self.body.len());
        v.push(if self.packed { PACKED_HASH } else { self.kind as u8 });
        v.extend_from_slice(&self.expire_ms.to_le_bytes());
        v.extend_from_slice(&self.body);
        v
    }

    /// Decodes stored bytes; `None` if malformed.
    pub fn decode(b: &[u8]) -> Option<Meta> {
        Meta::decode_owned(b.to_vec())
    }

    /// Like [`Meta::decode`], reusing the buffer for the body (no copy
    /// to a new allocation on the read path).
    pub fn decode_owned(mut b: Vec<u8>) -> Option<Meta> {
        let (kind, packed) = stored_type(*b.first()?)?;
        let expire_ms = read_u64_le(&b, 1)?;
        if packed && b.len() < 17 {
            return None; // no count
        }
        b.drain(..9);
        Some(Meta { kind, expire_ms, body: b, packed })
    }

    /// The expiry of stored meta bytes, without decoding the body.
    pub fn decode_expiry(b: &[u8]) -> Option<u64> {
        let (t, expire_ms) = crate::layout::meta_header(b)?;
        stored_type(t)?;
        Some(expire_ms)
    }

    /// Member entry tags (prefix bytes) used by this key's type: none for
    /// a packed hash, whose fields live in its meta.
    pub fn member_tags(&self) -> &'static [u8] {
        if self.packed {
            return b"";
        }
        self.kind.member_tags()
    }
}

/// The type a stored type byte names, and whether it is a packed hash.
fn stored_type(b: u8) -> Option<(KeyType, bool)> {
    if b == PACKED_HASH {
        return Some((KeyType::Hash, true));
    }
    Some((KeyType::from_u8(b)?, false))
}

fn read_u64_le(b: &[u8], at: usize) -> Option<u64> {
    let s: [u8; 8] = b.get(at..at + 8)?.try_into().ok()?;
    Some(u64::from_le_bytes(s))
}

pub use crate::store::prefix_end;

/// Current Unix time in milliseconds.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_sort_numerically() {
        let xs = [f64::NEG_INFINITY, -1e300, -2.5, -0.0, 0.0, 1e-300, 3.0, 1e300, f64::INFINITY];
        for w in xs.windows(2) {
            assert!(sortable_score(w[0]) <= sortable_score(w[1]), "{} {}", w[0], w[1]);
            assert_eq!(score_from_sortable(&sortable_score(w[1])), Some(w[1]));
        }
    }

    #[test]
    fn meta_round_trip() {
        let m = Meta::list(5, 9, 42);
        assert_eq!(Meta::decode(&m.encode()), Some(m.clone()));
        assert_eq!(m.list_bounds(), (5, 9));
        assert_eq!(Meta::decode(&[9]), None);
        assert_eq!(Meta::decode(&[1, 0]), None);
    }

    #[test]
    fn member_prefix_groups() {
        use stratakv::PrefixExtractor;
        let x = MemberPrefix;
        for tag in *b"HSZzL" {
            let p = member_prefix(tag, b"user:1");
            assert_eq!(x.prefix(&member_key(tag, b"user:1", b"field")), Some(&p[..]));
            assert_eq!(x.prefix(&p), Some(&p[..]));
        }
        assert_eq!(x.prefix(&meta_key(b"user:1")), None);
        assert_eq!(x.prefix(VERSION_KEY), None);
        // In a partition (a database other than 0), behind its prefix.
        let mut pk = vec![0xff, 0xff, 0, 0, 0, 3];
        pk.extend_from_slice(&member_key(b'H', b"user:1", b"field"));
        assert_eq!(x.prefix(&pk), Some(&pk[..6 + member_prefix(b'H', b"user:1").len()]));
        assert_eq!(x.prefix(&[0xff, 0xff, 0, 0, 0, 3, b'm', 1]), None);
        assert_eq!(x.prefix(&[0xff, 0xff, 0]), None);
        // Truncated or lying length fields name no group.
        assert_eq!(x.prefix(b"H\0\0"), None);
        assert_eq!(x.prefix(b"H\0\0\0\x09short"), None);
    }

    #[test]
    fn member_prefixes_do_not_collide() {
        // Key "a" with field "bc" vs key "ab" with field "c".
        assert_ne!(member_key(b'H', b"a", b"bc"), member_key(b'H', b"ab", b"c"));
        assert_eq!(prefix_end(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff"), None);
    }

    /// Databases 1.. are engine partitions, whose keys begin with 0xff
    /// 0xff; once one exists the engine refuses such keys in db 0. Every
    /// key the encoding writes begins with its tag byte, never 0xff.
    #[test]
    fn no_encoded_key_begins_with_the_partition_mark() {
        let k = b"\xff\xff\xff";
        let keys = [
            meta_key(k),
            member_key(b'H', k, k),
            list_key(k, u64::MAX),
            zindex_key(k, f64::INFINITY, k),
            expire_index_key(u64::MAX, k),
            meta_bucket_start(u64::from(u32::MAX)),
            VERSION_KEY.to_vec(),
        ];
        for key in keys {
            assert!(matches!(key.first(), Some(b'm' | b'H' | b'S' | b'Z' | b'z' | b'L' | b'e' | b'!')), "{key:02x?}");
        }
    }

    #[test]
    fn every_entry_names_its_user_key() {
        let k = b"user:1";
        for e in [
            meta_key(k),
            member_key(b'H', k, b"field"),
            member_key(b'S', k, b""),
            zindex_key(k, -2.5, b"m"),
            list_key(k, 7),
            expire_index_key(123, k),
        ] {
            assert_eq!(user_key_of_entry(&e), Some(&k[..]), "{e:02x?}");
        }
        assert_eq!(user_key_of_entry(VERSION_KEY), None);
        assert_eq!(user_key_of_entry(b"H\0\0\0\x09short"), None);
        assert_eq!(user_key_of_entry(b""), None);
    }

    #[test]
    fn meta_keys() {
        let mk = meta_key(b"hello");
        assert_eq!(user_key_of_meta(&mk), Some(&b"hello"[..]));
        assert_eq!(bucket_of_meta(&mk), Some(fnv1a32(b"hello")));
        assert_eq!(fnv1a32(b""), 0x811c_9dc5);
        assert_eq!(fnv1a32(b"a"), 0xe40c_292c);
    }
}
