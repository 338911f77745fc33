//! A cursor over one sorted, disjoint level: opens one table at a time.

use std::cmp::Ordering;
use std::sync::Arc;

use super::{FileMeta, TableCache};
use crate::error::Result;
use crate::iterator::InternalIterator;
use crate::key::compare_internal;
use crate::sstable::TableIter;

/// Concatenation of the tables of a level.
pub struct LevelIter {
    tables: Arc<TableCache>,
    files: Vec<Arc<FileMeta>>,
    idx: usize,
    cur: Option<TableIter>,
    fill_cache: bool,
}

impl LevelIter {
    /// A cursor over `files` (sorted by key, disjoint).
    pub fn new(tables: Arc<TableCache>, files: Vec<Arc<FileMeta>>) -> LevelIter {
        LevelIter { tables, files, idx: 0, cur: None, fill_cache: true }
    }

    /// A cursor for compactions: blocks read are not added to the cache.
    pub fn for_compaction(tables: Arc<TableCache>, files: Vec<Arc<FileMeta>>) -> LevelIter {
        LevelIter { tables, files, idx: 0, cur: None, fill_cache: false }
    }

    fn open(&mut self, i: usize) -> Result<bool> {
        self.idx = i;
        match self.files.get(i) {
            Some(f) => {
                let t = self.tables.get(f.number)?;
                self.cur = Some(if self.fill_cache { t.iter() } else { t.compaction_iter() });
                Ok(true)
            }
            None => {
                self.cur = None;
                Ok(false)
            }
        }
    }

    fn cur_valid(&self) -> bool {
        self.cur.as_ref().map(|c| c.valid()).unwrap_or(false)
    }

    fn skip_forward(&mut self) -> Result<()> {
        while self.cur.is_some() && !self.cur_valid() {
            let n = self.idx + 1;
            if !self.open(n)? {
                return Ok(());
            }
            if let Some(c) = &mut self.cur {
                c.seek_to_first()?;
            }
        }
        Ok(())
    }

    fn skip_backward(&mut self) -> Result<()> {
        while self.cur.is_some() && !self.cur_valid() {
            if self.idx == 0 {
                self.cur = None;
                return Ok(());
            }
            let n = self.idx - 1;
            self.open(n)?;
            if let Some(c) = &mut self.cur {
                c.seek_to_last()?;
            }
        }
        Ok(())
    }
}

impl InternalIterator for LevelIter {
    fn valid(&self) -> bool {
        self.cur_valid()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        if self.open(0)? {
            if let Some(c) = &mut self.cur {
                c.seek_to_first()?;
            }
        }
        self.skip_forward()
    }

    fn seek_to_last(&mut self) -> Result<()> {
        let n = self.files.len();
        if n > 0 && self.open(n - 1)? {
            if let Some(c) = &mut self.cur {
                c.seek_to_last()?;
            }
        } else {
            self.cur = None;
        }
        self.skip_backward()
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let i = self.files.partition_point(|f| compare_internal(&f.largest, target) == Ordering::Less);
        if self.open(i)? {
            if let Some(c) = &mut self.cur {
                c.seek(target)?;
            }
        }
        self.skip_forward()
    }

    fn next(&mut self) -> Result<()> {
        if let Some(c) = &mut self.cur {
            c.next()?;
        }
        self.skip_forward()
    }

    fn prev(&mut self) -> Result<()> {
        if let Some(c) = &mut self.cur {
            c.prev()?;
        }
        self.skip_backward()
    }

    fn key(&self) -> &[u8] {
        self.cur.as_ref().map(|c| c.key()).unwrap_or(&[])
    }

    fn value(&self) -> &[u8] {
        self.cur.as_ref().map(|c| c.value()).unwrap_or(&[])
    }
}
