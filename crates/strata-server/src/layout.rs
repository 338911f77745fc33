//! The key layout of the server keyspace (FORMAT.md, "Server keyspace
//! encoding"): the tag byte every store key begins with, how meta, member
//! and expiry keys are built, and the one parser of them. Its own module,
//! beneath both the keyspace and the stores (whose read cache finds the
//! Redis key of a store key here).

/// The tag bytes store keys begin with.
pub mod tag {
    /// A key's meta entry: `'m' | fnv1a32(key) | key`.
    pub const META: u8 = b'm';
    /// An expiry index entry: `'e' | expire_ms | key`.
    pub const EXPIRY: u8 = b'e';
    /// A hash field (of a hash not packed in its meta).
    pub const HASH: u8 = b'H';
    /// A set member.
    pub const SET: u8 = b'S';
    /// A sorted-set member, its score as value.
    pub const ZSET: u8 = b'Z';
    /// A sorted-set score index entry.
    pub const ZSCORE: u8 = b'z';
    /// A list element.
    pub const LIST: u8 = b'L';
    /// Every tag of member entries (`tag | klen | key | suffix`).
    pub const MEMBERS: [u8; 5] = [HASH, SET, ZSET, ZSCORE, LIST];
}

/// Bytes of a member key before the user key: the tag and `klen u32 BE`.
pub const MEMBER_HEADER: usize = 5;

/// The header of a stored meta entry: its type byte and its expiry (Unix
/// ms, 0 for none), `type u8 | expire_ms u64 LE | body`; `None` if short.
pub fn meta_header(value: &[u8]) -> Option<(u8, u64)> {
    let t = *value.first()?;
    let exp: [u8; 8] = value.get(1..9)?.try_into().ok()?;
    Some((t, u64::from_le_bytes(exp)))
}

/// 32-bit FNV-1a: the hash that orders meta keys (frozen: it is on disk).
pub fn fnv1a32(key: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in key {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// Meta key of `key`.
pub fn meta_key(key: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(5 + key.len());
    v.push(tag::META);
    v.extend_from_slice(&fnv1a32(key).to_be_bytes());
    v.extend_from_slice(key);
    v
}

/// The user key inside a meta key.
pub fn user_key_of_meta(mk: &[u8]) -> Option<&[u8]> {
    if mk.first() != Some(&tag::META) {
        return None;
    }
    mk.get(5..)
}

/// The user key a stored entry belongs to: a meta key's, a member
/// entry's (hash field, set member, sorted-set member or score index, list
/// element) or an expiry index entry's; `None` for anything else.
pub fn user_key_of_entry(k: &[u8]) -> Option<&[u8]> {
    match *k.first()? {
        tag::META => user_key_of_meta(k),
        tag::EXPIRY => parse_expire_index(k).map(|(_, key)| key),
        _ => member_range_prefix(k)?.get(MEMBER_HEADER..),
    }
}

/// The member-range prefix (`tag | klen | key`) of store key `k`: every
/// member entry of one key (of one tag) begins with it. `None` for a key
/// that is no member entry, or whose length field runs past its end.
pub fn member_range_prefix(k: &[u8]) -> Option<&[u8]> {
    if !tag::MEMBERS.contains(k.first()?) {
        return None;
    }
    let klen = u32::from_be_bytes(k.get(1..MEMBER_HEADER)?.try_into().ok()?) as usize;
    k.get(..MEMBER_HEADER.checked_add(klen)?)
}

/// Hash bucket of a meta key (the SCAN position).
pub fn bucket_of_meta(mk: &[u8]) -> Option<u32> {
    let s: [u8; 4] = mk.get(1..5)?.try_into().ok()?;
    Some(u32::from_be_bytes(s))
}

/// First meta key of hash bucket `h`.
pub fn meta_bucket_start(h: u64) -> Vec<u8> {
    let mut v = vec![tag::META];
    v.extend_from_slice(&(h as u32).to_be_bytes());
    v
}

/// The engine's prefix groups: one per collection key and tag
/// (`tag | klen | key`), so a scan of one hash, set, sorted set or list
/// skips the matrix rows that hold none of its members. Meta, expiry and
/// version keys belong to no group.
#[derive(Clone, Copy, Debug, Default)]
pub struct MemberPrefix;

impl stratakv::PrefixExtractor for MemberPrefix {
    fn prefix<'a>(&self, k: &'a [u8]) -> Option<&'a [u8]> {
        // Databases 1.. are engine partitions, whose keys the engine stores
        // behind `0xff 0xff id(4)`: their groups are that plus the group.
        let skip = if k.starts_with(&[0xff, 0xff]) { PARTITION_PREFIX_LEN } else { 0 };
        // Every key that begins with `tag | klen | key` has the same tag and
        // length field, so it has this same prefix (the extractor contract).
        let group = member_range_prefix(k.get(skip..)?)?;
        k.get(..skip + group.len())
    }
}

/// Bytes the engine puts in front of a partition's keys (FORMAT.md,
/// "Partitions"): `0xff 0xff` and the partition id.
pub use stratakv::PARTITION_PREFIX_LEN;

/// Prefix of every member entry with tag `tag` of `key`.
pub fn member_prefix(tag: u8, key: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(MEMBER_HEADER + key.len() + 16);
    v.push(tag);
    v.extend_from_slice(&(key.len() as u32).to_be_bytes());
    v.extend_from_slice(key);
    v
}

/// Member entry key: prefix + `suffix`.
pub fn member_key(tag: u8, key: &[u8], suffix: &[u8]) -> Vec<u8> {
    let mut v = member_prefix(tag, key);
    v.extend_from_slice(suffix);
    v
}

/// List element key of index `i`.
pub fn list_key(key: &[u8], i: u64) -> Vec<u8> {
    member_key(tag::LIST, key, &i.to_be_bytes())
}

/// Maps a score to 8 bytes whose byte order is the numeric order.
pub fn sortable_score(score: f64) -> [u8; 8] {
    let score = if score == 0.0 { 0.0 } else { score };
    let bits = score.to_bits();
    let s = if bits >> 63 == 1 { !bits } else { bits | (1 << 63) };
    s.to_be_bytes()
}

/// Inverse of [`sortable_score`].
pub fn score_from_sortable(b: &[u8]) -> Option<f64> {
    let s = u64::from_be_bytes(b.get(..8)?.try_into().ok()?);
    let bits = if s >> 63 == 1 { s & !(1 << 63) } else { !s };
    Some(f64::from_bits(bits))
}

/// Score index key.
pub fn zindex_key(key: &[u8], score: f64, member: &[u8]) -> Vec<u8> {
    let mut v = member_prefix(tag::ZSCORE, key);
    v.extend_from_slice(&sortable_score(score));
    v.extend_from_slice(member);
    v
}

/// Expiry index key.
pub fn expire_index_key(expire_ms: u64, key: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(9 + key.len());
    v.push(tag::EXPIRY);
    v.extend_from_slice(&expire_ms.to_be_bytes());
    v.extend_from_slice(key);
    v
}

/// (expire_ms, user key) of an expiry index key.
pub fn parse_expire_index(k: &[u8]) -> Option<(u64, &[u8])> {
    if k.first() != Some(&tag::EXPIRY) {
        return None;
    }
    let ms = u64::from_be_bytes(k.get(1..9)?.try_into().ok()?);
    Some((ms, k.get(9..)?))
}
