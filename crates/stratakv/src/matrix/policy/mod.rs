//! The matrix's policy, as pure functions of its state: when a
//! column-compaction round starts and how fast writers may go meanwhile
//! (here), where a column is cut ([`mod@column`]), which receiver rows merge
//! ([`merge`]), and when sorted runs merge into L1 ([`runs`]).

pub(crate) mod column;
pub(crate) mod merge;
pub(crate) mod runs;

use std::time::Instant;

/// Percent of the matrix budget at which a column-compaction round starts.
/// A round frees PM only when it ends (a log extent holds keys from the
/// whole key space), so writers run fast after a round and slow near its
/// end. Starting rounds early keeps the compactor busy instead of idle
/// while writers refill PM, and keeps that sawtooth shallow. Each round
/// writes one sorted run, so smaller rounds mean more runs per L1 merge
/// (`max_runs` is sized for this). Measured (4.2M x 1 KiB fillrandom,
/// alternating runs): 40% with pacing from 40% and 6 runs gave a median
/// lowest second of 0.67 (data dir) and 0.79 (/dev/shm), against 0.61 and
/// 0.59 for 60% with pacing from 70% and 4 runs, at the same throughput and
/// write amplification.
pub(crate) const ROUND_PERCENT: u64 = 40;

/// Percent of the matrix budget above which writers are paced: from where
/// rounds start, so the pace is set for the whole round rather than for
/// its last part only.
pub(crate) const THROTTLE_PERCENT: u64 = 40;

/// Whether a column-compaction round should start: the matrix holds rows
/// and `force` (compact_range), or its PM reached `ROUND_PERCENT` of
/// `limit`, or the region is short of free slots (under a quarter).
pub(crate) fn round_due(rows: usize, pm_bytes: u64, limit: u64, free_slots: u64, slots: u64, force: bool) -> bool {
    if rows == 0 {
        return false;
    }
    let low_pm = free_slots * 4 < slots;
    force || pm_bytes >= limit / 100 * ROUND_PERCENT || low_pm
}

/// The write rate (bytes per second; 0 = unlimited) that fits what is left
/// of the matrix budget `limit` (with `used` held) into the `secs_left` the
/// running round still needs to free PM: writers slow down smoothly
/// instead of stopping when the matrix is full. Unlimited below
/// `THROTTLE_PERCENT`, never below 1 MiB/s (the hard stop at the limit
/// still holds).
pub(crate) fn throttle_rate(used: u64, limit: u64, secs_left: f64) -> u64 {
    let soft = limit / 100 * THROTTLE_PERCENT;
    if used < soft {
        return 0;
    }
    let free = limit.saturating_sub(used) as f64;
    (free / secs_left.max(0.05)).max((1 << 20) as f64) as u64
}

/// Target bytes of L1 under a matrix of `limit` bytes: a big L0 makes a big
/// L1, so the tree needs fewer levels. With runs, L1 takes `max_runs`
/// rounds at a time, so it is that much bigger again.
pub(crate) fn l1_base_bytes(limit: u64, max_runs: usize) -> u64 {
    limit.saturating_mul(max_runs.max(1) as u64)
}

/// The timing of compaction rounds, to estimate when the running one
/// frees its PM (not persisted).
#[derive(Clone, Debug, Default)]
pub(crate) struct RoundClock {
    /// When the current round started.
    started: Option<Instant>,
    /// Compactor data bytes when it started.
    total: u64,
    /// Length of the last finished round, in seconds (0 = none yet).
    last_secs: f64,
}

impl RoundClock {
    /// A round of `total` compactor bytes starts now.
    pub fn begin(&mut self, total: u64) {
        self.started = Some(Instant::now());
        self.total = total;
    }

    /// The round has ended (no compactor data is left).
    pub fn end(&mut self) {
        if let Some(t) = self.started.take() {
            self.last_secs = t.elapsed().as_secs_f64();
        }
    }

    /// Estimated seconds until the current round (or, if none runs, a whole
    /// round) finishes, with `left` compactor bytes still to compact: from
    /// its progress so far or the last round's length.
    pub fn seconds_left(&self, left: u64) -> f64 {
        let fallback = if self.last_secs > 0.0 { self.last_secs } else { 2.0 };
        match self.started {
            Some(t) if self.total > 0 => {
                let done = 1.0 - left as f64 / self.total as f64;
                let elapsed = t.elapsed().as_secs_f64();
                if done > 0.05 {
                    elapsed * (1.0 - done) / done
                } else {
                    (fallback - elapsed).max(fallback * 0.5)
                }
            }
            _ => fallback,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_start_at_their_share_of_the_budget_or_when_pm_runs_low() {
        let limit = 1000;
        assert!(!round_due(0, 999, limit, 0, 100, true), "no rows, nothing to compact");
        assert!(!round_due(3, 399, limit, 100, 100, false));
        assert!(round_due(3, 400, limit, 100, 100, false));
        assert!(round_due(3, 0, limit, 24, 100, false), "under a quarter of the slots free");
        assert!(!round_due(3, 0, limit, 25, 100, false));
        assert!(round_due(1, 0, limit, 100, 100, true), "forced");
    }

    #[test]
    fn writers_are_paced_to_what_fits_until_the_round_ends() {
        let limit = 100 << 20;
        assert_eq!(throttle_rate(39 << 20, limit, 1.0), 0);
        // 60 MiB left, 2 s to go: 30 MiB/s.
        assert_eq!(throttle_rate(40 << 20, limit, 2.0), 30 << 20);
        // Never below 1 MiB/s, and a round about to end counts as 50 ms.
        assert_eq!(throttle_rate(limit, limit, 2.0), 1 << 20);
        assert_eq!(throttle_rate(90 << 20, limit, 0.0), (10 << 20) * 20);
    }

    #[test]
    fn the_clock_estimates_from_progress_then_from_the_last_round() {
        let mut c = RoundClock::default();
        assert_eq!(c.seconds_left(0), 2.0, "no round yet: a guess");
        c.begin(1000);
        // Nothing done yet: about the fallback.
        let s = c.seconds_left(1000);
        assert!((1.0..=2.0).contains(&s), "{s}");
        c.end();
        assert!(c.last_secs >= 0.0 && c.started.is_none());
    }
}
