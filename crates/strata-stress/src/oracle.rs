//! What a recovered database may hold.
//!
//! * [`History`]: one writer, every acknowledged write durable (pm-crash).
//!   The recovered state must equal the state after exactly the
//!   acknowledged writes, or after those plus the one in flight — which
//!   also proves no batch is half applied and nothing never written appears.
//! * [`Expected`]: per key, the committed value and the values of writes
//!   that were sent but not acknowledged (RocksDB `db_stress`'s pending
//!   bits), for runs where writes fail or many are in flight.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::Arc;

/// Keys to values; values shared between states.
pub type Model = BTreeMap<Vec<u8>, Arc<[u8]>>;

/// A database's contents in key order.
pub type Kvs = Vec<(Vec<u8>, Vec<u8>)>;

/// One update of a write: a put (`Some`) or a delete (`None`).
pub type Update = (Vec<u8>, Option<Vec<u8>>);

/// Applies updates to a model.
pub fn apply(model: &mut Model, updates: &[Update]) {
    for (k, v) in updates {
        match v {
            Some(v) => {
                model.insert(k.clone(), Arc::from(v.as_slice()));
            }
            None => {
                model.remove(k);
            }
        }
    }
}

/// Whether `got` equals `want`.
pub fn same(got: &[(Vec<u8>, Vec<u8>)], want: &Model) -> bool {
    got.len() == want.len() && got.iter().zip(want.iter()).all(|((gk, gv), (wk, wv))| gk == wk && gv[..] == wv[..])
}

/// A short description of how `got` differs from `want`.
pub fn diff(got: &[(Vec<u8>, Vec<u8>)], want: &Model) -> String {
    let got_map: BTreeMap<&[u8], &[u8]> = got.iter().map(|(k, v)| (k.as_slice(), v.as_slice())).collect();
    let missing: Vec<String> =
        want.keys().filter(|k| !got_map.contains_key(k.as_slice())).take(4).map(|k| show(k)).collect();
    let extra: Vec<String> = got_map.keys().filter(|k| !want.contains_key(**k)).take(4).map(|k| show(k)).collect();
    let wrong: Vec<String> = want
        .iter()
        .filter(|(k, v)| got_map.get(k.as_slice()).map(|g| *g != &v[..]).unwrap_or(false))
        .take(4)
        .map(|(k, v)| {
            format!("{} = {} (want {})", show(k), show(got_map.get(k.as_slice()).copied().unwrap_or(&[])), show(v))
        })
        .collect();
    format!("missing {missing:?} extra {extra:?} wrong {wrong:?}")
}

/// Printable form of a key or value (truncated).
pub fn show(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b.get(..b.len().min(40)).unwrap_or(b)).into_owned();
    if b.len() > 40 {
        format!("{s}..({} bytes)", b.len())
    } else {
        s
    }
}

/// The states after 0, 1, 2, ... acknowledged writes of one writer.
#[derive(Debug, Default)]
pub struct History {
    states: Vec<Arc<Model>>,
}

impl History {
    /// Starts from the empty database.
    pub fn new() -> History {
        History { states: vec![Arc::new(Model::new())] }
    }

    /// Records the state after the next write (call before issuing it).
    pub fn push(&mut self, updates: &[Update]) {
        let mut next = self.states.last().map(|s| (**s).clone()).unwrap_or_default();
        apply(&mut next, updates);
        self.states.push(Arc::new(next));
    }

    /// State after `n` writes.
    pub fn state(&self, n: u64) -> Option<&Arc<Model>> {
        self.states.get(n as usize)
    }

    /// The latest state.
    pub fn latest(&self) -> Arc<Model> {
        self.states.last().cloned().unwrap_or_default()
    }

    /// Writes recorded.
    pub fn len(&self) -> u64 {
        self.states.len() as u64 - 1
    }

    /// Whether no write was recorded.
    pub fn is_empty(&self) -> bool {
        self.states.len() <= 1
    }

    /// The states a crash point allows: at least `acked` writes (those
    /// acknowledged before the point) and at most `issued` (those started
    /// by then). With one writer, `issued <= acked + 1` when both are read
    /// at the point itself.
    pub fn window(&self, acked: u64, issued: u64) -> Result<Window, String> {
        let states: Vec<Arc<Model>> = (acked..=issued.max(acked)).filter_map(|n| self.state(n).cloned()).collect();
        if states.is_empty() {
            return Err(format!("no state recorded for {acked} writes"));
        }
        Ok(Window { acked, states })
    }

    /// Checks `got` against [`History::window`]; `Err` describes the difference.
    pub fn check(&self, got: &[(Vec<u8>, Vec<u8>)], acked: u64, issued: u64) -> Result<u64, String> {
        self.window(acked, issued)?.check(got)
    }
}

/// The states allowed at one crash point.
#[derive(Clone, Debug)]
pub struct Window {
    /// Acknowledged writes.
    pub acked: u64,
    /// States after `acked`, `acked + 1`, ... writes.
    states: Vec<Arc<Model>>,
}

impl Window {
    /// Ok(number of writes `got` holds) if it is an allowed state.
    pub fn check(&self, got: &[(Vec<u8>, Vec<u8>)]) -> Result<u64, String> {
        for (i, s) in self.states.iter().enumerate() {
            if same(got, s) {
                return Ok(self.acked + i as u64);
            }
        }
        let first = self.states.first().cloned().unwrap_or_default();
        Err(format!(
            "recovered state is none of the states after the {} acknowledged writes and up to {} in flight: {}",
            self.acked,
            self.states.len().saturating_sub(1),
            diff(got, &first)
        ))
    }
}

#[derive(Clone, Debug, Default)]
struct KeyState {
    committed: Option<Arc<[u8]>>,
    pending: Vec<Option<Arc<[u8]>>>,
}

/// Per-key expected state with pending (unacknowledged) values.
#[derive(Clone, Debug, Default)]
pub struct Expected {
    keys: BTreeMap<Vec<u8>, KeyState>,
    /// Failed batches of more than one key: (op number, updates).
    failed_batches: Vec<(u64, Vec<Update>)>,
    /// Op number of the last write of each key (acknowledged or not).
    last_writer: BTreeMap<Vec<u8>, u64>,
}

impl Expected {
    /// Nothing written yet.
    pub fn new() -> Expected {
        Expected::default()
    }

    /// Marks the updates of write number `op` as sent (pending).
    pub fn begin(&mut self, op: u64, updates: &[Update]) {
        for (k, v) in updates {
            self.keys.entry(k.clone()).or_default().pending.push(v.as_deref().map(Arc::from));
            self.last_writer.insert(k.clone(), op);
        }
    }

    /// The write `op` was acknowledged: its values are now committed.
    pub fn commit(&mut self, updates: &[Update]) {
        for (k, v) in updates {
            let st = self.keys.entry(k.clone()).or_default();
            st.committed = v.as_deref().map(Arc::from);
            st.pending.clear();
        }
    }

    /// The write `op` failed: its values stay possible (it may have been
    /// applied whole) until a later acknowledged write replaces them.
    pub fn fail(&mut self, op: u64, updates: &[Update]) {
        if updates.len() > 1 {
            self.failed_batches.push((op, updates.to_vec()));
        }
    }

    /// After a check: `got` is now the truth (pending values resolved).
    pub fn resolve(&mut self, got: &BTreeMap<Vec<u8>, Vec<u8>>) {
        for (k, st) in self.keys.iter_mut() {
            st.committed = got.get(k).map(|v| Arc::from(v.as_slice()));
            st.pending.clear();
        }
        self.failed_batches.clear();
    }

    /// Keys with a committed value (the acknowledged state).
    pub fn committed_len(&self) -> usize {
        self.keys.values().filter(|s| s.committed.is_some()).count()
    }

    /// Checks the values `got` holds for `keys` (absent from `got` = absent).
    pub fn check_keys(&self, keys: &[Vec<u8>], got: &BTreeMap<Vec<u8>, Vec<u8>>) -> Result<(), String> {
        for k in keys {
            let g = got.get(k).map(|v| v.as_slice());
            let ok = match self.keys.get(k) {
                None => g.is_none(),
                Some(st) => st.committed.as_deref() == g || st.pending.iter().any(|p| p.as_deref() == g),
            };
            if !ok {
                return Err(format!(
                    "{} = {}, neither committed nor pending",
                    show(k),
                    g.map(show).unwrap_or_else(|| "<absent>".into())
                ));
            }
        }
        Ok(())
    }

    /// Checks a recovered database's full contents. Returns the number of
    /// keys checked, or a description of the first problems.
    pub fn check(&self, got: &BTreeMap<Vec<u8>, Vec<u8>>) -> Result<u64, String> {
        let mut problems = String::new();
        let mut n = 0u64;
        let all: BTreeSet<&Vec<u8>> = self.keys.keys().chain(got.keys()).collect();
        for k in all {
            n += 1;
            let g = got.get(k).map(|v| v.as_slice());
            let ok = match self.keys.get(k) {
                None => g.is_none(),
                Some(st) => st.committed.as_deref() == g || st.pending.iter().any(|p| p.as_deref() == g),
            };
            if !ok && problems.len() < 600 {
                let want = self.keys.get(k).map(|s| {
                    let c = s.committed.as_deref().map(show).unwrap_or_else(|| "<absent>".into());
                    format!("{c} (+{} pending)", s.pending.len())
                });
                let _ = write!(
                    problems,
                    "{} = {} but expected {}; ",
                    show(k),
                    g.map(show).unwrap_or_else(|| "<absent>".into()),
                    want.unwrap_or_else(|| "<never written>".into())
                );
            }
        }
        // A failed batch is applied whole or not at all: among its keys
        // that no later write touched, all show its value or none does.
        // Only puts tell (values are unique per write; a delete of an
        // absent key looks applied either way), and only a key's last
        // update in the batch.
        for (op, updates) in &self.failed_batches {
            let mut last: BTreeMap<&Vec<u8>, &Option<Vec<u8>>> = BTreeMap::new();
            for (k, v) in updates {
                last.insert(k, v);
            }
            let own: Vec<(&Vec<u8>, &Vec<u8>)> = last
                .into_iter()
                .filter(|(k, _)| self.last_writer.get(*k) == Some(op))
                .filter_map(|(k, v)| v.as_ref().map(|v| (k, v)))
                .collect();
            let applied = own.iter().filter(|(k, v)| got.get(*k) == Some(*v)).count();
            if applied != 0 && applied != own.len() {
                let _ = write!(problems, "failed batch {op} is half applied ({applied} of {} keys); ", own.len());
            }
        }
        if problems.is_empty() {
            Ok(n)
        } else {
            Err(problems)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(k: &str, v: Option<&str>) -> Update {
        (k.as_bytes().to_vec(), v.map(|v| v.as_bytes().to_vec()))
    }

    fn kv(pairs: &[(&str, &str)]) -> Vec<(Vec<u8>, Vec<u8>)> {
        pairs.iter().map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec())).collect()
    }

    #[test]
    fn history_accepts_acked_or_acked_plus_in_flight_only() {
        let mut h = History::new();
        h.push(&[u("a", Some("1"))]);
        h.push(&[u("b", Some("2")), u("a", None)]);
        assert!(h.check(&kv(&[("a", "1")]), 1, 1).is_ok());
        assert!(h.check(&kv(&[("b", "2")]), 1, 2).is_ok());
        // Half of the batch: never.
        assert!(h.check(&kv(&[("a", "1"), ("b", "2")]), 1, 2).is_err());
        // The in-flight write when none was in flight.
        assert!(h.check(&kv(&[("b", "2")]), 1, 1).is_err());
        // A lost acknowledged write.
        assert!(h.check(&kv(&[]), 1, 1).is_err());
    }

    #[test]
    fn expected_allows_pending_values_and_catches_the_rest() {
        let mut e = Expected::new();
        let w1 = [u("a", Some("1"))];
        e.begin(1, &w1);
        e.commit(&w1);
        let w2 = [u("a", Some("2")), u("b", Some("2"))];
        e.begin(2, &w2);
        e.fail(2, &w2);
        let m = |p: &[(&str, &str)]| -> BTreeMap<Vec<u8>, Vec<u8>> { kv(p).into_iter().collect() };
        assert!(e.check(&m(&[("a", "1")])).is_ok());
        assert!(e.check(&m(&[("a", "2"), ("b", "2")])).is_ok());
        assert!(e.check(&m(&[("a", "2")])).is_err(), "half a batch");
        assert!(e.check(&m(&[])).is_err(), "lost committed a=1");
        assert!(e.check(&m(&[("a", "1"), ("z", "9")])).is_err(), "never written");
    }
}
