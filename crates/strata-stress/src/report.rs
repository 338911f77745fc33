//! The one JSON line every mode ends with, and violation reports.

use std::fmt::Write as _;
use std::time::Instant;

/// A counter or figure in the summary line.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A count.
    Count(u64),
    /// A measured figure (seconds, rates).
    Float(f64),
    /// A word (skip reasons, names).
    Text(String),
}

/// Counts of one mode's run, printed as one JSON line in insertion order.
#[derive(Debug)]
pub struct Report {
    mode: &'static str,
    seed: u64,
    started: Instant,
    fields: Vec<(String, Value)>,
    violations: Vec<String>,
}

impl Report {
    /// An empty report for `mode` run with `seed`.
    pub fn new(mode: &'static str, seed: u64) -> Report {
        Report { mode, seed, started: Instant::now(), fields: Vec::new(), violations: Vec::new() }
    }

    /// The mode's name.
    pub fn mode(&self) -> &'static str {
        self.mode
    }

    /// Adds `n` to counter `name` (created at 0).
    pub fn add(&mut self, name: &str, n: u64) {
        match self.fields.iter_mut().find(|(k, _)| k == name) {
            Some((_, Value::Count(c))) => *c += n,
            Some((_, v)) => *v = Value::Count(n),
            None => self.fields.push((name.to_string(), Value::Count(n))),
        }
    }

    /// Raises counter `name` to at least `n`.
    pub fn max(&mut self, name: &str, n: u64) {
        let c = self.count(name);
        if n > c {
            self.add(name, n - c);
        }
    }

    /// Sets field `name`.
    pub fn set(&mut self, name: &str, v: Value) {
        match self.fields.iter_mut().find(|(k, _)| k == name) {
            Some((_, old)) => *old = v,
            None => self.fields.push((name.to_string(), v)),
        }
    }

    /// Current value of counter `name` (0 if absent).
    pub fn count(&self, name: &str) -> u64 {
        match self.fields.iter().find(|(k, _)| k == name) {
            Some((_, Value::Count(c))) => *c,
            _ => 0,
        }
    }

    /// Records a violation: printed at once to stderr with the seed that
    /// reproduces it (`episode_seed`: the seed of the failing episode).
    pub fn violation(&mut self, episode_seed: u64, what: impl Into<String>) {
        let what = what.into();
        // Sharded runs record their shard count first (field `shards`).
        let mut flags = match self.count("shards") {
            0 => String::new(),
            n => format!(" --shards {n}"),
        };
        // The kill mode's replication rounds record their target.
        if let Some((_, Value::Text(t))) = self.fields.iter().find(|(k, _)| k == "target") {
            flags.push_str(&format!(" --target {t}"));
        }
        eprintln!(
            "VIOLATION [{}] {what}\n  reproduce: cargo run --release --bin strata-stress -- --mode {} --seed {episode_seed} --seconds 5{flags}",
            self.mode, self.mode
        );
        self.violations.push(what);
    }

    /// Number of violations so far.
    pub fn violations(&self) -> usize {
        self.violations.len()
    }

    /// Merges the counters of another report of the same mode.
    pub fn absorb(&mut self, other: Report) {
        for (k, v) in other.fields {
            match v {
                Value::Count(c) => self.add(&k, c),
                v => self.set(&k, v),
            }
        }
        self.violations.extend(other.violations);
    }

    /// The summary line: `{"mode":..,"seed":..,<fields>,"violations":N,"elapsed_s":..}`.
    pub fn json(&self) -> String {
        let mut s = String::new();
        let _ = write!(s, "{{\"mode\":{},\"seed\":{}", quote(self.mode), self.seed);
        for (k, v) in &self.fields {
            let _ = write!(s, ",{}:", quote(k));
            match v {
                Value::Count(c) => {
                    let _ = write!(s, "{c}");
                }
                Value::Float(f) if f.is_finite() => {
                    let _ = write!(s, "{f:.3}");
                }
                Value::Float(_) => s.push_str("null"),
                Value::Text(t) => s.push_str(&quote(t)),
            }
        }
        let _ = write!(
            s,
            ",\"violations\":{},\"elapsed_s\":{:.1}}}",
            self.violations.len(),
            self.started.elapsed().as_secs_f64()
        );
        s
    }
}

/// A JSON string literal.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_line_keeps_field_order_and_counts_violations() {
        let mut r = Report::new("pm-crash", 7);
        r.add("crash_states", 3);
        r.add("crash_points", 1);
        r.add("crash_states", 2);
        r.set("skipped", Value::Text("no \"mount\"".into()));
        let j = r.json();
        assert!(j.starts_with("{\"mode\":\"pm-crash\",\"seed\":7,\"crash_states\":5,\"crash_points\":1,"), "{j}");
        assert!(j.contains("\"skipped\":\"no \\\"mount\\\"\""), "{j}");
        assert!(j.contains("\"violations\":0"), "{j}");
        r.violation(7, "lost k1");
        assert!(r.json().contains("\"violations\":1"));
    }
}
