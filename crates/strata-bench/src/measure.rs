//! Per-thread measurement (latency histogram, per-second timeline, counts)
//! and the merge of all threads of one benchmark, as db_bench's `Stats`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

/// Longest latency the histogram tracks exactly (larger values saturate): one hour.
const MAX_NANOS: u64 = 3_600_000_000_000;

#[expect(
    clippy::expect_used,
    reason = "constant bounds that hdrhistogram always accepts (1 <= low, high >= 2 * low, 3 digits)"
)]
fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_NANOS, 3).expect("valid histogram bounds")
}

/// When a thread's loop should stop: after a count, or after `--duration` seconds.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// Operations to do (ignored when `duration` is set).
    pub ops: u64,
    /// Run for this long instead.
    pub duration: Option<Duration>,
}

impl Budget {
    /// Whether a thread that has done `done` operations since `start` should stop.
    pub fn done(&self, done: u64, start: Instant) -> bool {
        match self.duration {
            Some(d) => start.elapsed() >= d,
            None => done >= self.ops,
        }
    }
}

/// What one thread measured.
pub struct Recorder {
    start: Instant,
    last: Instant,
    finish: Option<Instant>,
    hist: Histogram<u64>,
    timeline: Vec<u64>,
    /// Operations done.
    pub ops: u64,
    /// Bytes moved (db_bench's MB/s numerator).
    pub bytes: u64,
    /// Reads that found their key.
    pub found: u64,
    /// Named counters shown in the result message (e.g. reads/writes).
    pub counts: BTreeMap<&'static str, u64>,
    live: Arc<AtomicU64>,
}

impl Recorder {
    /// A recorder that also adds its operations to `live` (for interval reports).
    pub fn new(live: Arc<AtomicU64>) -> Recorder {
        let now = Instant::now();
        Recorder {
            start: now,
            last: now,
            finish: None,
            hist: new_histogram(),
            timeline: Vec::new(),
            ops: 0,
            bytes: 0,
            found: 0,
            counts: BTreeMap::new(),
            live,
        }
    }

    /// Restarts the clock (call right before the first operation).
    pub fn start(&mut self) {
        self.start = Instant::now();
        self.last = self.start;
    }

    /// When the clock started.
    pub fn started(&self) -> Instant {
        self.start
    }

    /// Records that `n` operations finished since the previous call: one
    /// latency sample (as db_bench's `FinishedOps`) and `n` in this second.
    pub fn finished(&mut self, n: u64) {
        let now = Instant::now();
        let nanos = u64::try_from(now.duration_since(self.last).as_nanos()).unwrap_or(u64::MAX);
        self.hist.saturating_record(nanos.max(1));
        self.last = now;
        let sec = usize::try_from(now.duration_since(self.start).as_secs()).unwrap_or(usize::MAX);
        if sec != usize::MAX {
            if self.timeline.len() <= sec {
                self.timeline.resize(sec + 1, 0);
            }
            if let Some(slot) = self.timeline.get_mut(sec) {
                *slot += n;
            }
        }
        self.ops += n;
        self.live.fetch_add(n, Ordering::Relaxed);
    }

    /// Adds to a named counter.
    pub fn count(&mut self, name: &'static str, n: u64) {
        *self.counts.entry(name).or_insert(0) += n;
    }

    /// Stops the clock.
    pub fn stop(&mut self) {
        self.finish = Some(Instant::now());
    }

    fn elapsed(&self) -> Duration {
        self.finish.unwrap_or_else(Instant::now).duration_since(self.start)
    }
}

/// All threads of one benchmark, merged.
pub struct Merged {
    /// Operations done by all threads.
    pub ops: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Reads that found their key.
    pub found: u64,
    /// Wall time from the first start to the last finish, seconds.
    pub elapsed_s: f64,
    /// Sum of each thread's own elapsed time, seconds (db_bench's micros/op numerator).
    pub thread_seconds: f64,
    /// Latency of each recorded operation (or batch), nanoseconds.
    pub hist: Histogram<u64>,
    /// Operations completed in each second.
    pub timeline: Vec<u64>,
    /// Named counters.
    pub counts: BTreeMap<&'static str, u64>,
}

impl Merged {
    /// Merges the given threads' recorders.
    pub fn from(recorders: &[Recorder]) -> Merged {
        let mut m = Merged {
            ops: 0,
            bytes: 0,
            found: 0,
            elapsed_s: 0.0,
            thread_seconds: 0.0,
            hist: new_histogram(),
            timeline: Vec::new(),
            counts: BTreeMap::new(),
        };
        let first = recorders.iter().map(|r| r.start).min();
        let last = recorders.iter().map(|r| r.finish.unwrap_or(r.last)).max();
        if let (Some(a), Some(b)) = (first, last) {
            m.elapsed_s = b.saturating_duration_since(a).as_secs_f64();
        }
        for r in recorders {
            m.ops += r.ops;
            m.bytes += r.bytes;
            m.found += r.found;
            m.thread_seconds += r.elapsed().as_secs_f64();
            // Same bounds on both sides, so adding cannot fail; ignore if it does.
            let _ = m.hist.add(&r.hist);
            if m.timeline.len() < r.timeline.len() {
                m.timeline.resize(r.timeline.len(), 0);
            }
            for (slot, v) in m.timeline.iter_mut().zip(&r.timeline) {
                *slot += v;
            }
            for (k, v) in &r.counts {
                *m.counts.entry(k).or_insert(0) += v;
            }
        }
        m
    }

    /// Aggregate operations per second over wall time.
    pub fn ops_per_sec(&self) -> f64 {
        if self.elapsed_s > 0.0 {
            self.ops as f64 / self.elapsed_s
        } else {
            0.0
        }
    }

    /// Microseconds per operation per thread (db_bench's definition).
    pub fn micros_per_op(&self) -> f64 {
        if self.ops > 0 {
            self.thread_seconds * 1e6 / self.ops as f64
        } else {
            0.0
        }
    }

    /// Latency at `q` (0..=100), microseconds.
    pub fn percentile_us(&self, q: f64) -> f64 {
        self.hist.value_at_percentile(q) as f64 / 1000.0
    }

    /// The latency curve for plots: (percentile, microseconds) at each of
    /// [`CURVE_PERCENTILES`] (100 is the largest latency); empty without samples.
    pub fn latency_curve(&self) -> Vec<(f64, f64)> {
        if self.hist.is_empty() {
            return Vec::new();
        }
        CURVE_PERCENTILES.iter().map(|&q| (q, self.percentile_us(q))).collect()
    }

    /// The timeline as a throughput series for plots: (end of the interval,
    /// seconds since the start; operations per second in it). Every interval
    /// is one second but the last, which ends at `elapsed_s` (at least 1 ms).
    pub fn throughput_series(&self) -> (Vec<f64>, Vec<f64>) {
        let n = self.timeline.len();
        let mut ends = Vec::with_capacity(n);
        let mut rates = Vec::with_capacity(n);
        for (i, &ops) in self.timeline.iter().enumerate() {
            let start = i as f64;
            let len = if i + 1 == n { (self.elapsed_s - start).clamp(0.001, 1.0) } else { 1.0 };
            ends.push(start + len);
            rates.push(ops as f64 / len);
        }
        (ends, rates)
    }
}

/// Percentiles of the latency curve in the JSON: dense in the tail, where
/// stalls show.
pub const CURVE_PERCENTILES: [f64; 14] =
    [1.0, 5.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99, 100.0];

/// The stall figure of a per-second timeline: (lowest second, median
/// second, lowest / median). Only full seconds count, so the last entry is
/// dropped; None with fewer than two full seconds.
pub fn stall_figure(timeline: &[u64]) -> Option<(u64, f64, f64)> {
    let full = timeline.get(..timeline.len().checked_sub(1)?)?;
    if full.len() < 2 {
        return None;
    }
    let mut sorted = full.to_vec();
    sorted.sort_unstable();
    let min = *sorted.first()?;
    let n = sorted.len();
    let median = if n % 2 == 1 {
        *sorted.get(n / 2)? as f64
    } else {
        (*sorted.get(n / 2 - 1)? + *sorted.get(n / 2)?) as f64 / 2.0
    };
    let ratio = if median > 0.0 { min as f64 / median } else { 0.0 };
    Some((min, median, ratio))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorder_counts_and_merges() {
        let live = Arc::new(AtomicU64::new(0));
        let mut a = Recorder::new(live.clone());
        let mut b = Recorder::new(live.clone());
        a.start();
        b.start();
        for _ in 0..10 {
            a.finished(1);
        }
        b.finished(5);
        a.count("reads", 3);
        b.count("reads", 4);
        a.stop();
        b.stop();
        let m = Merged::from(&[a, b]);
        assert_eq!(m.ops, 15);
        assert_eq!(m.hist.len(), 11);
        assert_eq!(m.timeline.iter().sum::<u64>(), 15);
        assert_eq!(m.counts.get("reads"), Some(&7));
        assert_eq!(live.load(Ordering::Relaxed), 15);
    }

    #[test]
    fn stall_figure_uses_full_seconds() {
        assert_eq!(stall_figure(&[]), None);
        assert_eq!(stall_figure(&[100, 5]), None);
        let (min, median, ratio) = stall_figure(&[100, 50, 100, 120, 3]).unwrap();
        assert_eq!(min, 50);
        assert_eq!(median, 100.0);
        assert!((ratio - 0.5).abs() < 1e-12);
        let (_, median, _) = stall_figure(&[10, 20, 30, 40, 0]).unwrap();
        assert_eq!(median, 25.0);
        let (_, _, r) = stall_figure(&[0, 0, 0]).unwrap();
        assert_eq!(r, 0.0);
    }

    #[test]
    fn throughput_series_and_latency_curve() {
        let mut m = Merged::from(&[]);
        assert!(m.latency_curve().is_empty());
        assert_eq!(m.throughput_series(), (vec![], vec![]));
        m.timeline = vec![100, 80, 30];
        m.elapsed_s = 2.5;
        for v in 1..=1000u64 {
            m.hist.record(v * 1000).unwrap();
        }
        let (ends, rates) = m.throughput_series();
        assert_eq!(ends, vec![1.0, 2.0, 2.5]);
        assert_eq!(rates, vec![100.0, 80.0, 60.0]);
        let curve = m.latency_curve();
        assert_eq!(curve.len(), CURVE_PERCENTILES.len());
        assert!(curve.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1), "{curve:?}");
        let at = |q: f64| curve.iter().find(|p| p.0 == q).unwrap().1;
        assert!((at(50.0) - 500.0).abs() < 1.0, "{}", at(50.0));
        assert!((at(100.0) - 1000.0).abs() < 1.0, "{}", at(100.0));
    }

    #[test]
    fn budget_by_count() {
        let b = Budget { ops: 3, duration: None };
        let t = Instant::now();
        assert!(!b.done(2, t));
        assert!(b.done(3, t));
    }
}
