//! Point-in-time snapshots of the memory store (`--snapshot-seconds N`,
//! SAVE, BGSAVE, shutdown). Format (integers little-endian; FORMAT.md):
//!
//! ```text
//! "STRATASNAP1\n" | count u64 | (klen u32 | key | vlen u32 | value)* | crc32c(all before) u32
//! ```
//!
//! Written to `<name>.tmp`, fsynced, renamed over the old file, and the
//! directory fsynced, so a crash leaves the old or the new snapshot whole.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::Path;

use super::{StoreError, StoreResult};

const MAGIC: &[u8] = b"STRATASNAP1\n";

/// A writer that checksums what passes through it.
struct CrcWriter<W: Write> {
    inner: W,
    crc: u32,
}

impl<W: Write> Write for CrcWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc = crc32c::crc32c_append(self.crc, buf.get(..n).unwrap_or_default());
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Writes `map` as the snapshot at `path` (atomically replacing it).
pub fn save(path: &Path, map: &BTreeMap<Vec<u8>, Vec<u8>>) -> StoreResult<()> {
    let tmp = path.with_extension("tmp");
    let file = File::create(&tmp)?;
    let mut w = CrcWriter { inner: BufWriter::with_capacity(1 << 20, file), crc: 0 };
    w.write_all(MAGIC)?;
    w.write_all(&(map.len() as u64).to_le_bytes())?;
    for (k, v) in map {
        w.write_all(&(k.len() as u32).to_le_bytes())?;
        w.write_all(k)?;
        w.write_all(&(v.len() as u32).to_le_bytes())?;
        w.write_all(v)?;
    }
    let crc = w.crc;
    let mut inner = w.inner;
    inner.write_all(&crc.to_le_bytes())?;
    let file = inner.into_inner().map_err(|e| StoreError(format!("I/O error: {e}")))?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// Reads the snapshot at `path`; `Ok(None)` if there is none. A damaged
/// snapshot is an error naming the file (the server refuses to start
/// rather than silently drop data).
pub fn load(path: &Path) -> StoreResult<Option<BTreeMap<Vec<u8>, Vec<u8>>>> {
    let mut data = Vec::new();
    match File::open(path) {
        Ok(mut f) => {
            f.read_to_end(&mut data)?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let bad = |why: &str| StoreError(format!("snapshot {} is damaged: {why}", path.display()));
    if data.len() < MAGIC.len() + 12 || !data.starts_with(MAGIC) {
        return Err(bad("bad header"));
    }
    let (body, tail) = data.split_at(data.len() - 4);
    let want = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]);
    if crc32c::crc32c(body) != want {
        return Err(bad("checksum mismatch"));
    }
    let mut rest = body.get(MAGIC.len()..).unwrap_or_default();
    let mut take = |n: usize| -> StoreResult<&[u8]> {
        if rest.len() < n {
            return Err(bad("truncated"));
        }
        let (h, t) = rest.split_at(n);
        rest = t;
        Ok(h)
    };
    let count = u64::from_le_bytes(take(8)?.try_into().map_err(|_| bad("truncated"))?);
    let mut map = BTreeMap::new();
    for _ in 0..count {
        let klen = u32::from_le_bytes(take(4)?.try_into().map_err(|_| bad("truncated"))?) as usize;
        let k = take(klen)?.to_vec();
        let vlen = u32::from_le_bytes(take(4)?.try_into().map_err(|_| bad("truncated"))?) as usize;
        let v = take(vlen)?.to_vec();
        map.insert(k, v);
    }
    Ok(Some(map))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("dump.snap");
        assert!(load(&p).unwrap().is_none());
        let mut m = BTreeMap::new();
        m.insert(b"a".to_vec(), b"1".to_vec());
        m.insert(b"b".to_vec(), Vec::new());
        save(&p, &m).unwrap();
        assert_eq!(load(&p).unwrap().unwrap(), m);
        let mut bytes = std::fs::read(&p).unwrap();
        bytes[MAGIC.len() + 9] ^= 0xff;
        std::fs::write(&p, &bytes).unwrap();
        assert!(load(&p).is_err());
    }
}
