//! The write throttle: a token bucket shared by all writers, whose rate
//! level 0 sets while it fills faster than it drains.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Write rate limit in bytes per second (0 = none), and the time the next
/// throttled write may go.
pub(crate) struct Throttle {
    rate: AtomicU64,
    next: Mutex<Instant>,
}

impl Default for Throttle {
    fn default() -> Throttle {
        Throttle { rate: AtomicU64::new(0), next: Mutex::new(Instant::now()) }
    }
}

impl Throttle {
    /// Sets the rate (bytes per second; 0 = unlimited).
    pub fn set_rate(&self, rate: u64) {
        self.rate.store(rate, Ordering::Relaxed);
    }

    /// Whether writers are being paced.
    pub fn active(&self) -> bool {
        self.rate.load(Ordering::Relaxed) != 0
    }

    /// Spreads writes out at the rate, if one is set: each write waits its
    /// own share, so delays are small and even (good tail latency) rather
    /// than rare long sleeps. Waits under a millisecond spin, since a sleep
    /// cannot be that short. Returns how long this write waited.
    ///
    /// They must not `yield` instead: under Linux's EEVDF scheduler every
    /// `sched_yield` pushes the caller's deadline back by a whole slice, so
    /// a writer yielding through a few microseconds while column compaction
    /// and a memtable seal keep both cores busy fell behind them by tens of
    /// milliseconds at a time (fills dropped to ~100 puts per 50 ms when a
    /// round began, and the lowest second of a fill to 0.2 of the median).
    #[inline]
    pub fn wait(&self, bytes: u64) -> Duration {
        let rate = self.rate.load(Ordering::Relaxed);
        if rate == 0 {
            return Duration::ZERO;
        }
        self.wait_at(rate, bytes)
    }

    /// [`Throttle::wait`] at a set `rate`.
    fn wait_at(&self, rate: u64, bytes: u64) -> Duration {
        let wait = {
            let mut next = self.next.lock();
            let now = Instant::now();
            if *next < now {
                *next = now;
            }
            *next += Duration::from_secs_f64(bytes as f64 / rate as f64);
            next.saturating_duration_since(now)
        };
        if wait.is_zero() {
            return wait;
        }
        if wait >= Duration::from_millis(1) {
            std::thread::sleep(wait);
        } else {
            let until = Instant::now() + wait;
            while Instant::now() < until {
                std::hint::spin_loop();
            }
        }
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The throttle holds writers to its rate also when each write's share
    /// is far below a millisecond (the spinning path), and when it is above
    /// (the sleeping path).
    #[test]
    fn throttled_writes_never_go_faster_than_the_rate() {
        let t = Throttle::default();
        for (rate, bytes, n) in [(100u64 << 20, 1000u64, 10_000u64), (1 << 20, 2 << 10, 20)] {
            t.set_rate(rate);
            let start = Instant::now();
            for _ in 0..n {
                t.wait(bytes);
            }
            let least = Duration::from_secs_f64((n * bytes) as f64 / rate as f64);
            assert!(start.elapsed() >= least.mul_f64(0.95), "{n} x {bytes} B at {rate} B/s took {:?}", start.elapsed());
        }
        t.set_rate(0);
    }
}
