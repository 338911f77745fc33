//! A simulated PM device that records every store, cache-line flush and
//! fence, and can produce the images a power failure could leave behind.
//!
//! Model (x86 with ADR, as in Yat/pmreorder): a store sits in the CPU cache
//! until its line is written back. `flush(range)` (clwb) captures the lines'
//! current content; a later `fence` makes captured stores durable. Any
//! store that is not yet durable *may* also have reached PM on its own
//! (cache eviction), in one of two ways chosen by [`CrashModel`]:
//!
//! * `LinePrefix`: each dirty line independently keeps a prefix of its
//!   pending stores, in program order (stores to one line reach PM in order).
//! * `WordSubset`: each 8-byte word independently keeps a prefix of the
//!   stores that touched it, the conservative 8-byte failure-atomicity model.
//!
//! A device made with [`SimPm::new_file`] models an ordinary file mapped
//! shared instead: cache-line flushes and fences make nothing durable, only
//! `sync` (msync) does, for whole pages; so the region opens with
//! file placement and the engine must msync whatever it relies on.

use std::collections::BTreeMap;

use parking_lot::Mutex;
use rand::Rng;

use crate::flush::CACHE_LINE;
use crate::map::HeapBuf;

/// How unflushed stores may survive a simulated crash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashModel {
    /// Each dirty cache line keeps a prefix of its pending stores.
    LinePrefix,
    /// Each dirty 8-byte word keeps a prefix of its pending stores.
    WordSubset,
}

#[derive(Clone, Debug)]
struct PendingStore {
    off: u64,
    data: Vec<u8>,
    flushed: bool,
}

struct SimState {
    persisted: Vec<u8>,
    /// Pending (not yet durable) stores per cache line, in program order.
    pending: BTreeMap<u64, Vec<PendingStore>>,
    /// Lines that have at least one flushed-but-unfenced store.
    flushed_lines: Vec<u64>,
    events: u64,
    observer: Option<Observer>,
}

/// Called after every simulated PM event with the event number and a view
/// from which a crash state can be taken.
pub type Observer = Box<dyn FnMut(u64, &SimView<'_>) + Send>;

/// A read-only view of the simulator handed to an [`Observer`].
pub struct SimView<'a> {
    state: &'a SimState,
}

impl SimView<'_> {
    /// The crash state at this instant: what is durable plus what may be.
    pub fn crash_state(&self) -> CrashState {
        self.state.crash_state()
    }

    /// Number of cache lines with stores that are not yet durable.
    pub fn dirty_lines(&self) -> usize {
        self.state.pending.len()
    }
}

/// A device held still: no store, flush or fence runs on it while this
/// lives, so the crash states of several devices (and of a file system)
/// taken while all are held belong to one instant.
pub struct SimHold<'a> {
    state: parking_lot::MutexGuard<'a, SimState>,
}

impl SimHold<'_> {
    /// The crash state of the held device.
    pub fn crash_state(&self) -> CrashState {
        self.state.crash_state()
    }

    /// Number of cache lines with stores that are not yet durable.
    pub fn dirty_lines(&self) -> usize {
        self.state.pending.len()
    }

    /// What a clean shutdown would leave (see [`SimPm::visible_image`]).
    pub fn visible_image(&self) -> Vec<u8> {
        self.state.visible_image()
    }
}

/// A simulated PM device. Create one, hand it to [`crate::Region::open`]
/// through [`crate::Backing::Sim`], run a workload, then take crash images.
pub struct SimPm {
    buf: HeapBuf,
    state: Mutex<SimState>,
    /// Ordinary-file semantics: only `sync` makes stores durable.
    file_like: bool,
    /// Every `sync` fails with EIO (and makes nothing durable).
    fail_syncs: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for SimPm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimPm").field("len", &self.buf.len()).finish()
    }
}

impl SimPm {
    /// A zero-filled device of `len` bytes (rounded up to 8).
    pub fn new(len: usize) -> SimPm {
        Self::from_image(vec![0; len])
    }

    /// A device whose durable and visible content is `image` (a crash image).
    pub fn from_image(image: Vec<u8>) -> SimPm {
        Self::build(image, false)
    }

    /// A zero-filled simulated ordinary file of `len` bytes: only
    /// [`crate::Region::sync`] (msync) makes its stores durable.
    pub fn new_file(len: usize) -> SimPm {
        Self::build(vec![0; len], true)
    }

    /// A simulated ordinary file whose durable and visible content is `image`.
    pub fn file_from_image(image: Vec<u8>) -> SimPm {
        Self::build(image, true)
    }

    /// Whether this device models an ordinary file (see [`SimPm::new_file`]).
    pub fn is_file_like(&self) -> bool {
        self.file_like
    }

    /// Makes every later msync of a file-like device fail with EIO (or
    /// succeed again), as a failing disk does.
    pub fn fail_syncs(&self, fail: bool) {
        self.fail_syncs.store(fail, std::sync::atomic::Ordering::SeqCst);
    }

    fn build(image: Vec<u8>, file_like: bool) -> SimPm {
        let buf = HeapBuf::from_bytes(&image);
        SimPm {
            file_like,
            fail_syncs: std::sync::atomic::AtomicBool::new(false),
            buf,
            state: Mutex::new(SimState {
                persisted: image,
                pending: BTreeMap::new(),
                flushed_lines: Vec::new(),
                events: 0,
                observer: None,
            }),
        }
    }

    /// Device size in bytes.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether the device has no bytes.
    pub fn is_empty(&self) -> bool {
        self.buf.len() == 0
    }

    /// Installs (or removes) the per-event observer.
    pub fn set_observer(&self, observer: Option<Observer>) {
        self.state.lock().observer = observer;
    }

    /// Number of events (stores, flushes, fences) recorded so far.
    pub fn events(&self) -> u64 {
        self.state.lock().events
    }

    /// The crash state now.
    pub fn crash_state(&self) -> CrashState {
        self.state.lock().crash_state()
    }

    /// Holds the device still, waiting for an event in progress.
    pub fn hold(&self) -> SimHold<'_> {
        SimHold { state: self.state.lock() }
    }

    /// Holds the device still, unless an event or another holder has it
    /// now (also from this device's own observer, which runs with it held).
    pub fn try_hold(&self) -> Option<SimHold<'_>> {
        self.state.try_lock().map(|state| SimHold { state })
    }

    /// What a clean shutdown would leave: every store, durable or not.
    pub fn visible_image(&self) -> Vec<u8> {
        self.state.lock().visible_image()
    }

    pub(crate) fn buf(&self) -> &HeapBuf {
        &self.buf
    }

    /// Runs `write` (which stores `data` at `off` into the visible buffer)
    /// and records the store, both under the simulator lock so recorded
    /// order equals visible order.
    pub(crate) fn store(&self, off: u64, data: &[u8], write: impl FnOnce()) {
        let mut st = self.state.lock();
        write();
        let mut pos = 0usize;
        while pos < data.len() {
            let o = off + pos as u64;
            let line = o / CACHE_LINE;
            let room = (CACHE_LINE - o % CACHE_LINE) as usize;
            let n = room.min(data.len() - pos);
            st.pending.entry(line).or_default().push(PendingStore {
                off: o,
                data: data[pos..pos + n].to_vec(),
                flushed: false,
            });
            pos += n;
        }
        st.event();
    }

    pub(crate) fn flush(&self, off: u64, len: u64) {
        if len == 0 {
            return;
        }
        let mut st = self.state.lock();
        if self.file_like {
            // clwb on a page-cache page makes nothing durable.
            st.event();
            return;
        }
        let first = off / CACHE_LINE;
        let last = (off + len - 1) / CACHE_LINE;
        let lines: Vec<u64> = st.pending.range(first..=last).map(|(l, _)| *l).collect();
        for line in lines {
            if let Some(stores) = st.pending.get_mut(&line) {
                for s in stores.iter_mut() {
                    s.flushed = true;
                }
                st.flushed_lines.push(line);
            }
        }
        st.event();
    }

    pub(crate) fn fence(&self) {
        let mut st = self.state.lock();
        if self.file_like {
            st.event();
            return;
        }
        let lines = std::mem::take(&mut st.flushed_lines);
        for line in lines {
            let Some(mut stores) = st.pending.remove(&line) else { continue };
            // Flushed stores always form a prefix: a flush captures every
            // store made to the line before it.
            let keep = stores.iter().position(|s| !s.flushed).unwrap_or(stores.len());
            let rest = stores.split_off(keep);
            for s in &stores {
                apply(&mut st.persisted, s);
            }
            if !rest.is_empty() {
                st.pending.insert(line, rest);
            }
        }
        st.event();
    }

    /// msync: every store to a page overlapping `[off, off+len)` becomes
    /// durable (the kernel writes whole pages back).
    pub(crate) fn sync(&self, off: u64, len: u64) -> std::io::Result<()> {
        if self.fail_syncs.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(std::io::Error::from_raw_os_error(5));
        }
        if len == 0 {
            return Ok(());
        }
        let mut st = self.state.lock();
        let start = off - off % PAGE;
        let end = (off + len).div_ceil(PAGE) * PAGE;
        let lines: Vec<u64> = st.pending.range(start / CACHE_LINE..end / CACHE_LINE).map(|(l, _)| *l).collect();
        for line in lines {
            if let Some(stores) = st.pending.remove(&line) {
                for s in &stores {
                    apply(&mut st.persisted, s);
                }
            }
        }
        st.flushed_lines.retain(|l| !(start / CACHE_LINE..end / CACHE_LINE).contains(l));
        st.event();
        Ok(())
    }
}

/// The page size msync works in.
const PAGE: u64 = 4096;

impl SimState {
    fn event(&mut self) {
        self.events += 1;
        if let Some(mut obs) = self.observer.take() {
            let n = self.events;
            obs(n, &SimView { state: self });
            self.observer = Some(obs);
        }
    }

    fn visible_image(&self) -> Vec<u8> {
        let mut img = self.persisted.clone();
        for stores in self.pending.values() {
            for s in stores {
                apply(&mut img, s);
            }
        }
        img
    }

    fn crash_state(&self) -> CrashState {
        CrashState {
            persisted: self.persisted.clone(),
            pending: self.pending.iter().map(|(l, s)| (*l, s.clone())).collect(),
        }
    }
}

fn apply(img: &mut [u8], s: &PendingStore) {
    let start = s.off as usize;
    if let Some(dst) = img.get_mut(start..start + s.data.len()) {
        dst.copy_from_slice(&s.data);
    }
}

/// What PM holds at a crash: the durable bytes, plus stores that may or may
/// not have reached PM.
#[derive(Clone, Debug)]
pub struct CrashState {
    persisted: Vec<u8>,
    pending: Vec<(u64, Vec<PendingStore>)>,
}

impl CrashState {
    /// Number of cache lines whose fate is uncertain.
    pub fn dirty_lines(&self) -> usize {
        self.pending.len()
    }

    /// Number of distinct images under `model`, saturating at `u64::MAX`.
    pub fn image_count(&self, model: CrashModel) -> u64 {
        let mut n: u64 = 1;
        for (_, choices) in self.choice_sizes(model) {
            n = n.saturating_mul(choices);
        }
        n
    }

    /// Per uncertain unit (line or word) the number of choices it has.
    fn choice_sizes(&self, model: CrashModel) -> Vec<(u64, u64)> {
        match model {
            CrashModel::LinePrefix => self.pending.iter().map(|(l, s)| (*l, s.len() as u64 + 1)).collect(),
            CrashModel::WordSubset => {
                let mut words: BTreeMap<u64, u64> = BTreeMap::new();
                for (_, stores) in &self.pending {
                    for s in stores {
                        let first = s.off / 8;
                        let last = (s.off + s.data.len() as u64 - 1) / 8;
                        for w in first..=last {
                            *words.entry(w).or_insert(1) += 1;
                        }
                    }
                }
                words.into_iter().collect()
            }
        }
    }

    /// The image in which nothing uncertain survived.
    pub fn minimal_image(&self) -> Vec<u8> {
        self.persisted.clone()
    }

    /// The image in which everything survived.
    pub fn maximal_image(&self) -> Vec<u8> {
        let mut img = self.persisted.clone();
        for (_, stores) in &self.pending {
            for s in stores {
                apply(&mut img, s);
            }
        }
        img
    }

    /// Image number `index` (in `0..image_count`) under `model`: a mixed-radix
    /// choice of how many pending stores each unit keeps.
    pub fn image(&self, model: CrashModel, mut index: u64) -> Vec<u8> {
        let sizes = self.choice_sizes(model);
        let mut keep: BTreeMap<u64, u64> = BTreeMap::new();
        for (unit, n) in &sizes {
            keep.insert(*unit, index % n);
            index /= n;
        }
        self.build(model, &keep)
    }

    /// A uniformly random image under `model`.
    pub fn random_image(&self, model: CrashModel, rng: &mut impl Rng) -> Vec<u8> {
        let keep: BTreeMap<u64, u64> =
            self.choice_sizes(model).into_iter().map(|(u, n)| (u, rng.gen_range(0..n))).collect();
        self.build(model, &keep)
    }

    fn build(&self, model: CrashModel, keep: &BTreeMap<u64, u64>) -> Vec<u8> {
        let mut img = self.persisted.clone();
        match model {
            CrashModel::LinePrefix => {
                for (line, stores) in &self.pending {
                    let k = keep.get(line).copied().unwrap_or(0) as usize;
                    for s in stores.iter().take(k) {
                        apply(&mut img, s);
                    }
                }
            }
            CrashModel::WordSubset => {
                // Count, per word, how many of the stores touching it to keep,
                // then replay stores word by word in program order.
                let mut seen: BTreeMap<u64, u64> = BTreeMap::new();
                for (_, stores) in &self.pending {
                    for s in stores {
                        for (i, b) in s.data.iter().enumerate() {
                            let o = s.off + i as u64;
                            let w = o / 8;
                            let order = *seen.get(&w).unwrap_or(&0);
                            if order < keep.get(&w).copied().unwrap_or(0) {
                                if let Some(slot) = img.get_mut(o as usize) {
                                    *slot = *b;
                                }
                            }
                            // Count a store once per word: at its last byte in that word.
                            let last_in_word = i + 1 == s.data.len() || (o + 1).is_multiple_of(8);
                            if last_in_word {
                                *seen.entry(w).or_insert(0) += 1;
                            }
                        }
                    }
                }
            }
        }
        img
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sim_write(sim: &SimPm, off: u64, data: &[u8]) {
        sim.store(off, data, || sim.buf().write(off as usize, data));
    }

    #[test]
    fn unflushed_store_may_or_may_not_survive() {
        let sim = SimPm::new(4096);
        sim_write(&sim, 0, &[1; 8]);
        let cs = sim.crash_state();
        assert_eq!(cs.image_count(CrashModel::LinePrefix), 2);
        assert_eq!(cs.image(CrashModel::LinePrefix, 0)[0], 0);
        assert_eq!(cs.image(CrashModel::LinePrefix, 1)[0], 1);
    }

    #[test]
    fn flush_without_fence_is_not_durable_but_flush_fence_is() {
        let sim = SimPm::new(4096);
        sim_write(&sim, 64, &[7; 8]);
        sim.flush(64, 8);
        assert_eq!(sim.crash_state().minimal_image()[64], 0);
        sim.fence();
        let cs = sim.crash_state();
        assert_eq!(cs.minimal_image()[64], 7);
        assert_eq!(cs.dirty_lines(), 0);
    }

    #[test]
    fn stores_after_flush_stay_pending() {
        let sim = SimPm::new(4096);
        sim_write(&sim, 0, &[1; 8]);
        sim.flush(0, 8);
        sim_write(&sim, 8, &[2; 8]);
        sim.fence();
        let cs = sim.crash_state();
        assert_eq!(cs.minimal_image()[0], 1);
        assert_eq!(cs.minimal_image()[8], 0);
        assert_eq!(cs.maximal_image()[8], 2);
    }

    #[test]
    fn line_prefix_keeps_program_order_within_a_line() {
        let sim = SimPm::new(4096);
        sim_write(&sim, 0, &[1; 8]); // payload
        sim_write(&sim, 8, &[9; 8]); // "commit" in the same line, no flush between
        let cs = sim.crash_state();
        // 3 images: none, first only, both; never the commit without the payload.
        assert_eq!(cs.image_count(CrashModel::LinePrefix), 3);
        for i in 0..3 {
            let img = cs.image(CrashModel::LinePrefix, i);
            assert!(!(img[8] == 9 && img[0] != 1));
        }
        // Word-subset allows the commit word alone.
        let ws = (0..cs.image_count(CrashModel::WordSubset))
            .map(|i| cs.image(CrashModel::WordSubset, i))
            .any(|img| img[8] == 9 && img[0] == 0);
        assert!(ws);
    }

    #[test]
    fn observer_sees_every_event() {
        let sim = SimPm::new(4096);
        let count = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let c = count.clone();
        sim.set_observer(Some(Box::new(move |_, _| {
            c.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        })));
        sim_write(&sim, 0, &[1; 8]);
        sim.flush(0, 8);
        sim.fence();
        assert_eq!(count.load(std::sync::atomic::Ordering::Relaxed), 3);
        assert_eq!(sim.events(), 3);
    }
}
