//! The expected-state file of the kill mode (RocksDB `db_stress`'s
//! `LATEST.state`): per key, the committed value id and a pending one,
//! kept in a file outside the database directory with positional writes,
//! so it survives the SIGKILL of the writer.
//!
//! ```text
//! 0   8   magic "STRATAEX"
//! 8   8   number of keys
//! 16  48  reserved
//! 64  16*n  per key: committed id u64, pending id u64   (little-endian)
//! ```
//!
//! A value id is never 0 (0 = no write); bit 63 marks a delete. A writer
//! stores the pending id before the database write and the committed id
//! (then clears pending) after the acknowledgement; after a crash a key
//! must hold its committed or its pending value, nothing else.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;

use anyhow::{bail, Context};

const MAGIC: &[u8; 8] = b"STRATAEX";
const HEADER: u64 = 64;
/// Bit 63 of an id: the write was a delete.
pub const DELETE: u64 = 1 << 63;

/// An open expected-state file.
pub struct ExpectedFile {
    f: File,
    keys: u64,
}

impl ExpectedFile {
    /// Creates (or truncates) the file for `keys` keys, all never written.
    pub fn create(path: &Path, keys: u64) -> anyhow::Result<ExpectedFile> {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .with_context(|| format!("creating {}", path.display()))?;
        let mut hdr = [0u8; HEADER as usize];
        hdr[..8].copy_from_slice(MAGIC);
        hdr[8..16].copy_from_slice(&keys.to_le_bytes());
        f.write_all_at(&hdr, 0)?;
        f.set_len(HEADER + 16 * keys)?;
        Ok(ExpectedFile { f, keys })
    }

    /// Opens an existing file.
    pub fn open(path: &Path) -> anyhow::Result<ExpectedFile> {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        let mut hdr = [0u8; 16];
        f.read_exact_at(&mut hdr, 0)?;
        if &hdr[..8] != MAGIC {
            bail!("{} is not an expected-state file", path.display());
        }
        let mut n = [0u8; 8];
        n.copy_from_slice(&hdr[8..16]);
        Ok(ExpectedFile { f, keys: u64::from_le_bytes(n) })
    }

    /// Number of keys.
    pub fn keys(&self) -> u64 {
        self.keys
    }

    fn word(&self, key: u64, which: u64) -> anyhow::Result<u64> {
        if key >= self.keys {
            bail!("key {key} out of range");
        }
        let mut b = [0u8; 8];
        self.f.read_exact_at(&mut b, HEADER + 16 * key + 8 * which)?;
        Ok(u64::from_le_bytes(b))
    }

    fn set_word(&self, key: u64, which: u64, v: u64) -> anyhow::Result<()> {
        if key >= self.keys {
            bail!("key {key} out of range");
        }
        self.f.write_all_at(&v.to_le_bytes(), HEADER + 16 * key + 8 * which)?;
        Ok(())
    }

    /// (committed, pending) of `key`.
    pub fn get(&self, key: u64) -> anyhow::Result<(u64, u64)> {
        Ok((self.word(key, 0)?, self.word(key, 1)?))
    }

    /// Marks `id` pending for `key` (before the write).
    pub fn set_pending(&self, key: u64, id: u64) -> anyhow::Result<()> {
        self.set_word(key, 1, id)
    }

    /// Commits `id` for `key` and clears pending (after the acknowledgement).
    pub fn commit(&self, key: u64, id: u64) -> anyhow::Result<()> {
        self.set_word(key, 0, id)?;
        self.set_word(key, 1, 0)
    }
}

/// The value stored for key index `key` by write `id` (self-describing, so
/// a recovered value names the write it came from).
pub fn value_of(key: u64, id: u64) -> Vec<u8> {
    let mut v = format!("{key}:{id:x}:").into_bytes();
    let pad = (id.wrapping_mul(0x9e37_79b9) % 200) as usize;
    v.resize(v.len() + pad, b'a' + (id % 26) as u8);
    v
}

/// The write id a stored value names, if it is well formed for `key`.
pub fn id_of(key: u64, value: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(value).ok()?;
    let mut parts = s.splitn(3, ':');
    let k: u64 = parts.next()?.parse().ok()?;
    let id = u64::from_str_radix(parts.next()?, 16).ok()?;
    let rest = parts.next()?;
    (k == key && value_of(key, id).len() == value.len() && rest.bytes().all(|b| b == b'a' + (id % 26) as u8))
        .then_some(id)
}

/// Whether the recovered value (`None` = absent) is allowed for a key with
/// `(committed, pending)`.
pub fn allowed(got: Option<u64>, committed: u64, pending: u64) -> bool {
    let matches = |id: u64| match got {
        Some(g) => id != 0 && id & DELETE == 0 && id == g,
        None => id == 0 || id & DELETE != 0,
    };
    matches(committed) || (pending != 0 && matches(pending))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_name_their_write() {
        for id in [1u64, 77, 0xabc_0000_0001] {
            assert_eq!(id_of(5, &value_of(5, id)), Some(id));
            assert_eq!(id_of(6, &value_of(5, id)), None);
        }
        let mut v = value_of(5, 9);
        v.pop();
        assert_eq!(id_of(5, &v), None);
    }

    #[test]
    fn committed_or_pending_only() {
        assert!(allowed(None, 0, 0));
        assert!(allowed(Some(3), 3, 0));
        assert!(allowed(Some(4), 3, 4));
        assert!(allowed(None, 3, 4 | DELETE));
        assert!(!allowed(None, 3, 0));
        assert!(!allowed(Some(5), 3, 4));
        assert!(!allowed(Some(3), 3 | DELETE, 0));
    }

    #[test]
    fn file_round_trip() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.state");
        let f = ExpectedFile::create(&p, 10).unwrap();
        f.set_pending(3, 7).unwrap();
        assert_eq!(f.get(3).unwrap(), (0, 7));
        f.commit(3, 7).unwrap();
        let g = ExpectedFile::open(&p).unwrap();
        assert_eq!(g.get(3).unwrap(), (7, 0));
        assert!(g.get(10).is_err());
    }
}
