//! Predictable directory ids, key encoding and placement on servers.

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// The id of the root directory (a constant every client knows).
pub const ROOT_ID: u64 = 1;

/// Fixed seed of the directory-id hash (changing it changes every id).
pub const ID_SEED: u64 = 0x5354_5241_5441_4653; // "STRATAFS"

/// A directory's id from its birth triple: xxh3_64(pid ‖ name ‖ version).
/// Ids 0 and [`ROOT_ID`] are never returned (they map to 2 and 3).
pub fn dir_id(pid: u64, name: &str, version: u32) -> u64 {
    let mut buf = Vec::with_capacity(12 + name.len());
    buf.extend_from_slice(&pid.to_be_bytes());
    buf.extend_from_slice(name.as_bytes());
    buf.extend_from_slice(&version.to_be_bytes());
    match xxh3_64_with_seed(&buf, ID_SEED) {
        0 => 2,
        ROOT_ID => 3,
        h => h,
    }
}

/// Jump consistent hash (Lamping & Veach) of `key` into `n` buckets.
pub fn jump_hash(key: u64, n: usize) -> usize {
    let mut k = key;
    let (mut b, mut j): (i64, i64) = (-1, 0);
    while j < n as i64 {
        b = j;
        k = k.wrapping_mul(2_862_933_555_777_941_757).wrapping_add(1);
        j = ((b + 1) as f64 * ((1u64 << 31) as f64 / ((k >> 33) + 1) as f64)) as i64;
    }
    b.max(0) as usize
}

/// The server holding directory `dir`'s content record and its children's
/// access records.
pub fn server_of(dir: u64, n: usize) -> usize {
    // Mix first: directory ids are already hashes, but the root is 1.
    jump_hash(xxh3_64_with_seed(&dir.to_be_bytes(), 7), n)
}

/// Key prefixes of the records one server holds.
pub mod key {
    /// Access record of a child: `A|pid BE|name`.
    pub fn access(pid: u64, name: &str) -> Vec<u8> {
        let mut k = access_prefix(pid);
        k.extend_from_slice(name.as_bytes());
        k
    }

    /// Prefix of every access record under `pid` (readdir's scan range).
    pub fn access_prefix(pid: u64) -> Vec<u8> {
        let mut k = Vec::with_capacity(10 + 16);
        k.extend_from_slice(b"A|");
        k.extend_from_slice(&pid.to_be_bytes());
        k
    }

    /// The name part of an access key (lossy for non-UTF-8 bytes).
    pub fn access_name(k: &[u8]) -> Option<(u64, String)> {
        if k.len() < 10 || &k[..2] != b"A|" {
            return None;
        }
        let mut pid = [0u8; 8];
        pid.copy_from_slice(&k[2..10]);
        Some((u64::from_be_bytes(pid), String::from_utf8_lossy(&k[10..]).into_owned()))
    }

    /// Content record of a directory: `C|id BE`.
    pub fn content(id: u64) -> Vec<u8> {
        let mut k = b"C|".to_vec();
        k.extend_from_slice(&id.to_be_bytes());
        k
    }

    /// Rename-list entry at a birth parent: `R|pid BE|version BE|name`.
    pub fn rename_list(pid: u64, name: &str, version: u32) -> Vec<u8> {
        let mut k = b"R|".to_vec();
        k.extend_from_slice(&pid.to_be_bytes());
        k.extend_from_slice(&version.to_be_bytes());
        k.extend_from_slice(name.as_bytes());
        k
    }

    /// Prefix of every rename-list entry of birth parent `pid`.
    pub fn rename_list_prefix(pid: u64) -> Vec<u8> {
        let mut k = b"R|".to_vec();
        k.extend_from_slice(&pid.to_be_bytes());
        k
    }

    /// Invalidation-list entry: `I|id BE` → seq.
    pub fn inval(id: u64) -> Vec<u8> {
        let mut k = b"I|".to_vec();
        k.extend_from_slice(&id.to_be_bytes());
        k
    }

    /// Coordinator intent: `T|txid BE`.
    pub fn intent(tx: u64) -> Vec<u8> {
        let mut k = b"T|".to_vec();
        k.extend_from_slice(&tx.to_be_bytes());
        k
    }

    /// At-most-once marker of step `step` of a coordinator transaction:
    /// `X|tx BE|step`.
    pub fn tx_marker(tx: u64, step: u8) -> Vec<u8> {
        let mut k = b"X|".to_vec();
        k.extend_from_slice(&tx.to_be_bytes());
        k.push(step);
        k
    }

    /// The coordinator's durable transaction-id high-water mark.
    pub const TX_NEXT: &[u8] = b"M|txnext";
    /// A server's durable file-id high-water mark.
    pub const FILE_NEXT: &[u8] = b"M|filenext";

    /// The smallest key greater than every key starting with `prefix`.
    pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
        let mut e = prefix.to_vec();
        while let Some(last) = e.pop() {
            if last != 0xff {
                e.push(last + 1);
                return e;
            }
        }
        vec![0xff; 32]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_and_versioned() {
        assert_eq!(dir_id(ROOT_ID, "a", 0), dir_id(ROOT_ID, "a", 0));
        assert_ne!(dir_id(ROOT_ID, "a", 0), dir_id(ROOT_ID, "a", 1));
        assert_ne!(dir_id(ROOT_ID, "a", 0), dir_id(ROOT_ID, "b", 0));
    }

    #[test]
    fn jump_hash_spreads_and_is_in_range() {
        let mut counts = [0usize; 4];
        for i in 0..4000u64 {
            counts[server_of(dir_id(ROOT_ID, &i.to_string(), 0), 4)] += 1;
        }
        assert!(counts.iter().all(|&c| c > 800), "{counts:?}");
        assert_eq!(server_of(12345, 1), 0);
    }

    #[test]
    fn prefix_end_bounds_the_prefix() {
        let p = key::access_prefix(7);
        let e = key::prefix_end(&p);
        assert!(key::access(7, "zzz") < e);
        assert!(key::access(8, "") >= e);
    }
}
