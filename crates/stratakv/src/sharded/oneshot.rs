//! Completions: a worker fills a slot once; the caller blocks on it (sync
//! API) or awaits it (async API). Hand-written so the engine needs no
//! async runtime: a mutex-guarded value, a condvar for blocking waiters and
//! a `Waker` for futures.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};

struct State<T> {
    value: Option<T>,
    waker: Option<Waker>,
    /// The value was taken by the waiter.
    taken: bool,
}

/// One value passed once from a worker to a caller.
pub(crate) struct Slot<T> {
    state: Mutex<State<T>>,
    cv: Condvar,
    /// Set after the value is stored: a waiter polls it (yielding) for a
    /// short while before it parks, since a worker usually answers within
    /// one batch and parking costs two system calls and two switches.
    ready: AtomicBool,
}

impl<T> Slot<T> {
    pub(crate) fn new() -> Arc<Slot<T>> {
        Arc::new(Slot {
            state: Mutex::new(State { value: None, waker: None, taken: false }),
            cv: Condvar::new(),
            ready: AtomicBool::new(false),
        })
    }

    /// Stores the value and wakes whoever waits (a later fill is ignored).
    pub(crate) fn fill(&self, v: T) {
        let waker = {
            let mut s = self.state.lock();
            if s.value.is_some() || s.taken {
                return;
            }
            s.value = Some(v);
            self.ready.store(true, Ordering::Release);
            s.waker.take()
        };
        self.cv.notify_all();
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// Yields a blocking waiter makes before it parks.
const SPINS: usize = 64;

/// The caller's side of a request: [`Completion::wait`] blocks, `.await` does not.
#[must_use = "a completion does nothing unless waited for or awaited"]
pub struct Completion<T> {
    slot: Arc<Slot<Result<T>>>,
    /// Poll before parking (not for requests that wait for an fsync).
    spin: bool,
}

impl<T> std::fmt::Debug for Completion<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Completion")
    }
}

impl<T> Completion<T> {
    pub(crate) fn new(slot: Arc<Slot<Result<T>>>) -> Completion<T> {
        Completion { slot, spin: true }
    }

    /// The same completion, whose waiter parks at once: a `sync` write
    /// waits for an msync or fdatasync (hundreds of microseconds), and
    /// polling that long burns the CPU other callers need.
    pub(crate) fn parking(mut self) -> Completion<T> {
        self.spin = false;
        self
    }

    /// A completion that is already done.
    pub(crate) fn ready(v: Result<T>) -> Completion<T> {
        let slot = Slot::new();
        slot.fill(v);
        Completion { slot, spin: false }
    }

    /// The result if the request is done, without waiting.
    pub(crate) fn try_take(&mut self) -> Option<Result<T>> {
        let mut s = self.slot.state.lock();
        let v = s.value.take()?;
        s.taken = true;
        Some(v)
    }

    /// Blocks until the request is done.
    pub fn wait(self) -> Result<T> {
        for _ in 0..if self.spin { SPINS } else { 0 } {
            if self.slot.ready.load(Ordering::Acquire) {
                break;
            }
            std::thread::yield_now();
        }
        let mut s = self.slot.state.lock();
        loop {
            if let Some(v) = s.value.take() {
                s.taken = true;
                return v;
            }
            self.slot.cv.wait(&mut s);
        }
    }
}

impl<T> Future for Completion<T> {
    type Output = Result<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T>> {
        let mut s = self.slot.state.lock();
        if let Some(v) = s.value.take() {
            s.taken = true;
            return Poll::Ready(v);
        }
        if s.taken {
            return Poll::Ready(Err(Error::InvalidArgument("completion polled after it finished".into())));
        }
        s.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// A write split over several shards: done when every part is, with the
/// first error any part met.
pub(crate) struct WriteJoin {
    left: AtomicUsize,
    error: Mutex<Option<Error>>,
    slot: Arc<Slot<Result<()>>>,
}

impl WriteJoin {
    pub(crate) fn new(parts: usize) -> (Arc<WriteJoin>, Completion<()>) {
        let slot = Slot::new();
        let j = Arc::new(WriteJoin { left: AtomicUsize::new(parts), error: Mutex::new(None), slot: slot.clone() });
        (j, Completion::new(slot))
    }

    /// One part is applied (or failed); the last one completes the caller.
    pub(crate) fn part_done(&self, r: Result<()>) {
        if let Err(e) = r {
            self.error.lock().get_or_insert(e);
        }
        // AcqRel: the last part sees every other part's error.
        if self.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            let r = match self.error.lock().take() {
                Some(e) => Err(e),
                None => Ok(()),
            };
            self.slot.fill(r);
        }
    }
}

/// The values of a multi-get, in the caller's key order.
pub(crate) type Values = Vec<Option<Vec<u8>>>;

/// Values of keys spread over several shards, put back in the caller's order.
pub(crate) struct GetJoin {
    left: AtomicUsize,
    state: Mutex<(Values, Option<Error>)>,
    slot: Arc<Slot<Result<Values>>>,
}

impl GetJoin {
    pub(crate) fn new(parts: usize, keys: usize) -> (Arc<GetJoin>, Completion<Values>) {
        let slot = Slot::new();
        let j = Arc::new(GetJoin {
            left: AtomicUsize::new(parts),
            state: Mutex::new((vec![None; keys], None)),
            slot: slot.clone(),
        });
        (j, Completion::new(slot))
    }

    /// One shard's values, for the caller's positions `at`.
    pub(crate) fn part_done(&self, at: &[usize], r: Result<Values>) {
        {
            let mut s = self.state.lock();
            match r {
                Ok(vals) => {
                    for (&i, v) in at.iter().zip(vals) {
                        if let Some(slot) = s.0.get_mut(i) {
                            *slot = v;
                        }
                    }
                }
                Err(e) => {
                    s.1.get_or_insert(e);
                }
            }
        }
        if self.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            let mut s = self.state.lock();
            let r = match s.1.take() {
                Some(e) => Err(e),
                None => Ok(std::mem::take(&mut s.0)),
            };
            drop(s);
            self.slot.fill(r);
        }
    }
}

/// One value from each of several shards (their snapshots for a cut).
pub(crate) struct Gather<T> {
    left: AtomicUsize,
    state: Mutex<Vec<Option<T>>>,
    slot: Arc<Slot<Result<Vec<T>>>>,
}

impl<T> Gather<T> {
    pub(crate) fn new(parts: usize) -> (Arc<Gather<T>>, Completion<Vec<T>>) {
        let slot = Slot::new();
        let state = Mutex::new((0..parts).map(|_| None).collect());
        (Arc::new(Gather { left: AtomicUsize::new(parts), state, slot: slot.clone() }), Completion::new(slot))
    }

    /// Shard `idx`'s value; the last one completes the caller.
    pub(crate) fn part_done(&self, idx: usize, v: T) {
        if let Some(s) = self.state.lock().get_mut(idx) {
            *s = Some(v);
        }
        if self.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            let all: Option<Vec<T>> = std::mem::take(&mut *self.state.lock()).into_iter().collect();
            self.slot.fill(all.ok_or_else(|| Error::InvalidArgument("a shard answered twice".into())));
        }
    }
}

/// A copy of `e` for each of several requests one failed engine call served
/// (the error type holds an `io::Error`, which is not `Clone`).
pub(crate) fn dup_error(e: &Error) -> Error {
    match e {
        Error::Io { path, op, source } => {
            Error::Io { path: path.clone(), op, source: std::io::Error::new(source.kind(), source.to_string()) }
        }
        Error::Corruption { file, offset, reason } => {
            Error::Corruption { file: file.clone(), offset: *offset, reason: reason.clone() }
        }
        Error::InvalidArgument(s) => Error::InvalidArgument(s.clone()),
        Error::PmFull(s) => Error::PmFull(s.clone()),
        Error::DiskFull { path, op } => Error::DiskFull { path: path.clone(), op },
        Error::Locked { path } => Error::Locked { path: path.clone() },
        Error::Poisoned(s) => Error::Poisoned(s.clone()),
        Error::Closed => Error::Closed,
        Error::Pm(s) => Error::Pm(s.clone()),
        Error::ShardCount { path, stored, requested } => {
            Error::ShardCount { path: path.clone(), stored: *stored, requested: *requested }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_join_completes_after_its_last_part_with_the_first_error() {
        let (j, c) = WriteJoin::new(2);
        j.part_done(Err(Error::Closed));
        assert!(c.slot.state.lock().value.is_none(), "one part left");
        j.part_done(Ok(()));
        assert!(matches!(c.wait(), Err(Error::Closed)));
    }

    #[test]
    fn a_get_join_puts_values_back_in_order() {
        let (j, c) = GetJoin::new(2, 3);
        j.part_done(&[2], Ok(vec![Some(b"c".to_vec())]));
        j.part_done(&[0, 1], Ok(vec![None, Some(b"b".to_vec())]));
        assert_eq!(c.wait().unwrap(), vec![None, Some(b"b".to_vec()), Some(b"c".to_vec())]);
    }

    #[test]
    fn a_future_is_woken_by_the_fill() {
        use std::task::Wake;
        struct Flag(std::sync::atomic::AtomicBool);
        impl Wake for Flag {
            fn wake(self: Arc<Self>) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let flag = Arc::new(Flag(false.into()));
        let waker = Waker::from(flag.clone());
        let slot = Slot::new();
        let mut c = Completion::<u32>::new(slot.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(Pin::new(&mut c).poll(&mut cx).is_pending());
        slot.fill(Ok(7));
        assert!(flag.0.load(Ordering::SeqCst));
        assert!(matches!(Pin::new(&mut c).poll(&mut cx), Poll::Ready(Ok(7))));
    }
}
