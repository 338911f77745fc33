//! The command table: every command and subcommand the server has, as
//! `commands/*.json` states them (one file per command group, in the shape
//! of Redis 7's own command table), compiled into statics by `build.rs`:
//! arity (Redis convention: `n` exact, `-n` at least n, both counting the
//! name), flags, ACL categories, key specs, tips, documentation,
//! subcommands, the keyspace events a write publishes, and the handler.
//! Only the dispatcher (`cmd`) looks commands up here; every check reads
//! the `Spec` it finds (see `spec`).

use std::collections::HashMap;
use std::sync::OnceLock;

use bytes::Bytes;

#[allow(unused_imports)] // what the generated statics name
use super::spec::{acl, flag, key_flag, Begin, Doc, Event, Events, Find, KeySpec, Run, Spec};

include!(concat!(env!("OUT_DIR"), "/commands.rs"));

/// Every command and subcommand.
pub fn all() -> &'static [&'static Spec] {
    &COMMANDS
}

/// Number of top-level commands (COMMAND COUNT).
pub fn count() -> usize {
    COMMANDS.iter().filter(|s| s.parent.is_none()).count()
}

/// The spec of command `name` (any case; `client|list` for a subcommand).
pub fn lookup(name: &[u8]) -> Option<&'static Spec> {
    lookup_id(name).map(|(_, s)| s)
}

/// The spec of command `name` (any case) and its place in the table (the
/// index of its INFO commandstats counters).
pub fn lookup_id(name: &[u8]) -> Option<(usize, &'static Spec)> {
    static INDEX: OnceLock<HashMap<&'static [u8], usize>> = OnceLock::new();
    let index = INDEX.get_or_init(|| COMMANDS.iter().enumerate().map(|(i, s)| (s.name.as_bytes(), i)).collect());
    // Lower-case into a stack buffer: no allocation per request.
    let mut buf = [0u8; 48];
    let lower = buf.get_mut(..name.len())?;
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    let id = *index.get(&*lower)?;
    Some((id, *COMMANDS.get(id)?))
}

/// The command a request runs: its container's subcommand where the
/// table has it (flags, arity and keys are then the subcommand's), else
/// the command itself (whose handler answers an unknown subcommand).
pub fn resolve(args: &[Bytes]) -> Option<(usize, &'static Spec)> {
    let (id, spec) = lookup_id(args.first()?)?;
    if spec.subcommands.is_empty() {
        return Some((id, spec));
    }
    match args.get(1).and_then(|sub| spec.sub(sub)) {
        Some(sub) => Some((sub.id, sub)),
        None => Some((id, spec)),
    }
}

/// The name of the command at `id` in the table.
pub fn name_of(id: usize) -> Option<&'static str> {
    COMMANDS.get(id).map(|s| s.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::spec::Run;

    fn args(words: &[&str]) -> Vec<Bytes> {
        words.iter().map(|w| Bytes::copy_from_slice(w.as_bytes())).collect()
    }

    fn keys(cmd: &[&str]) -> Vec<usize> {
        let a = args(cmd);
        let spec = resolve(&a).expect("a command");
        spec.1.key_args(&a, false).expect("keys").into_iter().map(|(i, _)| i).collect()
    }

    #[test]
    fn key_specs_find_keys_as_redis_does() {
        assert_eq!(keys(&["get", "k"]), [1]);
        assert_eq!(keys(&["mset", "a", "1", "b", "2"]), [1, 3]);
        assert_eq!(keys(&["blpop", "a", "b", "0"]), [1, 2]);
        assert_eq!(keys(&["zunionstore", "d", "2", "a", "b", "weights", "1", "2"]), [1, 3, 4]);
        assert_eq!(keys(&["eval", "s", "0"]), Vec::<usize>::new());
        assert_eq!(keys(&["eval", "s", "2", "a", "b", "c"]), [3, 4]);
        assert_eq!(keys(&["lmpop", "2", "a", "b", "left"]), [2, 3]);
        assert_eq!(keys(&["object", "encoding", "k"]), [2]);
        assert_eq!(keys(&["bitop", "and", "d", "a", "b"]), [2, 3, 4]);
        assert_eq!(keys(&["sort", "k", "limit", "0", "1", "store", "d"]), [1, 6]);
    }

    #[test]
    fn subcommands_resolve_and_names_are_unique() {
        let (_, s) = resolve(&args(&["CLIENT", "List"])).expect("client list");
        assert_eq!(s.name, "client|list");
        let (_, s) = resolve(&args(&["client", "nosuch"])).expect("client");
        assert_eq!(s.name, "client");
        let mut names: Vec<_> = all().iter().map(|s| s.name).collect();
        names.sort_unstable();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n);
    }

    proptest::proptest! {
        /// Whatever a client sends (of an arity the command takes: every
        /// caller checks it first), finding its keys never fails and finds
        /// only arguments that are there, for every command in the table.
        #[test]
        fn key_args_stay_within_the_request(words in proptest::collection::vec("[a-z0-9-]{0,3}", 0..8)) {
            for spec in all() {
                let mut a = vec![Bytes::copy_from_slice(spec.name.split('|').next().unwrap_or_default().as_bytes())];
                a.extend(words.iter().map(|w| Bytes::copy_from_slice(w.as_bytes())));
                if !spec.arity_ok(a.len()) {
                    continue;
                }
                for partial in [true, false] {
                    for (i, _) in spec.key_args(&a, partial).unwrap_or_default() {
                        proptest::prop_assert!(i > 0 && i < a.len(), "{} {:?} -> {}", spec.name, words, i);
                    }
                }
            }
        }
    }

    /// Every flag a check reads is stated where it must be: a command is
    /// a write or a read or neither, never both; blocking ones are data
    /// commands; only data commands lock the keyspace.
    #[test]
    fn flags_are_consistent() {
        for s in all() {
            assert!(!(s.has(flag::WRITE) && s.has(flag::READONLY)), "{}", s.name);
            if s.has(flag::BLOCKING) || s.has(flag::LOCK_ALL) || s.has(flag::RUNS_SCRIPT) {
                assert!(matches!(s.run, Run::Data(_)), "{}", s.name);
            }
            if matches!(s.events, Events::Fixed(_) | Events::Custom(_)) {
                assert!(s.has(flag::WRITE), "{} publishes events but is no write", s.name);
            }
        }
    }
}
