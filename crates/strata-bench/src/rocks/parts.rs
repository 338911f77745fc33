//! RocksDB's side of `--partitions` and the deletehalf benchmarks: one
//! column family per partition (`p0000`, `p0001`, ...), each opened with
//! the same options as the default family; DeleteRange for range deletes
//! and DropColumnFamily for drops. Without partitions, partition 0 is the
//! default column family.

use std::path::Path;
use std::sync::atomic::Ordering;

use anyhow::{anyhow, Result};
use rocksdb::{ColumnFamily, ColumnFamilyDescriptor, Options, WriteBatch, DB};

use super::RocksEngine;
use crate::engine::{partitions_to_open, BatchOp};

/// The partitions' column families for a database at `dir` with `n`
/// partitions: which to open (by partition), the options to open with
/// and their descriptors, each with the default family's options.
pub(super) fn column_families(
    opts: &Options,
    dir: &Path,
    n: usize,
) -> Result<(Vec<Option<String>>, Options, Vec<ColumnFamilyDescriptor>)> {
    let mut open = opts.clone();
    if n <= 1 {
        return Ok((Vec::new(), open, Vec::new()));
    }
    // A database that does not exist yet has no families to list.
    let existing = DB::list_cf(opts, dir).unwrap_or_default();
    let parts = partitions_to_open(&existing, n)?;
    open.create_missing_column_families(true);
    let families = parts.iter().flatten().map(|name| ColumnFamilyDescriptor::new(name, opts.clone())).collect();
    Ok((parts, open, families))
}

impl RocksEngine {
    /// The column family of partition `part` (the default one without
    /// partitions), None if it was dropped (reads find nothing there).
    fn live_cf(&self, part: usize) -> Result<Option<&ColumnFamily>> {
        let name = if self.parts.is_empty() && part == 0 {
            "default"
        } else {
            match self.parts.get(part) {
                Some(Some(name)) => name.as_str(),
                Some(None) => return Ok(None),
                None => return Err(anyhow!("no column family for partition {part} (beyond --partitions)")),
            }
        };
        self.db.cf_handle(name).map(Some).ok_or_else(|| anyhow!("no column family {name:?}"))
    }

    /// The column family of partition `part` for a write: an error if it was dropped.
    fn cf(&self, part: usize) -> Result<&ColumnFamily> {
        self.live_cf(part)?.ok_or_else(|| anyhow!("partition {part} was dropped"))
    }

    pub(super) fn put_cf(&self, part: usize, key: &[u8], value: &[u8], sync: bool) -> Result<()> {
        let cf = self.cf(part)?;
        self.user_bytes.fetch_add((key.len() + value.len()) as u64, Ordering::Relaxed);
        Ok(self.db.put_cf_opt(cf, key, value, self.wo(sync))?)
    }

    pub(super) fn write_cf(&self, ops: &[(usize, BatchOp<'_>)], sync: bool) -> Result<()> {
        let mut b = WriteBatch::default();
        let mut bytes = 0;
        for (part, op) in ops {
            let cf = self.cf(*part)?;
            match op {
                BatchOp::Put(k, v) => {
                    bytes += k.len() + v.len();
                    b.put_cf(cf, k, v);
                }
                BatchOp::Delete(k) => {
                    bytes += k.len();
                    b.delete_cf(cf, k);
                }
            }
        }
        self.user_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        Ok(self.db.write_opt(b, self.wo(sync))?)
    }

    pub(super) fn get_visit_cf(&self, part: usize, key: &[u8], visit: &mut dyn FnMut(&[u8])) -> Result<bool> {
        let Some(cf) = self.live_cf(part)? else { return Ok(false) };
        Ok(self.db.get_pinned_cf_opt(cf, key, &self.read)?.map(|v| visit(&v)).is_some())
    }

    pub(super) fn scan_cf(
        &self,
        part: usize,
        start: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<u64> {
        let Some(cf) = self.live_cf(part)? else { return Ok(0) };
        let mut it = self.db.raw_iterator_cf_opt(cf, self.ro());
        it.seek(start);
        let mut n = 0;
        while it.valid() {
            let (Some(k), Some(v)) = (it.key(), it.value()) else {
                break;
            };
            n += 1;
            if !visit(k, v) {
                break;
            }
            it.next();
        }
        it.status().map_err(|e| anyhow!("iteration failed: {e}"))?;
        Ok(n)
    }

    pub(super) fn delete_range_cf(&self, part: usize, start: &[u8], end: &[u8]) -> Result<()> {
        Ok(self.db.delete_range_cf_opt(self.cf(part)?, start, end, self.wo(false))?)
    }

    pub(super) fn drop_cf(&mut self, part: usize) -> Result<()> {
        let name = self
            .parts
            .get(part)
            .cloned()
            .flatten()
            .ok_or_else(|| anyhow!("no column family for partition {part} (dropped, or no --partitions)"))?;
        self.db.drop_cf(&name)?;
        if let Some(slot) = self.parts.get_mut(part) {
            *slot = None;
        }
        Ok(())
    }

    /// Flushes the partitions' families (the default one is flushed apart).
    pub(super) fn flush_parts(&self) -> Result<()> {
        for name in self.parts.iter().flatten() {
            if let Some(cf) = self.db.cf_handle(name) {
                self.db.flush_cf(cf)?;
            }
        }
        Ok(())
    }

    /// Compacts the partitions' families (the default one is compacted apart).
    pub(super) fn compact_parts(&self) -> Result<()> {
        for name in self.parts.iter().flatten() {
            if let Some(cf) = self.db.cf_handle(name) {
                self.db.compact_range_cf::<&[u8], &[u8]>(cf, None, None);
            }
        }
        Ok(())
    }
}
