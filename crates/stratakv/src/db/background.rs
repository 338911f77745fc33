//! Background work: flushing sealed memtables, compaction, log msync,
//! deleting obsolete files; plus the synchronous `flush` and `compact_range`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{DbInner, KeyRange, PrefaultJob, State};
use crate::compaction::picker::key_may_exist_below;
use crate::compaction::runs::{merge_due, pick_run_merge, RunMergeTask};
use crate::compaction::{build_tables, pick, pick_range, BuildCtx, CompactionTask, Dropper, LevelPolicy};
use crate::error::{Error, Result};
use crate::iterator::{InternalIterator, MergingIterator};
use crate::memtable::{MemBuffers, Memtable};
use crate::options::L0Kind;
use crate::version::filename::table_path;
use crate::version::{FileMeta, LevelIter, Version, VersionEdit};
use strata_pmem::Extent;

/// How long a background thread waits before retrying after a full disk,
/// unless a caller waiting on it asks for a retry sooner.
const BACK_OFF: Duration = Duration::from_millis(250);

/// Free PM slots the prefault thread keeps reserved ahead of the next log
/// extents and rows on tmpfs (see `Region::reserve_ahead`): a log extent
/// fills in about 25 ms at full speed, and each new one asks for more.
const RESERVE_AHEAD_SLOTS: u64 = 4;

/// Sets the calling thread's nice value, if `nice` > 0. Linux keeps one per
/// thread and threads inherit it, so the column-compaction helpers a
/// compaction thread starts run at its priority too. Best effort: a failure
/// leaves the thread at normal priority, which is only slower.
fn lower_thread_priority(nice: i32) {
    #[cfg(target_os = "linux")]
    if nice > 0 {
        let _ = rustix::process::setpriority_process(Some(rustix::thread::gettid()), nice);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = nice;
}

impl DbInner {
    pub(crate) fn start_threads(self: &Arc<Self>) -> Result<()> {
        let spawn_at = |name: String, nice: i32, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name)
                .spawn(move || {
                    lower_thread_priority(nice);
                    f()
                })
                .map_err(|e| Error::io(&self.dir, "spawn thread", e))
        };
        let spawn = |name: String, f: Box<dyn FnOnce() + Send>| spawn_at(name, self.opts.background_nice, f);
        let mut threads = self.threads.lock();
        let me = self.clone();
        threads.push(spawn("strata-flush".into(), Box::new(move || me.flush_loop()))?);
        if self.opts.l0 == L0Kind::Matrix {
            // Columns get a thread of their own: a long merge of runs or
            // levels never holds up draining the matrix (PM space).
            let me = self.clone();
            threads.push(spawn("strata-column".into(), Box::new(move || me.column_loop()))?);
        }
        for i in 0..self.opts.background_compactions {
            let me = self.clone();
            threads.push(spawn(format!("strata-compact-{i}"), Box::new(move || me.compaction_loop()))?);
        }
        if self.needs_msync() && self.opts.pm_sync_interval_ms > 0 {
            let me = self.clone();
            threads.push(spawn("strata-sync".into(), Box::new(move || me.sync_loop()))?);
        }
        {
            // Only the region, not the database: the thread ends when
            // shutdown drops the sender.
            let (tx, rx) = std::sync::mpsc::channel::<PrefaultJob>();
            let region = self.region.clone();
            let spare_mem = self.spare_mem.clone();
            // At the writers' own priority: they wait for what it does
            // (pages mapped in, log heads made durable, spare memtables).
            threads.push(spawn_at(
                "strata-prefault".into(),
                0,
                Box::new(move || {
                    let mut previous: Option<(u64, u64)> = None;
                    while let Ok(job) = rx.recv() {
                        let (ext, map_bytes) = match job {
                            PrefaultJob::Extent { ext, map_bytes } => (ext, map_bytes),
                            PrefaultJob::Memtable(capacity) => {
                                if spare_mem.lock().is_none() {
                                    let buffers = MemBuffers::new(capacity);
                                    buffers.prefault();
                                    *spare_mem.lock() = Some(buffers);
                                }
                                continue;
                            }
                        };
                        if region.sim().is_none() {
                            region.prefault(ext.offset(), map_bytes.min(ext.len()));
                            // A full tmpfs shows up where it matters: at
                            // the allocation that needs the memory.
                            let _ = region.reserve_ahead(RESERVE_AHEAD_SLOTS);
                        }
                        // A failure is remembered by the extent: the writer
                        // or the next log sync reports it and poisons.
                        let _ = ext.sync_head();
                        // The writer has moved on from the previous extent
                        // (a late copy into a slot reserved there faults
                        // the page back in): unmapping it spares its
                        // write-back a TLB shootdown per page.
                        if let Some((off, len)) = previous.replace((ext.offset(), ext.len())) {
                            region.unmap_written(off, len);
                        }
                    }
                }),
            )?);
            *self.prefault.lock() = Some(tx);
        }
        self.prepare_spare_memtable();
        Ok(())
    }

    /// Asks the prefault thread to map in the first `map_bytes` of a fresh
    /// log extent, so the writer filling it does not take a page fault (and
    /// the kernel's zeroing of a new file page) every 4 KiB on the write
    /// path, and to make its head durable. Without the thread, the head is
    /// synced here.
    pub(crate) fn prefault(&self, ext: Extent, map_bytes: u64) {
        let sent = match self.prefault.lock().as_ref() {
            Some(tx) => tx.send(PrefaultJob::Extent { ext, map_bytes }).map_err(|e| e.0),
            None => Err(PrefaultJob::Extent { ext, map_bytes }),
        };
        if let Err(PrefaultJob::Extent { ext, .. }) = sent {
            let _ = ext.sync_head();
        }
    }

    /// Asks the prefault thread to get buffers ready for the next memtable
    /// (see [`MemBuffers::prefault`]); without the thread, the next switch
    /// allocates them itself.
    pub(crate) fn prepare_spare_memtable(&self) {
        if let Some(tx) = self.prefault.lock().as_ref() {
            let _ = tx.send(PrefaultJob::Memtable(self.opts.write_buffer_size));
        }
    }

    /// Buffers for a new memtable: the spare if one is ready, otherwise
    /// fresh ones. The next spare is asked for once the new memtable's
    /// first log extent is handed to the prefault thread (`reserve`).
    pub(crate) fn memtable_buffers(&self) -> MemBuffers {
        let spare = self.spare_mem.lock().take().filter(|b| b.capacity() == self.opts.write_buffer_size);
        spare.unwrap_or_else(|| MemBuffers::new(self.opts.write_buffer_size))
    }

    pub(crate) fn level_policy(&self) -> LevelPolicy {
        LevelPolicy {
            l0_trigger: self.opts.l0_compaction_trigger,
            // A big L0 (the matrix) makes a big L1, so the tree needs fewer levels.
            // With runs, L1 takes `max_runs` rounds at a time, so it is
            // that much bigger again.
            base_bytes: if self.opts.l0 == L0Kind::Matrix {
                self.opts.matrix_limit().saturating_mul(self.opts.max_runs.max(1) as u64)
            } else {
                self.opts.max_bytes_for_level_base
            },
            multiplier: self.opts.level_size_multiplier,
            target_file_size: self.opts.target_file_size,
        }
    }

    /// Stops background threads and syncs the log. Idempotent.
    pub(crate) fn shutdown(&self) -> Result<()> {
        if self.shutting_down.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        {
            let _st = self.state.lock();
            self.state_cv.notify_all();
        }
        self.prefault.lock().take();
        let handles: Vec<_> = self.threads.lock().drain(..).collect();
        for h in handles {
            let _ = h.join();
        }
        self.delete_obsolete();
        self.sync_log()
    }

    fn sync_loop(self: Arc<Self>) {
        let every = Duration::from_millis(self.opts.pm_sync_interval_ms);
        while !self.shutting_down.load(Ordering::Acquire) {
            self.sleep_until(Instant::now() + every);
            if self.sync_log().is_err() {
                // sync_log poisoned the database: retrying could report
                // success without the data (fsyncgate).
                return;
            }
        }
    }

    /// Waits until `deadline` or shutdown. `state_cv` is notified by every
    /// flush, compaction and write stall, so one wait on it is no interval:
    /// the log sync waited that way and msynced many times a second, each
    /// msync write-protecting the pages the writer is filling (a TLB
    /// shootdown, then a fault and a re-dirtied page on its next copy).
    fn sleep_until(&self, deadline: Instant) {
        let mut st = self.state.lock();
        while Instant::now() < deadline && !self.shutting_down.load(Ordering::Acquire) {
            self.state_cv.wait_until(&mut st, deadline);
        }
    }

    fn flush_loop(self: Arc<Self>) {
        loop {
            let (imm, retry) = {
                let mut st = self.state.lock();
                loop {
                    if st.poisoned.is_some() {
                        return;
                    }
                    if let Some(m) = st.imms.front() {
                        break (m.clone(), st.bg_retries);
                    }
                    if self.shutting_down.load(Ordering::Acquire) {
                        return;
                    }
                    self.state_cv.wait_for(&mut st, Duration::from_millis(100));
                }
            };
            if self.shutting_down.load(Ordering::Acquire) {
                // The log keeps the data; recovery rebuilds the memtable.
                return;
            }
            // Writers that reserved space in this memtable before it was
            // sealed may still be copying into it; the row or table must hold
            // their records (they will be acknowledged, and the MANIFEST edit
            // says the memtable's whole log is persisted elsewhere).
            // Publication is in sequence order, so once `last_seq` is visible
            // every such insert is done.
            self.pipeline.wait_visible(imm.last_seq());
            let r = if self.opts.l0 == L0Kind::Matrix {
                self.seal_to_row(&imm).and_then(|_| self.maybe_merge_rows())
            } else {
                self.flush_memtable(&imm)
            };
            match r {
                Ok(()) => self.clear_bg_error(),
                Err(Error::Closed) => return,
                Err(e) if self.retryable(&e) => self.back_off(e, retry),
                Err(e) => {
                    self.poison(&e);
                    return;
                }
            }
        }
    }

    pub(crate) fn build_ctx_pub<'a>(&'a self, next: &'a dyn Fn() -> u64, target: u64) -> BuildCtx<'a> {
        BuildCtx {
            fs: &*self.fs,
            dir: &self.dir,
            table: self.table_opts.clone(),
            target_file_size: target,
            next_number: next,
            stop: Some(&self.shutting_down),
            pause: None,
        }
    }

    fn next_file_number(&self) -> u64 {
        self.versions.lock().new_file_number()
    }

    /// Writes the oldest sealed memtable to an L0 table and retires its log.
    fn flush_memtable(&self, imm: &Arc<Memtable>) -> Result<()> {
        let version = self.state.lock().version.clone();
        let oldest = self.oldest_snapshot();
        let mut outputs = Vec::new();
        if !imm.is_empty() {
            let mut it = imm.iter();
            let mut dropper = Dropper::new(oldest, |uk| key_may_exist_below(&version, 0, uk) || in_l0(&version, uk));
            let next = || self.next_file_number();
            outputs = build_tables(&self.build_ctx_pub(&next, u64::MAX), &mut it, &mut dropper, &[])?;
        }
        let bytes: u64 = outputs.iter().map(|f| f.size).sum();
        let mut vs = self.versions.lock();
        let edit = VersionEdit {
            log_number: Some(imm.next_log()),
            last_sequence: Some(imm.last_seq().max(vs.last_sequence)),
            added: outputs.into_iter().map(|f| (0, f)).collect(),
            ..Default::default()
        };
        vs.log_and_apply(edit)?;
        self.counters.table_bytes_written.fetch_add(bytes, Ordering::Relaxed);
        self.counters.flushes.fetch_add(1, Ordering::Relaxed);
        let mut st = self.state.lock();
        if st.imms.front().map(|m| m.id()) == Some(imm.id()) {
            st.imms.pop_front();
        }
        st.version = vs.current();
        st.installs += 1;
        self.install_sv(&st);
        self.state_cv.notify_all();
        Ok(())
    }

    /// Runs column compactions (matrix L0) as they come due.
    fn column_loop(self: Arc<Self>) {
        loop {
            let retry = self.state.lock().bg_retries;
            let task = loop {
                if self.shutting_down.load(Ordering::Acquire) {
                    return;
                }
                let picked = if self.opts.disable_auto_compaction {
                    Ok(None)
                } else {
                    let mut vs = self.versions.lock();
                    self.pick_column_task(&mut vs, false)
                };
                match picked {
                    Ok(Some(t)) => break t,
                    Ok(None) => {}
                    Err(e) => {
                        self.poison(&e);
                        return;
                    }
                }
                let mut st = self.state.lock();
                // Checked under `state`, which shutdown holds while notifying.
                if st.poisoned.is_some() || self.shutting_down.load(Ordering::Acquire) {
                    return;
                }
                self.state_cv.wait_for(&mut st, Duration::from_millis(200));
            };
            let r = self.run_column(&task);
            if !self.after_compaction(r, retry) {
                return;
            }
        }
    }

    /// Handles the outcome of a compaction attempt begun when `bg_retries`
    /// was `retry`: deletes what became obsolete, then clears the error,
    /// backs off before a retry (a full disk) or poisons. Returns whether
    /// the calling thread goes on.
    fn after_compaction(&self, r: Result<()>, retry: u64) -> bool {
        self.delete_obsolete();
        match r {
            Ok(()) => self.clear_bg_error(),
            Err(Error::Closed) => return false,
            Err(e) if self.retryable(&e) => self.back_off(e, retry),
            Err(e) => {
                self.poison(&e);
                return false;
            }
        }
        true
    }

    fn compaction_loop(self: Arc<Self>) {
        loop {
            let retry = self.state.lock().bg_retries;
            let work = match self.next_work() {
                Ok(Some(w)) => w,
                Ok(None) => return,
                Err(e) => {
                    self.poison(&e);
                    return;
                }
            };
            let r = match &work {
                Work::Level(t, v) => {
                    let r = self.run_compaction(t, v);
                    let mut st = self.state.lock();
                    unmark_busy(&mut st, t);
                    self.state_cv.notify_all();
                    r
                }
                Work::Runs(t, v) => self.run_run_merge(t, v),
            };
            if !self.after_compaction(r, retry) {
                return;
            }
        }
    }

    /// Whether a background failure can be retried: a full disk (the data
    /// is still in the PM log, and failed outputs were removed). Any other
    /// I/O error poisons the database (fsyncgate: never retry and carry on).
    fn retryable(&self, e: &Error) -> bool {
        matches!(e, Error::DiskFull { .. })
    }

    /// Records a retryable failure of an attempt begun when `bg_retries`
    /// was `retry`, and waits before the next attempt: the whole back-off,
    /// unless a caller waiting on background work asks for a retry (the
    /// disk may have room again; if it asked during this attempt, at once),
    /// or the database shuts down or is poisoned. Other wake-ups (another
    /// thread's back-off, stalled writers, PM waits) do not end it: two
    /// failing threads used to wake each other into a busy loop.
    fn back_off(&self, e: Error, retry: u64) {
        let deadline = Instant::now() + BACK_OFF;
        let mut st = self.state.lock();
        st.bg_error_retry = if st.bg_error.is_some() { st.bg_error_retry.max(retry) } else { retry };
        st.bg_error = Some(e);
        self.state_cv.notify_all();
        while st.bg_retries == retry && st.poisoned.is_none() && !self.shutting_down.load(Ordering::Acquire) {
            if self.state_cv.wait_until(&mut st, deadline).timed_out() {
                break;
            }
        }
    }

    /// Asks the background threads to retry a failed flush or compaction
    /// now (call with `state` held, when `bg_error` is set). Returns the
    /// request's number for [`DbInner::disk_full_error`].
    pub(crate) fn request_retry(&self, st: &mut State) -> u64 {
        st.bg_retries += 1;
        self.state_cv.notify_all();
        st.bg_retries
    }

    /// The error for a caller that has waited on background work since
    /// `since` and asked for retry `retry`, if it should give up: the disk
    /// is still full after `pm_full_timeout_ms`, as an attempt begun after
    /// the request found. An older failure may predate freed space, and
    /// the retry it asked for may be about to succeed.
    pub(crate) fn disk_full_error(&self, st: &State, since: Instant, retry: u64) -> Option<Error> {
        let e = st.bg_error.as_ref()?;
        if st.bg_error_retry < retry || since.elapsed() <= Duration::from_millis(self.opts.pm_full_timeout_ms) {
            return None;
        }
        Some(match e {
            Error::DiskFull { path, op } => Error::DiskFull { path: path.clone(), op },
            other => Error::Pm(other.to_string()),
        })
    }

    fn clear_bg_error(&self) {
        let mut st = self.state.lock();
        if st.bg_error.take().is_some() {
            self.state_cv.notify_all();
        }
    }

    /// Waits for the next compaction to do; `None` at shutdown or poison.
    fn next_work(&self) -> Result<Option<Work>> {
        let policy = self.level_policy();
        loop {
            if self.shutting_down.load(Ordering::Acquire) {
                return Ok(None);
            }
            let vs = self.versions.lock();
            // Lock order: versions, matrix, state.
            let active = self.matrix.lock().active_run();
            let mut st = self.state.lock();
            // Checked under `state`, which shutdown holds while notifying.
            if st.poisoned.is_some() || self.shutting_down.load(Ordering::Acquire) {
                return Ok(None);
            }
            if !self.opts.disable_auto_compaction {
                // Runs first: they are read before L1, and leveled picks
                // would find their L1 inputs busy meanwhile anyway.
                if let Some(t) = pick_run_merge(&st.version, active, self.opts.max_runs, false, &st.busy) {
                    mark_busy_inputs(&mut st, t.all_inputs());
                    let v = st.version.clone();
                    return Ok(Some(Work::Runs(t, v)));
                }
                if let Some(t) = pick(&st.version, &policy, &st.busy, &vs.compact_pointers) {
                    mark_busy(&mut st, &t);
                    let v = st.version.clone();
                    return Ok(Some(Work::Level(t, v)));
                }
            }
            drop(vs);
            self.state_cv.wait_for(&mut st, Duration::from_millis(200));
            drop(st);
            self.delete_obsolete();
        }
    }

    /// Merges a task's inputs into the next level and installs the result.
    fn run_compaction(&self, t: &CompactionTask, version: &Arc<Version>) -> Result<()> {
        let out_level = t.output_level();
        let mut edit = VersionEdit::default();
        for f in t.inputs.iter() {
            edit.deleted.push((t.level as u32, f.number));
        }
        for f in t.next_inputs.iter() {
            edit.deleted.push((out_level as u32, f.number));
        }
        let mut written = 0;
        if t.trivial_move {
            for f in &t.inputs {
                edit.added.push((out_level as u32, (**f).clone()));
            }
        } else {
            let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
            if t.level == 0 {
                for f in &t.inputs {
                    children.push(Box::new(self.tables.get(f.number)?.compaction_iter()));
                }
            } else {
                children.push(Box::new(LevelIter::for_compaction(self.tables.clone(), t.inputs.clone())));
            }
            if !t.next_inputs.is_empty() {
                children.push(Box::new(LevelIter::for_compaction(self.tables.clone(), t.next_inputs.clone())));
            }
            let mut it = MergingIterator::new(children);
            let oldest = self.oldest_snapshot();
            let mut dropper = Dropper::new(oldest, |uk| key_may_exist_below(version, out_level, uk));
            let next = || self.next_file_number();
            let outputs = build_tables(
                &self.build_ctx_pub(&next, self.opts.target_file_size),
                &mut it,
                &mut dropper,
                &t.grandparents,
            )?;
            written = outputs.iter().map(|f| f.size).sum();
            for f in outputs {
                edit.added.push((out_level as u32, f));
            }
            self.counters.compaction_bytes_read.fetch_add(t.input_bytes(), Ordering::Relaxed);
        }
        if let Some(last) = t.inputs.iter().map(|f| &f.largest).max_by(|a, b| crate::key::compare_internal(a, b)) {
            edit.compact_pointers.push((t.level as u32, last.clone()));
        }
        let obsolete = if t.trivial_move { Vec::new() } else { t.all_inputs().cloned().collect() };
        self.install_compaction(edit, written, obsolete)
    }

    /// Records a compaction's edit, counts its output, and lets readers see
    /// the new version; `obsolete` are the inputs it rewrote (deleted once
    /// no version uses them).
    pub(crate) fn install_compaction(
        &self,
        edit: VersionEdit,
        written: u64,
        obsolete: Vec<Arc<FileMeta>>,
    ) -> Result<()> {
        let mut vs = self.versions.lock();
        vs.log_and_apply(edit)?;
        self.counters.table_bytes_written.fetch_add(written, Ordering::Relaxed);
        self.counters.compactions.fetch_add(1, Ordering::Relaxed);
        let mut st = self.state.lock();
        st.version = vs.current();
        st.installs += 1;
        st.obsolete.extend(obsolete);
        self.install_sv(&st);
        self.state_cv.notify_all();
        Ok(())
    }

    /// Deletes table files that no version references any more.
    pub(crate) fn delete_obsolete(&self) {
        let doomed: Vec<Arc<FileMeta>> = {
            let mut st = self.state.lock();
            let (dead, alive): (Vec<_>, Vec<_>) =
                std::mem::take(&mut st.obsolete).into_iter().partition(|f| Arc::strong_count(f) == 1);
            st.obsolete = alive;
            dead
        };
        for f in doomed {
            self.tables.evict(f.number);
            // Best effort: an undeleted orphan is removed at the next open.
            let _ = self.fs.remove(&table_path(&self.dir, f.number));
        }
    }

    /// Whether any flush or compaction is running or due.
    fn background_work_pending(&self) -> bool {
        let vs = self.versions.lock();
        let m = self.matrix.lock();
        let st = self.state.lock();
        if !st.imms.is_empty() || st.compactions_running > 0 || st.column_busy {
            return true;
        }
        if self.opts.disable_auto_compaction {
            return false;
        }
        if self.opts.l0 == L0Kind::Matrix && (m.round_active() || self.round_due(&m, false)) {
            return true;
        }
        merge_due(&st.version, m.active_run(), self.opts.max_runs)
            || pick(&st.version, &self.level_policy(), &st.busy, &vs.compact_pointers).is_some()
    }

    /// Blocks until no background work is running or due.
    pub(crate) fn wait_for_compactions(&self) -> Result<()> {
        loop {
            if let Some(p) = &self.state.lock().poisoned {
                return Err(Error::Poisoned(p.clone()));
            }
            if self.shutting_down.load(Ordering::Acquire) {
                return Err(Error::Closed);
            }
            if !self.background_work_pending() {
                return Ok(());
            }
            let mut st = self.state.lock();
            self.state_cv.wait_for(&mut st, Duration::from_millis(20));
        }
    }

    /// Seals the memtable and waits until it and all earlier ones are in tables.
    pub(crate) fn flush_all(&self) -> Result<()> {
        self.check_writable()?;
        let target = {
            let mut w = self.write.lock();
            if !w.mem.is_empty() {
                self.switch_memtable(&mut w);
            }
            w.next_mem_id
        };
        let mut st = self.state.lock();
        // While the disk is full: since when, and the retry this call asked for.
        let mut full: Option<(Instant, u64)> = None;
        loop {
            if let Some(p) = &st.poisoned {
                return Err(Error::Poisoned(p.clone()));
            }
            if self.shutting_down.load(Ordering::Acquire) {
                return Err(Error::Closed);
            }
            if !st.imms.front().map(|m| m.id() < target).unwrap_or(false) {
                return Ok(());
            }
            // The disk is full and flushes keep retrying: have them retry
            // now (space may have been freed), and give up after a while,
            // as writers do, instead of waiting forever.
            if st.bg_error.is_some() {
                let (since, retry) = *full.get_or_insert_with(|| (Instant::now(), self.request_retry(&mut st)));
                if let Some(e) = self.disk_full_error(&st, since, retry) {
                    return Err(e);
                }
            } else {
                full = None;
            }
            self.state_cv.wait_for(&mut st, Duration::from_millis(50));
        }
    }

    /// Flushes, then pushes every file overlapping `range` down to the deepest level.
    pub(crate) fn compact_range(&self, range: KeyRange) -> Result<()> {
        self.flush_all()?;
        let (lo, hi) = range.user_bounds();
        let policy = self.level_policy();
        let mut level = 0;
        if self.opts.l0 == L0Kind::Matrix {
            // L0 is the matrix: move it all into L1 column by column (or
            // into a run, then merge the runs into L1), then push L1 and
            // below down as usual. Runs go first when columns go straight
            // to L1: such a column waits until no run is left above L1.
            let drained = if self.opts.tiered() {
                self.drain_matrix().and_then(|_| self.merge_all_runs())
            } else {
                self.merge_all_runs().and_then(|_| self.drain_matrix())
            };
            if let Err(e) = drained {
                // As for the levels below: only a full disk is retryable.
                if !self.retryable(&e) {
                    self.poison(&e);
                }
                return Err(e);
            }
            level = 1;
        }
        loop {
            let deepest = self.state.lock().version.deepest_level().unwrap_or(0).max(1);
            if level >= deepest {
                return Ok(());
            }
            loop {
                let picked = {
                    let mut st = self.state.lock();
                    if let Some(p) = &st.poisoned {
                        return Err(Error::Poisoned(p.clone()));
                    }
                    if st.version.overlapping(level, lo.as_deref(), hi.as_deref()).is_empty() {
                        break;
                    }
                    match pick_range(&st.version, &policy, level, lo.as_deref(), hi.as_deref(), &st.busy) {
                        Some(t) => {
                            mark_busy(&mut st, &t);
                            Some((t, st.version.clone()))
                        }
                        None => {
                            self.state_cv.wait_for(&mut st, Duration::from_millis(20));
                            None
                        }
                    }
                };
                if let Some((t, v)) = picked {
                    let r = self.run_compaction(&t, &v);
                    {
                        let mut st = self.state.lock();
                        unmark_busy(&mut st, &t);
                        self.state_cv.notify_all();
                    }
                    self.delete_obsolete();
                    if let Err(e) = r {
                        // A full disk is retryable (failed outputs were
                        // removed); anything else leaves state unknown.
                        if !self.retryable(&e) {
                            self.poison(&e);
                        }
                        return Err(e);
                    }
                }
            }
            level += 1;
        }
    }
}

/// One unit of compaction work (columns have a thread of their own).
enum Work {
    Level(CompactionTask, Arc<Version>),
    Runs(RunMergeTask, Arc<Version>),
}

fn in_l0(v: &Version, uk: &[u8]) -> bool {
    v.files(0).iter().any(|f| f.smallest_user() <= uk && uk <= f.largest_user())
}

fn mark_busy(st: &mut State, t: &CompactionTask) {
    mark_busy_inputs(st, t.all_inputs());
}

fn unmark_busy(st: &mut State, t: &CompactionTask) {
    unmark_busy_inputs(st, t.all_inputs());
}

/// Marks a compaction's input files busy and counts it as running.
pub(crate) fn mark_busy_inputs<'a>(st: &mut State, inputs: impl Iterator<Item = &'a Arc<FileMeta>>) {
    for f in inputs {
        st.busy.insert(f.number);
    }
    st.compactions_running += 1;
}

/// Undoes [`mark_busy_inputs`].
pub(crate) fn unmark_busy_inputs<'a>(st: &mut State, inputs: impl Iterator<Item = &'a Arc<FileMeta>>) {
    for f in inputs {
        st.busy.remove(&f.number);
    }
    st.compactions_running = st.compactions_running.saturating_sub(1);
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use crate::{Db, Options};

    #[test]
    fn the_log_sync_interval_is_not_cut_short_by_other_background_events() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::for_tests()).unwrap();
        let inner = db.inner.clone();
        let start = Instant::now();
        let waiter = std::thread::spawn(move || inner.sleep_until(start + Duration::from_millis(300)));
        while !waiter.is_finished() && start.elapsed() < Duration::from_secs(5) {
            db.inner.state_cv.notify_all();
            std::thread::sleep(Duration::from_millis(2));
        }
        waiter.join().unwrap();
        assert!(start.elapsed() >= Duration::from_millis(300), "woke after {:?}", start.elapsed());
    }
}
