//! Per-command counters for INFO commandstats: calls, time spent, calls
//! refused before they ran (arity, auth) and calls that answered with an
//! error, as Redis 7 counts them. (Error replies by code, INFO
//! errorstats, are `ServerStats::count_error`'s.)

use std::sync::atomic::{AtomicU64, Ordering};

use crate::resp::Reply;

/// One command's counters.
#[derive(Default)]
struct Counters {
    calls: AtomicU64,
    usec: AtomicU64,
    rejected: AtomicU64,
    failed: AtomicU64,
}

/// Counters of every command in the table, indexed as the table is.
pub struct CommandStats {
    per: Vec<Counters>,
}

impl Default for CommandStats {
    fn default() -> Self {
        CommandStats { per: (0..super::commands().len()).map(|_| Counters::default()).collect() }
    }
}

impl CommandStats {
    /// Counts a run of command `id` that took `usec` and answered `reply`.
    pub fn ran(&self, id: usize, usec: u64, reply: &Reply) {
        if let Some(c) = self.per.get(id) {
            c.calls.fetch_add(1, Ordering::Relaxed);
            c.usec.fetch_add(usec, Ordering::Relaxed);
            if reply.is_error() {
                c.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Counts command `id` (if it is known) refused before it ran.
    pub fn rejected(&self, id: Option<usize>) {
        if let Some(c) = id.and_then(|i| self.per.get(i)) {
            c.rejected.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Zeroes everything (CONFIG RESETSTAT).
    pub fn reset(&self) {
        for c in &self.per {
            c.calls.store(0, Ordering::Relaxed);
            c.usec.store(0, Ordering::Relaxed);
            c.rejected.store(0, Ordering::Relaxed);
            c.failed.store(0, Ordering::Relaxed);
        }
    }

    /// INFO commandstats: one `cmdstat_<name>` line per command used.
    pub fn commandstats(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (id, c) in self.per.iter().enumerate() {
            let calls = c.calls.load(Ordering::Relaxed);
            let rejected = c.rejected.load(Ordering::Relaxed);
            if calls == 0 && rejected == 0 {
                continue;
            }
            let usec = c.usec.load(Ordering::Relaxed);
            let per_call = if calls == 0 { 0.0 } else { usec as f64 / calls as f64 };
            let name = super::command_name(id).unwrap_or("unknown");
            out.push((
                format!("cmdstat_{name}"),
                format!(
                    "calls={calls},usec={usec},usec_per_call={per_call:.2},rejected_calls={rejected},failed_calls={}",
                    c.failed.load(Ordering::Relaxed)
                ),
            ));
        }
        out
    }
}

/// Microseconds since `t`.
pub(crate) fn usec_since(t: std::time::Instant) -> u64 {
    u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX)
}
