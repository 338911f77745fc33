//! The machine's own latency floor (`--benchmarks=cpufloor`): back-to-back
//! units of pure CPU work, each as long as a mean operation, timed one by
//! one like operations are.
//!
//! A unit makes no system call and touches no memory beyond a counter, so
//! anything above its length is the platform's: timer ticks, interrupts, a
//! hypervisor descheduling the vCPU. Those pauses come at a rate per second,
//! not per operation, so the share of operations they hit grows with the
//! operation's length; an engine's p99.9 cannot go below this figure for
//! operations of that length on the same machine.

use std::time::{Duration, Instant};

/// Percentiles of the unit latencies, in microseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct Floor {
    /// The work each unit does.
    pub unit: Duration,
    /// Units timed.
    pub units: u64,
    /// Median unit latency.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile: what a put p99.9 of this length can reach at best here.
    pub p999_us: f64,
    /// 99.99th percentile.
    pub p9999_us: f64,
    /// The longest unit.
    pub max_us: f64,
    /// Units that took more than 10 µs beyond their work, per second.
    pub hiccups_per_sec: f64,
}

impl Floor {
    /// The result line (one line, `cpufloor : ...`; bench/compare parses it).
    pub fn line(&self) -> String {
        format!(
            "cpufloor     : unit {:.2} us, {} units: p50 {:.2} p99 {:.2} p99.9 {:.2} p99.99 {:.2} max {:.0} us; \
             {:.0} hiccups/s over 10 us",
            self.unit.as_nanos() as f64 / 1000.0,
            self.units,
            self.p50_us,
            self.p99_us,
            self.p999_us,
            self.p9999_us,
            self.max_us,
            self.hiccups_per_sec
        )
    }
}

/// Times back-to-back units of `unit` busy work for `duration`.
pub fn measure(unit: Duration, duration: Duration) -> Floor {
    let mut times: Vec<u64> = Vec::with_capacity((duration.as_nanos() / unit.as_nanos().max(1)) as usize + 16);
    let start = Instant::now();
    let end = start + duration;
    let mut spins = 0u64;
    loop {
        let t0 = Instant::now();
        if t0 >= end {
            break;
        }
        // The work: a spin until `unit` has passed (the clock read is the
        // only thing it touches, as an engine's operation reads the clock).
        while t0.elapsed() < unit {
            spins = std::hint::black_box(spins.wrapping_add(1));
        }
        times.push(t0.elapsed().as_nanos() as u64);
    }
    let elapsed = start.elapsed().as_secs_f64();
    let slack = unit.as_nanos() as u64 + 10_000;
    let hiccups = times.iter().filter(|&&t| t > slack).count() as f64;
    times.sort_unstable();
    let pct = |q: f64| -> f64 {
        if times.is_empty() {
            return 0.0;
        }
        let i = ((times.len() as f64 * q) as usize).min(times.len() - 1);
        times[i] as f64 / 1000.0
    };
    Floor {
        unit,
        units: times.len() as u64,
        p50_us: pct(0.5),
        p99_us: pct(0.99),
        p999_us: pct(0.999),
        p9999_us: pct(0.9999),
        max_us: times.last().map_or(0.0, |&t| t as f64 / 1000.0),
        hiccups_per_sec: hiccups / elapsed.max(1e-9),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit_lasts_at_least_its_work_and_percentiles_are_ordered() {
        let f = measure(Duration::from_micros(50), Duration::from_millis(200));
        assert!(f.units > 100 && f.units <= 4000, "{f:?}");
        assert!(f.p50_us >= 50.0, "a unit cannot be shorter than its work: {f:?}");
        assert!(f.p50_us <= f.p99_us && f.p99_us <= f.p999_us && f.p999_us <= f.p9999_us && f.p9999_us <= f.max_us);
        assert!(f.line().starts_with("cpufloor     : unit 50.00 us"), "{}", f.line());
    }
}
