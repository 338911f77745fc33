//! On-PM layout of the tree: extent header, node and key-record offsets.
//! These numbers are written to PM and must never be renumbered; the byte
//! layout is documented in FORMAT.md, "Persistent B+-tree".

/// Head-word kind of a tree extent (nodes growing up, key records down).
pub const EXTENT_KIND_TREE: u8 = 3;

/// Bytes of one node: eight cache lines, cache-line aligned.
pub const NODE_BYTES: u64 = 512;
/// Bytes of a node header (one cache line).
pub const NODE_HEADER: u64 = 64;
/// Bytes of one node entry: key prefix and pointer.
pub const ENTRY_BYTES: u64 = 16;
/// Entries per node.
pub const CAP: usize = ((NODE_BYTES - NODE_HEADER) / ENTRY_BYTES) as usize;

/// Node header word 0: magic (low 32 bits) and level (bits 32..48); immutable.
pub const N_META: u64 = 0;
/// Node header word 1: region offset of the right sibling (0 = none).
pub const N_SIBLING: u64 = 8;
/// Node header word 2: internal nodes' leftmost child (0 in leaves).
pub const N_LEFTMOST: u64 = 16;
/// Node header word 3: prefix of the node's low fence key; immutable.
pub const N_LOW_PREFIX: u64 = 24;
/// Node header word 4: key record of the low fence (0 = minus infinity); immutable.
pub const N_LOW_REC: u64 = 32;
/// Node header word 5: bytes every key of the node shares with its low
/// fence (the common prefix of its fences when it was made); entry
/// prefixes are taken after them. Immutable; 0 in nodes without both fences.
pub const N_SKIP: u64 = 40;
/// Magic in the low half of a node's meta word ("PMTN").
pub const NODE_MAGIC: u32 = u32::from_le_bytes(*b"PMTN");

/// Pointer value of an entry being rewritten: readers skip it. Never a
/// real pointer (those are 8-aligned region offsets).
pub const SKIP: u64 = 1;

/// Extent header word 0: magic.
pub const E_MAGIC: u64 = 0;
/// Extent header word 1: the extent's number in the tree's chain (1, 2, ...).
pub const E_NUMBER: u64 = 8;
/// Extent header word 2: end of the node area (relative), published after
/// a node is written and before it is linked.
pub const E_NODE_TOP: u64 = 16;
/// Extent header word 3: start of the key-record area (relative), published
/// after a record is written and before it is linked.
pub const E_HEAP_LOW: u64 = 24;
/// Extent header word 4: head slot + 1 of the next extent in the chain (0 = last).
pub const E_NEXT: u64 = 32;
/// Extent header word 5, first extent only: region offset of the root node.
pub const E_ROOT: u64 = 40;
/// Extent header word 6: format version.
pub const E_VERSION: u64 = 48;
/// Magic of a tree extent ("STRTREE1").
pub const EXTENT_MAGIC: u64 = u64::from_le_bytes(*b"STRTREE1");
/// Format version of the tree.
pub const TREE_VERSION: u64 = 1;
/// The first node of an extent starts here (the header block is one node's worth).
pub const FIRST_NODE: u64 = NODE_BYTES;

/// Key record word 0: key length (low 32 bits) and magic (high 32 bits); immutable.
pub const R_META: u64 = 0;
/// Key record word 1: value selector, `version << 1 | live slot`.
pub const R_SELECT: u64 = 8;
/// Key record words 2..4 and 4..6: the two value slots.
pub const R_SLOTS: u64 = 16;
/// Bytes of a key record's header; the key bytes follow.
pub const R_HEADER: u64 = 48;
/// Magic in the high half of a record's meta word ("PMTK").
pub const RECORD_MAGIC: u32 = u32::from_le_bytes(*b"PMTK");

/// Region offset (relative to the node) of entry `i`'s prefix word.
pub fn entry_key(i: usize) -> u64 {
    NODE_HEADER + i as u64 * ENTRY_BYTES
}

/// Region offset (relative to the node) of entry `i`'s pointer word.
pub fn entry_ptr(i: usize) -> u64 {
    entry_key(i) + 8
}

/// The first 8 bytes of `key`, zero padded, as a big-endian number: byte
/// order of keys agrees with numeric order of prefixes (ties need the key).
pub fn prefix_of(key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = key.len().min(8);
    b[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(b)
}

/// The 8 bytes of `key` after its first `skip` bytes, zero padded, as a
/// big-endian number: among keys that share their first `skip` bytes,
/// byte order agrees with numeric order (ties need the key). Entries of a
/// node use the node's skip, so keys with a long common prefix (zero-padded
/// numbers, "user" + hash) still differ in their prefixes.
pub fn prefix_at(key: &[u8], skip: usize) -> u64 {
    prefix_of(key.get(skip..).unwrap_or(&[]))
}

/// Length of the common prefix of `a` and `b`.
pub fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Bytes of the key record of a key of `key_len` bytes.
pub fn record_bytes(key_len: usize) -> u64 {
    R_HEADER + (key_len as u64).div_ceil(8) * 8
}
