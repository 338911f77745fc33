//! Per-command counters for INFO commandstats and errorstats: calls, time
//! spent, calls refused before they ran (arity, auth) and calls that
//! answered with an error, as Redis 7 counts them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

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
    /// Error replies by their first word (`ERR`, `WRONGTYPE`, ...); errors
    /// are rare, so a lock is fine here.
    errors: Mutex<HashMap<String, u64>>,
}

impl Default for CommandStats {
    fn default() -> Self {
        CommandStats {
            per: (0..super::table::count()).map(|_| Counters::default()).collect(),
            errors: Mutex::default(),
        }
    }
}

impl CommandStats {
    /// Counts a run of command `id` that took `usec` and answered `reply`.
    pub fn ran(&self, id: usize, usec: u64, reply: &Reply) {
        if let Some(c) = self.per.get(id) {
            c.calls.fetch_add(1, Ordering::Relaxed);
            c.usec.fetch_add(usec, Ordering::Relaxed);
            if let Reply::Error(e) = reply {
                c.failed.fetch_add(1, Ordering::Relaxed);
                self.error(e);
            }
        }
    }

    /// Counts command `id` (if it is known) refused before it ran with `reply`.
    pub fn rejected(&self, id: Option<usize>, reply: &Reply) {
        if let Some(c) = id.and_then(|i| self.per.get(i)) {
            c.rejected.fetch_add(1, Ordering::Relaxed);
        }
        if let Reply::Error(e) = reply {
            self.error(e);
        }
    }

    fn error(&self, text: &str) {
        let code = text.split(' ').next().unwrap_or("ERR");
        *self.errors.lock().entry(code.to_string()).or_insert(0) += 1;
    }

    /// Error replies sent since start (INFO stats `total_error_replies`).
    pub fn total_errors(&self) -> u64 {
        self.errors.lock().values().sum()
    }

    /// Zeroes everything (CONFIG RESETSTAT).
    pub fn reset(&self) {
        for c in &self.per {
            c.calls.store(0, Ordering::Relaxed);
            c.usec.store(0, Ordering::Relaxed);
            c.rejected.store(0, Ordering::Relaxed);
            c.failed.store(0, Ordering::Relaxed);
        }
        self.errors.lock().clear();
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
            let name = super::table::name_of(id).unwrap_or("unknown");
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

    /// INFO errorstats: one `errorstat_<code>` line per error code seen.
    pub fn errorstats(&self) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> =
            self.errors.lock().iter().map(|(k, n)| (format!("errorstat_{k}"), format!("count={n}"))).collect();
        v.sort();
        v
    }
}

/// Microseconds since `t`.
pub(crate) fn usec_since(t: std::time::Instant) -> u64 {
    u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX)
}
