//! Redis's tuning parameters that clients and test suites set with CONFIG
//! SET but that change nothing here: encoding thresholds (listpack vs
//! hashtable sizes; the keyspace has one encoding per type), hash-table
//! rehashing, slow-log and latency thresholds (and `lua-time-limit`, alias
//! `busy-reply-threshold`, which the scripts read). They are accepted, checked
//! as Redis checks them, remembered, and shown by CONFIG GET, so clients
//! that set them keep working. Parameters that would change behaviour are
//! not in this list (CONFIG SET of them is an error).

use std::collections::BTreeMap;

use parking_lot::RwLock;

/// How a parameter's value is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A signed 64-bit integer.
    Int,
    /// `yes` or `no`.
    Bool,
    /// One of these words.
    Choice(&'static [&'static str]),
}

/// (name, kind, Redis 7.0's default).
const PARAMS: &[(&str, Kind, &str)] = &[
    ("hash-max-listpack-entries", Kind::Int, "128"),
    ("hash-max-listpack-value", Kind::Int, "64"),
    ("hash-max-ziplist-entries", Kind::Int, "128"),
    ("hash-max-ziplist-value", Kind::Int, "64"),
    ("set-max-intset-entries", Kind::Int, "512"),
    ("zset-max-listpack-entries", Kind::Int, "128"),
    ("zset-max-listpack-value", Kind::Int, "64"),
    ("zset-max-ziplist-entries", Kind::Int, "128"),
    ("zset-max-ziplist-value", Kind::Int, "64"),
    ("list-max-listpack-size", Kind::Int, "-2"),
    ("list-max-ziplist-size", Kind::Int, "-2"),
    ("list-compress-depth", Kind::Int, "0"),
    ("stream-node-max-entries", Kind::Int, "100"),
    ("stream-node-max-bytes", Kind::Int, "4096"),
    ("activerehashing", Kind::Bool, "yes"),
    ("hz", Kind::Int, "10"),
    ("dynamic-hz", Kind::Bool, "yes"),
    ("lua-time-limit", Kind::Int, "5000"),
    ("busy-reply-threshold", Kind::Int, "5000"),
    ("slowlog-log-slower-than", Kind::Int, "10000"),
    ("slowlog-max-len", Kind::Int, "128"),
    ("latency-monitor-threshold", Kind::Int, "0"),
    ("latency-tracking", Kind::Bool, "yes"),
    ("lazyfree-lazy-user-del", Kind::Bool, "no"),
    ("lazyfree-lazy-user-flush", Kind::Bool, "no"),
    ("lazyfree-lazy-expire", Kind::Bool, "no"),
    ("lazyfree-lazy-server-del", Kind::Bool, "no"),
    ("lazyfree-lazy-eviction", Kind::Bool, "no"),
    ("replica-lazy-flush", Kind::Bool, "no"),
    ("hll-sparse-max-bytes", Kind::Int, "3000"),
    ("active-defrag-cycle-min", Kind::Int, "1"),
    ("active-defrag-cycle-max", Kind::Int, "25"),
    // strata-server logs its notices and warnings whatever this says.
    ("loglevel", Kind::Choice(&["debug", "verbose", "notice", "warning", "nothing"]), "notice"),
    // RESTORE checks every payload whole whatever this says.
    ("sanitize-dump-payload", Kind::Choice(&["no", "yes", "clients"]), "no"),
];

/// Names Redis 7 keeps as aliases of a renamed parameter: one value, set
/// and shown under either name (ENCODING reads the new names).
const ALIASES: &[(&str, &str)] = &[
    ("hash-max-ziplist-entries", "hash-max-listpack-entries"),
    ("hash-max-ziplist-value", "hash-max-listpack-value"),
    ("zset-max-ziplist-entries", "zset-max-listpack-entries"),
    ("zset-max-ziplist-value", "zset-max-listpack-value"),
    ("list-max-ziplist-size", "list-max-listpack-size"),
    ("lua-time-limit", "busy-reply-threshold"),
];

/// The current values of the tuning parameters.
pub struct Tuning {
    values: RwLock<BTreeMap<&'static str, String>>,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning { values: RwLock::new(PARAMS.iter().map(|&(n, _, d)| (n, d.to_string())).collect()) }
    }
}

impl Tuning {
    /// Whether `name` (lower case) is a tuning parameter.
    pub fn knows(name: &str) -> bool {
        PARAMS.iter().any(|p| p.0 == name)
    }

    /// Checks `value` for `name` as Redis does; the error text if invalid.
    pub fn check(name: &str, value: &[u8]) -> Result<String, String> {
        let Some(&(_, kind, _)) = PARAMS.iter().find(|p| p.0 == name) else {
            return Err(format!("ERR Unknown option or number of arguments for CONFIG SET - '{name}'"));
        };
        let v = String::from_utf8_lossy(value).into_owned();
        match kind {
            Kind::Int if crate::numbers::parse_i64(value).is_some() => Ok(v),
            Kind::Int => Err(format!(
                "ERR CONFIG SET failed (possibly related to argument '{name}') - argument couldn't be parsed into an integer"
            )),
            Kind::Bool if v.eq_ignore_ascii_case("yes") || v.eq_ignore_ascii_case("no") => Ok(v.to_ascii_lowercase()),
            Kind::Bool => Err(format!(
                "ERR CONFIG SET failed (possibly related to argument '{name}') - argument must be 'yes' or 'no'"
            )),
            Kind::Choice(words) => match words.iter().find(|w| w.eq_ignore_ascii_case(&v)) {
                Some(w) => Ok(w.to_string()),
                None => Err(format!(
                    "ERR CONFIG SET failed (possibly related to argument '{name}') - argument(s) must be one of the following: {}",
                    words.join(", ")
                )),
            },
        }
    }

    /// Sets checked values (all of one CONFIG SET at once).
    pub fn set(&self, pairs: Vec<(String, String)>) {
        let mut values = self.values.write();
        for (name, v) in pairs {
            if let Some(&(old, new)) = ALIASES.iter().find(|(old, new)| *old == name || *new == name) {
                values.insert(old, v.clone());
                values.insert(new, v);
            } else if let Some(&(n, _, _)) = PARAMS.iter().find(|p| p.0 == name) {
                values.insert(n, v);
            }
        }
    }

    /// The value of integer parameter `name` (0 if it is not one).
    pub fn int(&self, name: &str) -> i64 {
        self.values.read().get(name).and_then(|v| v.parse().ok()).unwrap_or(0)
    }

    /// Every parameter and its value.
    pub fn params(&self) -> Vec<(&'static str, String)> {
        self.values.read().iter().map(|(n, v)| (*n, v.clone())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_like_redis_and_remembers() {
        let t = Tuning::default();
        assert!(Tuning::knows("hash-max-listpack-entries"));
        assert!(!Tuning::knows("port"));
        assert_eq!(Tuning::check("hash-max-listpack-entries", b"1"), Ok("1".into()));
        assert!(Tuning::check("hash-max-listpack-entries", b"x").unwrap_err().contains("couldn't be parsed"));
        assert_eq!(Tuning::check("activerehashing", b"NO"), Ok("no".into()));
        assert!(Tuning::check("activerehashing", b"maybe").is_err());
        t.set(vec![("hash-max-listpack-entries".into(), "1".into())]);
        assert!(t.params().contains(&("hash-max-listpack-entries", "1".into())));
        t.set(vec![("zset-max-ziplist-entries".into(), "0".into())]);
        assert_eq!(t.int("zset-max-listpack-entries"), 0);
        assert!(t.params().contains(&("zset-max-ziplist-entries", "0".into())));
        t.set(vec![("busy-reply-threshold".into(), "7".into())]);
        assert_eq!(t.int("lua-time-limit"), 7);
        t.set(vec![("busy-reply-threshold".into(), "10".into())]);
        assert_eq!(t.int("lua-time-limit"), 10);
    }
}
