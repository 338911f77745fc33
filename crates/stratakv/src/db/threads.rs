//! The background threads, each a loop: the flush thread, level 0's own
//! threads, the shared compaction threads, the log sync thread and the
//! prefault thread; and shutdown, which stops them.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::DbInner;
use crate::error::{Error, Result};
use crate::l0::{Job, Lane};

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
                .map_err(|e| Error::io(&self.eng.dir, "spawn thread", e))
        };
        let spawn = |name: String, f: Box<dyn FnOnce() + Send>| spawn_at(name, self.eng.opts.background_nice, f);
        let mut threads = self.threads.lock();
        let me = self.clone();
        threads.push(spawn("strata-flush".into(), Box::new(move || me.flush_loop()))?);
        for (i, name) in self.l0.lanes().iter().enumerate() {
            let me = self.clone();
            threads.push(spawn(format!("strata-{name}"), Box::new(move || me.lane_loop(i)))?);
        }
        for i in 0..self.eng.opts.background_compactions {
            let me = self.clone();
            threads.push(spawn(format!("strata-compact-{i}"), Box::new(move || me.compaction_loop()))?);
        }
        if self.eng.log.needs_msync() && self.eng.opts.pm_sync_interval_ms > 0 {
            let me = self.clone();
            threads.push(spawn("strata-sync".into(), Box::new(move || me.sync_loop()))?);
        }
        // At the writers' own priority: they wait for what it does (pages
        // mapped in, log heads made durable, spare memtables).
        let prefault = self.eng.log.prefault.start(self.eng.region.clone());
        threads.push(spawn_at("strata-prefault".into(), 0, Box::new(prefault))?);
        self.eng.log.prefault.prepare_spare();
        Ok(())
    }

    /// Stops background threads and syncs the log. Idempotent.
    pub(crate) fn shutdown(&self) -> Result<()> {
        let eng = &self.eng;
        if eng.shutting_down.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        {
            let mut st = eng.state.lock();
            eng.notify(&mut st);
        }
        eng.log.prefault.stop();
        let handles: Vec<_> = self.threads.lock().drain(..).collect();
        for h in handles {
            let _ = h.join();
        }
        eng.delete_obsolete();
        eng.sync_log()
    }

    fn sync_loop(self: Arc<Self>) {
        let every = Duration::from_millis(self.eng.opts.pm_sync_interval_ms);
        while !self.eng.closing() {
            self.eng.sleep_until(Instant::now() + every);
            if self.eng.sync_log().is_err() {
                // sync_log poisoned the database: retrying could report
                // success without the data (fsyncgate).
                return;
            }
        }
    }

    /// Makes sealed memtables part of level 0, oldest first.
    fn flush_loop(self: Arc<Self>) {
        let eng = &self.eng;
        loop {
            let (imm, retry) = {
                let mut st = eng.state.lock();
                loop {
                    if st.poisoned.is_some() {
                        return;
                    }
                    if let Some(m) = st.imms.front() {
                        break (m.clone(), st.bg_retries);
                    }
                    if eng.closing() {
                        return;
                    }
                    eng.cv.wait_for(&mut st, Duration::from_millis(100));
                }
            };
            if eng.closing() {
                // The log keeps the data; recovery rebuilds the memtable.
                return;
            }
            // Writers that reserved space in this memtable before it was
            // sealed may still be copying into it; level 0 must hold their
            // records (they will be acknowledged, and the MANIFEST edit says
            // the memtable's whole log is persisted elsewhere). Publication
            // is in sequence order, so once `last_seq` is visible every such
            // insert is done.
            eng.pipeline.wait_visible(imm.last_seq());
            let r = self.l0.flush(eng, &imm);
            if !eng.settle(r, retry) {
                return;
            }
        }
    }

    /// Runs the jobs of level 0's own thread number `lane` as they come due.
    fn lane_loop(self: Arc<Self>, lane: usize) {
        let eng = &self.eng;
        loop {
            let retry = eng.attempt();
            let job = loop {
                let Some(seen) = eng.working_epoch() else { return };
                let picked =
                    if eng.opts.disable_auto_compaction { Ok(None) } else { self.l0.next_job(eng, Lane::Own(lane)) };
                match picked {
                    Ok(Some(job)) => break job,
                    Ok(None) => {}
                    Err(e) => {
                        eng.poison(&e);
                        return;
                    }
                }
                if !eng.wait_for_change(seen, Duration::from_millis(200)) {
                    return;
                }
            };
            let r = job(eng);
            eng.delete_obsolete();
            if !eng.settle(r, retry) {
                return;
            }
        }
    }

    /// Runs level 0's shared jobs and leveled compactions as they come due.
    fn compaction_loop(self: Arc<Self>) {
        let eng = &self.eng;
        loop {
            let retry = eng.attempt();
            let job = match self.next_work() {
                Ok(Some(job)) => job,
                Ok(None) => return,
                Err(e) => {
                    eng.poison(&e);
                    return;
                }
            };
            let r = job(eng);
            eng.delete_obsolete();
            if !eng.settle(r, retry) {
                return;
            }
        }
    }

    /// Waits for the next compaction to do; `None` at shutdown or poison.
    fn next_work(&self) -> Result<Option<Job<'_>>> {
        let eng = &self.eng;
        loop {
            let Some(seen) = eng.working_epoch() else { return Ok(None) };
            // Cheap (a MANIFEST edit) and what frees a dropped partition's
            // space: done even with automatic compaction off.
            if let Some(job) = self.pick_range_drop().or_else(|| self.pick_split()).or_else(|| self.pick_retire()) {
                return Ok(Some(job));
            }
            if !eng.opts.disable_auto_compaction {
                // Level 0's jobs first: what they merge is read before L1,
                // and leveled picks would find their L1 inputs busy
                // meanwhile anyway.
                if let Some(job) = self.l0.next_job(eng, Lane::Shared)? {
                    return Ok(Some(job));
                }
                if let Some(job) = self.pick_leveled().or_else(|| self.pick_tombstone_compaction()) {
                    return Ok(Some(job));
                }
            }
            if !eng.wait_for_change(seen, Duration::from_millis(200)) {
                return Ok(None);
            }
            eng.delete_obsolete();
        }
    }
}
