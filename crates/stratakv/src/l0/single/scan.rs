//! Range-query sequentiality, SLM-DB's third compaction trigger: a scan
//! over the single level's tables watches a sliding window of its last
//! `scan_window` entries (a tree leaf's worth) and the tables that
//! supplied them. When the scan ends, the tables of its widest window
//! become candidates if they are more than `scan_min_tables`: keys that
//! sit next to each other are spread over that many files, and merging
//! those files makes later scans read fewer.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::counters::ReadCounters;
use crate::error::Result;
use crate::iterator::{InternalIterator, MergingIterator};

/// A merged cursor over the level's tables that watches its windows.
pub(super) struct ScanIter {
    merged: MergingIterator,
    /// Table number of each child of `merged`.
    files: Vec<u64>,
    /// Children that supplied the window's entries, oldest first.
    window: VecDeque<usize>,
    /// Entries of the window per child.
    counts: Vec<u32>,
    /// Children with entries in the window.
    distinct: usize,
    /// Tables of the widest window so far.
    widest: Vec<u64>,
    shared: Arc<ReadCounters>,
}

impl ScanIter {
    /// Watches `merged`, whose children are the tables `files`.
    pub fn new(merged: MergingIterator, files: Vec<u64>, shared: Arc<ReadCounters>) -> ScanIter {
        let n = files.len();
        ScanIter { merged, files, window: VecDeque::new(), counts: vec![0; n], distinct: 0, widest: Vec::new(), shared }
    }

    /// A new position, not next to the last: the window starts again.
    fn restart(&mut self) {
        self.window.clear();
        self.counts.iter_mut().for_each(|c| *c = 0);
        self.distinct = 0;
        self.observe();
    }

    /// Adds the current entry's table to the window.
    fn observe(&mut self) {
        let Some(child) = self.merged.current().filter(|_| self.merged.valid()) else { return };
        let Some(c) = self.counts.get_mut(child) else { return };
        *c += 1;
        if *c == 1 {
            self.distinct += 1;
        }
        self.window.push_back(child);
        if self.window.len() > self.shared.scan_window {
            if let Some(old) = self.window.pop_front() {
                if let Some(c) = self.counts.get_mut(old) {
                    *c -= 1;
                    if *c == 0 {
                        self.distinct -= 1;
                    }
                }
            }
        }
        if self.distinct > self.widest.len() {
            self.widest = self.counts.iter().zip(&self.files).filter(|(c, _)| **c > 0).map(|(_, f)| *f).collect();
        }
    }
}

impl Drop for ScanIter {
    fn drop(&mut self) {
        if self.widest.len() > self.shared.scan_min_tables {
            self.shared.marked.lock().extend(self.widest.iter().copied());
            self.shared.scans_marked.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl InternalIterator for ScanIter {
    fn valid(&self) -> bool {
        self.merged.valid()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.merged.seek_to_first()?;
        self.restart();
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.merged.seek_to_last()?;
        self.restart();
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.merged.seek(target)?;
        self.restart();
        Ok(())
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.merged.seek_for_prev(target)?;
        self.restart();
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        self.merged.next()?;
        self.observe();
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        self.merged.prev()?;
        self.observe();
        Ok(())
    }

    fn key(&self) -> &[u8] {
        self.merged.key()
    }

    fn value(&self) -> &[u8] {
        self.merged.value()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{internal_key, Kind};

    /// A child cursor over fixed internal keys.
    struct Fixed {
        keys: Vec<Vec<u8>>,
        at: usize,
    }

    impl InternalIterator for Fixed {
        fn valid(&self) -> bool {
            self.at < self.keys.len()
        }
        fn seek_to_first(&mut self) -> Result<()> {
            self.at = 0;
            Ok(())
        }
        fn seek_to_last(&mut self) -> Result<()> {
            self.at = self.keys.len().saturating_sub(1);
            Ok(())
        }
        fn seek(&mut self, target: &[u8]) -> Result<()> {
            self.at = self
                .keys
                .iter()
                .position(|k| crate::key::compare_internal(k, target).is_ge())
                .unwrap_or(self.keys.len());
            Ok(())
        }
        fn next(&mut self) -> Result<()> {
            self.at += 1;
            Ok(())
        }
        fn prev(&mut self) -> Result<()> {
            self.at = if self.at == 0 { self.keys.len() } else { self.at - 1 };
            Ok(())
        }
        fn key(&self) -> &[u8] {
            &self.keys[self.at]
        }
        fn value(&self) -> &[u8] {
            b""
        }
    }

    /// `tables` tables; table t holds keys t, t + tables, t + 2 * tables, ...
    /// (interleaved: every run of consecutive keys touches every table), or
    /// with `sorted`, table t holds the t-th block of consecutive keys.
    fn scan(tables: usize, keys: usize, sorted: bool, window: usize, min: usize, read: usize) -> (Vec<u64>, u64) {
        let per = keys / tables;
        let children: Vec<Box<dyn InternalIterator>> = (0..tables)
            .map(|t| {
                let ks = (0..per)
                    .map(|i| if sorted { t * per + i } else { i * tables + t })
                    .map(|k| internal_key(format!("{k:08}").as_bytes(), 1, Kind::Put))
                    .collect();
                Box::new(Fixed { keys: ks, at: 0 }) as Box<dyn InternalIterator>
            })
            .collect();
        let shared = Arc::new(ReadCounters::new(window, min));
        {
            let mut it =
                ScanIter::new(MergingIterator::new(children), (100..100 + tables as u64).collect(), shared.clone());
            it.seek(&internal_key(b"00000010", u64::MAX >> 8, Kind::Put)).unwrap();
            for _ in 1..read {
                assert!(it.valid());
                it.next().unwrap();
            }
        }
        let mut marked: Vec<u64> = shared.marked.lock().iter().copied().collect();
        marked.sort();
        (marked, shared.scans_marked.load(Ordering::Relaxed))
    }

    #[test]
    fn a_scan_over_interleaved_tables_marks_them() {
        let (marked, scans) = scan(12, 1200, false, 30, 8, 40);
        assert_eq!(marked, (100..112).collect::<Vec<u64>>());
        assert_eq!(scans, 1);
    }

    #[test]
    fn a_scan_over_sorted_tables_marks_nothing() {
        // 100 consecutive keys per table: a window of 30 touches at most 2.
        assert_eq!(scan(12, 1200, true, 30, 8, 400), (vec![], 0));
    }

    #[test]
    fn few_tables_in_the_widest_window_mark_nothing() {
        // Interleaved, but only 8 tables: not more than the threshold.
        assert_eq!(scan(8, 800, false, 30, 8, 60), (vec![], 0));
        // A window of 5 entries sees at most 5 of 12 tables.
        assert_eq!(scan(12, 1200, false, 5, 8, 60), (vec![], 0));
    }
}
