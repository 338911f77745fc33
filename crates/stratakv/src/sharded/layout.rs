//! Where a sharded database keeps things: the shard-count file, the shard
//! subdirectories, the key → shard hash, and the reserved meta key.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::fs::Fs;
use crate::key::KeyRange;

/// The file recording the shard count and hash (FORMAT.md, "Sharded").
pub const SHARDS_FILE: &str = "SHARDS";

/// Every engine key that begins with these bytes belongs to the front end
/// (partition id `u32::MAX`, which no partition can have): users may not
/// address them, and iterators stop before them. Because `0xff` is the
/// largest byte, every other key sorts before this prefix.
pub const META_PREFIX: [u8; 6] = [0xff; 6];

/// The key each shard's batches set to the largest GSN they carry.
pub(crate) fn gsn_key() -> Vec<u8> {
    [&META_PREFIX[..], b"gsn"].concat()
}

/// The hash recorded in the shard-count file. Changing the function
/// requires a new name: existing databases then refuse to open.
const HASH_NAME: &str = "xxh3-64-seed-0x5348415244";
const HASH_SEED: u64 = 0x0053_4841_5244;

/// The shard that owns `key` among `n`: xxh3-64 with a fixed seed, a
/// specified algorithm whose output never changes between builds.
pub(crate) fn shard_of(key: &[u8], n: usize) -> usize {
    if n <= 1 {
        return 0;
    }
    (xxhash_rust::xxh3::xxh3_64_with_seed(key, HASH_SEED) % n as u64) as usize
}

/// The directory of shard `i`.
pub(crate) fn shard_dir(dir: &Path, i: usize) -> PathBuf {
    dir.join(format!("shard-{i:03}"))
}

/// Whether users may not touch `key`.
pub(crate) fn is_meta(key: &[u8]) -> bool {
    key.starts_with(&META_PREFIX)
}

/// `range` without the meta keys: its end is clamped below [`META_PREFIX`].
pub(crate) fn user_range(mut range: KeyRange) -> KeyRange {
    use std::ops::Bound;
    let clamp = match &range.end {
        Bound::Unbounded => true,
        Bound::Included(e) | Bound::Excluded(e) => e.as_slice() >= &META_PREFIX[..],
    };
    if clamp {
        range.end = Bound::Excluded(META_PREFIX.to_vec());
    }
    range
}

/// Reads the shard count recorded in `dir`, or records `requested` in a new
/// database, through `fs`. Another count, or another hash, is
/// [`Error::ShardCount`] or corruption: re-hashing silently would hide every key.
pub(crate) fn check_or_create(fs: &dyn Fs, dir: &Path, requested: usize, create: bool) -> Result<()> {
    let path = dir.join(SHARDS_FILE);
    match fs.read(&path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let (stored, hash) = parse(&text).ok_or_else(|| Error::corruption(&path, 0, "malformed SHARDS file"))?;
            if hash != HASH_NAME {
                return Err(Error::corruption(&path, 0, format!("unknown shard hash {hash:?}")));
            }
            if stored != requested {
                return Err(Error::ShardCount { path: dir.to_path_buf(), stored, requested });
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if !create {
                return Err(Error::InvalidArgument(format!("{} holds no sharded database", dir.display())));
            }
            fs.create_dir_all(dir).map_err(|e| Error::io(dir, "mkdir", e))?;
            // Written to a temporary name and renamed, with the directory
            // synced, so a crash leaves either no file or a whole one.
            let tmp = dir.join("SHARDS.tmp");
            let text = format!("stratakv-sharded 1\nshards {requested}\nhash {HASH_NAME}\n");
            let mut f = fs.create(&tmp).map_err(|e| Error::io(&tmp, "create", e))?;
            f.append(text.as_bytes()).map_err(|e| Error::io(&tmp, "write", e))?;
            f.sync().map_err(|e| Error::io(&tmp, "fsync", e))?;
            drop(f);
            fs.rename(&tmp, &path).map_err(|e| Error::io(&path, "rename", e))?;
            fs.sync_dir(dir).map_err(|e| Error::io(dir, "fsync", e))
        }
        Err(e) => Err(Error::io(&path, "read", e)),
    }
}

/// The shard count recorded in `dir`, if it is a sharded database.
pub fn recorded_shards(dir: &Path) -> Result<Option<usize>> {
    let path = dir.join(SHARDS_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            parse(&text).map(|(n, _)| Some(n)).ok_or_else(|| Error::corruption(&path, 0, "malformed SHARDS file"))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(&path, "read", e)),
    }
}

fn parse(text: &str) -> Option<(usize, String)> {
    let mut lines = text.lines();
    if lines.next()? != "stratakv-sharded 1" {
        return None;
    }
    let n = lines.next()?.strip_prefix("shards ")?.parse().ok().filter(|&n| n > 0)?;
    let hash = lines.next()?.strip_prefix("hash ")?.to_string();
    Some((n, hash))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_fixed() {
        // These values are part of the on-disk format: a changed hash
        // function must fail here (and get a new HASH_NAME).
        let got: Vec<usize> = [&b"a"[..], b"key000001", b"", b"zz"].iter().map(|k| shard_of(k, 7)).collect();
        assert_eq!(got, vec![6, 4, 2, 2]);
        assert_eq!(xxhash_rust::xxh3::xxh3_64_with_seed(b"", 0), 0x2d06_8005_38d3_94c2);
    }

    #[test]
    fn keys_spread_over_shards() {
        let mut counts = [0usize; 4];
        for i in 0..4000 {
            counts[shard_of(format!("k{i}").as_bytes(), 4)] += 1;
        }
        assert!(counts.iter().all(|&c| c > 800), "{counts:?}");
    }

    #[test]
    fn user_ranges_stop_before_meta_keys() {
        let r = user_range(KeyRange::all());
        assert!(r.contains(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, 9]));
        assert!(!r.contains(&gsn_key()));
        let r = user_range((b"a".to_vec()..b"b".to_vec()).into());
        assert!(r.contains(b"a0"));
    }

    #[test]
    fn another_count_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let fs = crate::fs::StdFs;
        check_or_create(&fs, dir.path(), 3, true).unwrap();
        check_or_create(&fs, dir.path(), 3, false).unwrap();
        match check_or_create(&fs, dir.path(), 2, true) {
            Err(Error::ShardCount { stored: 3, requested: 2, .. }) => {}
            other => panic!("{other:?}"),
        }
        assert_eq!(recorded_shards(dir.path()).unwrap(), Some(3));
    }
}
