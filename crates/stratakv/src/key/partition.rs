//! Where partitions live in the key space.
//!
//! Partitions are namespaces of one tree: partition `id` (1, 2, ...)
//! stores user key `k` as `0xff 0xff id(4 bytes, big-endian) k`, so each
//! partition is one contiguous range of the engine's keys (dropped with
//! one range tombstone) and the default partition, which stores keys as
//! they are, keeps every key of a database from before partitions. Once a
//! database has partitions, keys of the default partition may not begin
//! with `0xff 0xff` (FORMAT.md, "Partitions").

/// What every partition's keys begin with.
pub const PARTITION_MARK: [u8; 2] = [0xff, 0xff];

/// Bytes a partition adds in front of its keys.
pub const PARTITION_PREFIX_LEN: usize = 6;

/// The largest partition id (the next one bounds its range).
pub const MAX_PARTITION_ID: u32 = u32::MAX - 1;

/// The prefix of partition `id`'s keys.
pub fn partition_prefix(id: u32) -> [u8; PARTITION_PREFIX_LEN] {
    let b = id.to_be_bytes();
    [PARTITION_MARK[0], PARTITION_MARK[1], b[0], b[1], b[2], b[3]]
}

/// The engine keys of partition `id`: `[start, end)`.
pub fn partition_range(id: u32) -> (Vec<u8>, Vec<u8>) {
    (partition_prefix(id).to_vec(), partition_prefix(id.saturating_add(1)).to_vec())
}

/// The partition an engine key belongs to (0: the default partition).
pub fn partition_of(key: &[u8]) -> u32 {
    match key {
        [0xff, 0xff, a, b, c, d, ..] => u32::from_be_bytes([*a, *b, *c, *d]),
        _ => 0,
    }
}

/// Whether a key of the default partition would fall among partitions' keys.
pub fn is_reserved(key: &[u8]) -> bool {
    key.starts_with(&PARTITION_MARK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_disjoint_ranges_in_id_order() {
        let (s1, e1) = partition_range(1);
        let (s2, _) = partition_range(2);
        assert_eq!(e1, s2);
        let mut k = partition_prefix(1).to_vec();
        k.extend_from_slice(&[0xff; 10]);
        assert!(s1 <= k && k < e1);
        assert_eq!(partition_of(&k), 1);
        assert_eq!(partition_of(b"plain"), 0);
        assert_eq!(partition_of(&[0xff, 0xff, 0]), 0, "too short to name a partition");
        assert!(is_reserved(&[0xff, 0xff]));
        assert!(!is_reserved(&[0xff, 0xfe, 1]));
        assert!(partition_range(MAX_PARTITION_ID).0 < partition_range(MAX_PARTITION_ID).1);
    }
}
