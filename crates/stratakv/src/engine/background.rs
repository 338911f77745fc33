//! Failure handling of the engine, in one place: poison (writes refused
//! until a reopen), the retryable background error of a full disk with its
//! back-off and retries, and waiting for free PM.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{Engine, State};
use crate::error::{Error, Result};

/// How long a background thread waits before retrying after a full disk,
/// unless a caller waiting on it asks for a retry sooner.
const BACK_OFF: Duration = Duration::from_millis(250);

impl Engine {
    /// `Closed` while closing, `Poisoned` once writes are refused.
    pub fn check_writable(&self) -> Result<()> {
        if self.closing() {
            return Err(Error::Closed);
        }
        if let Some(p) = &self.state.lock().poisoned {
            return Err(Error::Poisoned(p.clone()));
        }
        Ok(())
    }

    /// Refuses further writes until the database is reopened.
    pub fn poison(&self, why: &Error) {
        let mut st = self.state.lock();
        if st.poisoned.is_none() {
            st.poisoned = Some(why.to_string());
        }
        self.poisoned_flag.store(true, Ordering::Release);
        self.notify(&mut st);
    }

    /// Whether a background failure can be retried: a full disk (the data
    /// is still in the PM log, and failed outputs were removed). Any other
    /// I/O error poisons the database (fsyncgate: never retry and carry on).
    pub fn retryable(e: &Error) -> bool {
        matches!(e, Error::DiskFull { .. })
    }

    /// Handles the outcome of background work begun when `bg_retries` was
    /// `retry` (see [`Engine::attempt`]): clears the error, backs off before
    /// a retry (a full disk) or poisons. Returns whether the calling thread
    /// goes on.
    pub fn settle(&self, r: Result<()>, retry: u64) -> bool {
        match r {
            Ok(()) => self.clear_bg_error(),
            Err(Error::Closed) => return false,
            Err(e) if Engine::retryable(&e) => self.back_off(e, retry),
            Err(e) => {
                self.poison(&e);
                return false;
            }
        }
        true
    }

    /// The number of the attempt background work begins now (see
    /// [`Engine::settle`]).
    pub fn attempt(&self) -> u64 {
        self.state.lock().bg_retries
    }

    /// The outcome of work a caller ran itself (`compact_range`): a full
    /// disk is retryable, anything else leaves durable state unknown and
    /// poisons.
    pub fn surface<T>(&self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r {
            if !Engine::retryable(e) {
                self.poison(e);
            }
        }
        r
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
        self.notify(&mut st);
        while st.bg_retries == retry && st.poisoned.is_none() && !self.closing() {
            if self.cv.wait_until(&mut st, deadline).timed_out() {
                break;
            }
        }
    }

    fn clear_bg_error(&self) {
        let mut st = self.state.lock();
        if st.bg_error.take().is_some() {
            self.notify(&mut st);
        }
    }

    /// Asks the background threads to retry a failed flush or compaction
    /// now (call with `state` held, when `bg_error` is set). Returns the
    /// request's number for [`Engine::disk_full_error`].
    pub fn request_retry(&self, st: &mut State) -> u64 {
        st.bg_retries += 1;
        self.notify(st);
        st.bg_retries
    }

    /// The error for a caller that has waited on background work since
    /// `since` and asked for retry `retry`, if it should give up: the disk
    /// is still full after `pm_full_timeout_ms`, as an attempt begun after
    /// the request found. An older failure may predate freed space, and
    /// the retry it asked for may be about to succeed.
    pub fn disk_full_error(&self, st: &State, since: Instant, retry: u64) -> Option<Error> {
        let e = st.bg_error.as_ref()?;
        if st.bg_error_retry < retry || since.elapsed() <= Duration::from_millis(self.opts.pm_full_timeout_ms) {
            return None;
        }
        Some(match e {
            Error::DiskFull { path, op } => Error::DiskFull { path: path.clone(), op },
            other => Error::Pm(other.to_string()),
        })
    }

    /// The error for a writer stalled since `since` while a flush has been
    /// waiting for PM, once both have lasted `pm_full_timeout_ms`; at once
    /// if an earlier writer got it during the same wait of the flush (each
    /// writer waiting the whole timeout anew would leave a server that
    /// pipelines hundreds of writes answering nothing for hours).
    pub fn pm_full_error(&self, st: &mut State, since: Instant) -> Option<Error> {
        let timeout = Duration::from_millis(self.opts.pm_full_timeout_ms);
        let waiting = st.pm_wait_since?;
        let reported = st.pm_full_reported == Some(waiting);
        if !reported && (since.elapsed() < timeout || waiting.elapsed() < timeout) {
            return None;
        }
        st.pm_full_reported = Some(waiting);
        Some(Error::PmFull(format!(
            "writes waited {:?} for sealed memtables whose flush has waited {:?} for free PM slots ({} free); \
             nothing is freeing PM (long-lived iterators or snapshots pin flushed memtables?)",
            since.elapsed(),
            waiting.elapsed(),
            self.region.free_slots()
        )))
    }

    /// Runs `build`, retrying while it fails for lack of free PM slots
    /// (level 0's compactions free them). A device out of space (a full
    /// tmpfs under the region) is returned: the caller backs off and
    /// writers get the error after `pm_full_timeout_ms`, as for a full disk.
    ///
    /// While it waits, `State::pm_wait_since` tells writers stalled behind
    /// the unflushed memtables why, so they fail after `pm_full_timeout_ms`
    /// instead of waiting for ever (say, iterators pin every flushed
    /// memtable's log and the thread holding them writes).
    pub fn with_pm_space<T>(&self, mut build: impl FnMut() -> Result<T>) -> Result<T> {
        let mut waited = false;
        let result = loop {
            match build() {
                Err(Error::PmFull(_)) => {
                    waited = true;
                    let mut st = self.state.lock();
                    st.pm_wait_since.get_or_insert_with(Instant::now);
                    if let Err(e) = st.check(self.closing()) {
                        break Err(e);
                    }
                    self.notify(&mut st);
                    self.cv.wait_for(&mut st, Duration::from_millis(20));
                }
                other => break other,
            }
        };
        if waited {
            let mut st = self.state.lock();
            st.pm_wait_since = None;
            self.notify(&mut st);
        }
        result
    }

    /// Waits until `deadline` or shutdown. `cv` is notified by every flush,
    /// compaction and write stall, so one wait on it is no interval: the
    /// log sync waited that way and msynced many times a second, each
    /// msync write-protecting the pages the writer is filling (a TLB
    /// shootdown, then a fault and a re-dirtied page on its next copy).
    pub fn sleep_until(&self, deadline: Instant) {
        let mut st = self.state.lock();
        while Instant::now() < deadline && !self.closing() {
            self.cv.wait_until(&mut st, deadline);
        }
    }

    /// The state's change count, for a background thread about to look for
    /// work; None once the database refuses writes or is closing (the
    /// thread then stops).
    pub fn working_epoch(&self) -> Option<u64> {
        let st = self.state.lock();
        st.check(self.closing()).ok().map(|_| st.epoch)
    }

    /// Waits up to `timeout` for a change after `seen` (a thread that found
    /// no work since [`Engine::working_epoch`] gave it `seen`): at once if
    /// one came meanwhile. Returns false once the database refuses writes
    /// or is closing (checked under `state`, which shutdown holds while
    /// notifying).
    pub fn wait_for_change(&self, seen: u64, timeout: Duration) -> bool {
        let mut st = self.state.lock();
        if st.check(self.closing()).is_err() {
            return false;
        }
        if st.epoch == seen {
            self.cv.wait_for(&mut st, timeout);
        }
        true
    }

    /// Waits on `cv` for up to `timeout` (or a notification); `Err` if the
    /// database refuses writes or is closing.
    pub fn wait_a_while(&self, timeout: Duration) -> Result<()> {
        let mut st = self.state.lock();
        st.check(self.closing())?;
        self.cv.wait_for(&mut st, timeout);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use crate::db::tests_support::engine_of;
    use crate::error::Error;
    use crate::{Db, Options};

    #[test]
    fn the_log_sync_interval_is_not_cut_short_by_other_background_events() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::for_tests()).unwrap();
        let eng = engine_of(&db);
        let start = Instant::now();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| eng.sleep_until(start + Duration::from_millis(300)));
            while !waiter.is_finished() && start.elapsed() < Duration::from_secs(5) {
                eng.cv.notify_all();
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        assert!(start.elapsed() >= Duration::from_millis(300), "woke after {:?}", start.elapsed());
    }

    /// A writer stalled behind memtables whose flush cannot get PM fails
    /// once both have waited `pm_full_timeout_ms`, instead of waiting for
    /// ever (seen as a hang of `limits::full_pm_region_*_matrix_l0` when the
    /// memtables filled up before a log extent ran out).
    #[test]
    fn a_writer_stalled_behind_a_flush_waiting_for_pm_gets_pm_full() {
        let dir = tempfile::tempdir().unwrap();
        let mut o = Options::for_tests();
        o.pm_full_timeout_ms = 50;
        let db = Db::open(dir.path(), o).unwrap();
        let eng = engine_of(&db);
        let long_ago = Instant::now() - Duration::from_secs(1);
        let mut st = eng.state.lock();
        assert!(eng.pm_full_error(&mut st, long_ago).is_none(), "no flush is waiting for PM");
        st.pm_wait_since = Some(Instant::now());
        assert!(eng.pm_full_error(&mut st, long_ago).is_none(), "the flush has not waited long enough");
        st.pm_wait_since = Some(long_ago);
        assert!(eng.pm_full_error(&mut st, Instant::now()).is_none(), "the writer has not waited long enough");
        assert!(matches!(eng.pm_full_error(&mut st, long_ago), Some(Error::PmFull(_))));
        // Later writers stalled during the same wait of the flush get it at once.
        assert!(matches!(eng.pm_full_error(&mut st, Instant::now()), Some(Error::PmFull(_))));
        // A new wait (the flush got PM, then waits again) starts over.
        st.pm_wait_since = Some(Instant::now());
        assert!(eng.pm_full_error(&mut st, Instant::now()).is_none(), "a new wait of the flush starts over");
    }
}
