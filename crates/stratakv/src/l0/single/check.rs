//! `strata check` for the single level: the tree is sound, every entry
//! names a live table and a block that holds its key, and every key of
//! every live table is reachable through the tree.

use super::index::for_each_newest;
use super::state::numbers;
use super::SingleLevelL0;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::key::{make_internal_key, KIND_FOR_SEEK, MAX_SEQ};
use crate::sstable::BlockHandle;

impl SingleLevelL0 {
    /// See the module doc. Run it on a quiet database: a compaction in
    /// flight may move entries between tables the check has read.
    /// Tables in `indexing` (a flush's, or the recovery list's) may lack
    /// tree entries until indexed; their keys are then in the log.
    pub(super) fn check_tree(
        &self,
        eng: &Engine,
        v: &crate::version::Version,
        indexing: &std::collections::HashSet<u64>,
    ) -> Result<()> {
        let tree = self.tree()?;
        tree.check()?;
        let live = numbers(v.files(0));
        let region = &*eng.region_path;
        let mut seek = Vec::new();
        for item in tree.range(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded) {
            let (k, tv) = item?;
            // A flush running meanwhile adds its tables before the tree
            // names them: look at the version again.
            if !live.contains(&tv.file) && !eng.version().files(0).iter().any(|f| f.number == tv.file) {
                return Err(Error::corruption(
                    region,
                    0,
                    format!(
                        "tree entry {:?} names table {} that the version lacks (its tables: {:?})",
                        String::from_utf8_lossy(&k),
                        tv.file,
                        live
                    ),
                ));
            }
            let t = eng.tables.get(tv.file)?;
            seek.clear();
            make_internal_key(&mut seek, &k, MAX_SEQ, KIND_FOR_SEEK);
            let h = BlockHandle { offset: tv.block_offset, size: tv.block_len as u64 };
            if t.get_in_block(h, &seek, &k)?.is_none() {
                return Err(Error::corruption(
                    t.path(),
                    tv.block_offset,
                    format!("the block the tree names for {:?} does not hold it", String::from_utf8_lossy(&k)),
                ));
            }
        }
        // A compaction drops what a range tombstone hides from every
        // reader, with its tree entry; older tables may still hold the key.
        let oldest = eng.oldest_snapshot();
        for f in v.files(0).iter().filter(|f| !indexing.contains(&f.number)) {
            let t = eng.tables.get(f.number)?;
            for_each_newest(&t, |uk, _, seq, h| {
                if tree.get(uk)?.is_none() && !v.range_dels.hides(uk, seq, oldest) {
                    return Err(Error::corruption(
                        t.path(),
                        h.offset,
                        format!("key {:?} of this table is not in the tree", String::from_utf8_lossy(uk)),
                    ));
                }
                Ok(())
            })?;
        }
        Ok(())
    }
}
