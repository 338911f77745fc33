//! COMMAND: what the command table says, as Redis 7.0 answers it —
//! COMMAND, COUNT, INFO, DOCS, LIST, GETKEYS, GETKEYSANDFLAGS, HELP.
//! Cluster clients read key positions from here, and redis-cli its hints.

use bytes::Bytes;

use super::spec::{acl, flag, key_flag, Begin, Find, KeySpec, Spec};
use super::{arg, command_count, commands, is, lookup, resolve, wrong_args, Session, Shared};
use crate::resp::Reply;

const HELP: &[&str] = &[
    "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "(no subcommand)",
    "    Return details about all Redis commands.",
    "COUNT",
    "    Return the total number of commands in this Redis server.",
    "LIST",
    "    Return a list of all commands in this Redis server.",
    "INFO [<command-name> ...]",
    "    Return details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "DOCS [<command-name> ...]",
    "    Return documentation details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "GETKEYS <full-command>",
    "    Return the keys from a full Redis command.",
    "GETKEYSANDFLAGS <full-command>",
    "    Return the keys and the access flags from a full Redis command.",
    "HELP",
    "    Prints this help.",
];

/// COMMAND and its subcommands.
pub(crate) fn command(_: &Shared, _: &mut Session, args: &[Bytes]) -> Reply {
    let top = || commands().iter().copied().filter(|s| s.parent.is_none());
    if args.len() == 1 {
        return Reply::Array(top().map(info).collect());
    }
    let sub = arg(args, 1);
    let rest = args.get(2..).unwrap_or_default();
    if is(sub, "count") && rest.is_empty() {
        Reply::Int(command_count() as i64)
    } else if is(sub, "info") {
        if rest.is_empty() {
            return Reply::Array(top().map(info).collect());
        }
        Reply::Array(rest.iter().map(|n| lookup(n).map_or(Reply::Nil, info)).collect())
    } else if is(sub, "docs") {
        let specs: Vec<&Spec> =
            if rest.is_empty() { top().collect() } else { rest.iter().filter_map(|n| lookup(n)).collect() };
        Reply::Map(specs.into_iter().map(|s| (Reply::bulk(s.name), docs(s))).collect())
    } else if is(sub, "list") {
        list(rest)
    } else if is(sub, "getkeys") || is(sub, "getkeysandflags") {
        if rest.is_empty() {
            return wrong_args(&format!("command|{}", String::from_utf8_lossy(sub).to_ascii_lowercase()));
        }
        getkeys(rest, is(sub, "getkeysandflags"))
    } else if is(sub, "help") && rest.is_empty() {
        Reply::Array(HELP.iter().map(|l| Reply::Simple(l)).collect())
    } else {
        Reply::err(format!("ERR unknown subcommand '{}'. Try COMMAND HELP.", String::from_utf8_lossy(sub)))
    }
}

fn simple_set(items: impl Iterator<Item = &'static str>) -> Reply {
    Reply::Set(items.map(Reply::Simple).collect())
}

/// One command's COMMAND INFO entry.
fn info(s: &Spec) -> Reply {
    let flags = s.all_flags();
    let cats = s.acl_categories();
    let (first, last, step, _) = s.legacy_range();
    Reply::Array(vec![
        Reply::bulk(s.name),
        Reply::Int(i64::from(s.arity)),
        simple_set(flag::SHOWN.iter().filter(|(b, _)| flags & b != 0).map(|(_, n)| *n)),
        Reply::Int(first),
        Reply::Int(last),
        Reply::Int(step),
        Reply::Set(
            acl::NAMES.iter().filter(|(b, _)| cats & b != 0).map(|(_, n)| Reply::Status(format!("@{n}"))).collect(),
        ),
        Reply::Set(s.tips.iter().map(Reply::bulk).collect()),
        Reply::Set(s.key_specs.iter().map(key_spec).collect()),
        // Redis answers an empty set where there are no subcommands.
        if s.subcommands.is_empty() { Reply::Set(Vec::new()) } else { Reply::Array(s.subs().map(info).collect()) },
    ])
}

fn key_flags(bits: u32) -> Reply {
    simple_set(key_flag::NAMES.iter().filter(|(b, _)| bits & b != 0).map(|(_, n)| *n))
}

fn key_spec(k: &KeySpec) -> Reply {
    let pair = |k: &str, v: i32| (Reply::bulk(k), Reply::Int(i64::from(v)));
    let part = |kind: &str, spec: Vec<(Reply, Reply)>| {
        Reply::Map(vec![(Reply::bulk("type"), Reply::bulk(kind)), (Reply::bulk("spec"), Reply::Map(spec))])
    };
    let begin = match k.begin {
        Begin::Index(i) => part("index", vec![pair("index", i)]),
        Begin::Keyword { keyword, startfrom } => {
            part("keyword", vec![(Reply::bulk("keyword"), Reply::bulk(keyword)), pair("startfrom", startfrom)])
        }
        Begin::Unknown => part("unknown", Vec::new()),
    };
    let find = match k.find {
        Find::Range { lastkey, keystep, limit } => {
            part("range", vec![pair("lastkey", lastkey), pair("keystep", keystep), pair("limit", limit)])
        }
        Find::Keynum { keynumidx, firstkey, keystep } => {
            part("keynum", vec![pair("keynumidx", keynumidx), pair("firstkey", firstkey), pair("keystep", keystep)])
        }
        Find::Unknown => part("unknown", Vec::new()),
    };
    let mut m = Vec::with_capacity(4);
    if let Some(n) = k.notes {
        m.push((Reply::bulk("notes"), Reply::bulk(n)));
    }
    m.push((Reply::bulk("flags"), key_flags(k.flags)));
    m.push((Reply::bulk("begin_search"), begin));
    m.push((Reply::bulk("find_keys"), find));
    Reply::Map(m)
}

/// One command's COMMAND DOCS entry: its documentation, and its
/// subcommands' by full name.
fn docs(s: &Spec) -> Reply {
    let mut fields = match s.docs.reply() {
        Reply::Map(m) => m,
        other => vec![(Reply::bulk("doc"), other)],
    };
    if !s.subcommands.is_empty() {
        fields
            .push((Reply::bulk("subcommands"), Reply::Map(s.subs().map(|c| (Reply::bulk(c.name), docs(c))).collect())));
    }
    Reply::Map(fields)
}

/// COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern].
fn list(rest: &[Bytes]) -> Reply {
    let all = commands().iter().copied();
    let names: Vec<&str> = match rest {
        [] => all.map(|s| s.name).collect(),
        [by, what, value] if is(by, "filterby") => {
            if is(what, "module") {
                Vec::new()
            } else if is(what, "aclcat") {
                let cat = acl::NAMES.iter().find(|(_, n)| value.eq_ignore_ascii_case(n.as_bytes())).map(|(b, _)| *b);
                match cat {
                    Some(c) => all.filter(|s| s.acl_categories() & c != 0).map(|s| s.name).collect(),
                    None => Vec::new(),
                }
            } else if is(what, "pattern") {
                // Names are lower case; Redis matches without case.
                let pattern = value.to_ascii_lowercase();
                all.filter(|s| crate::glob::glob_match(&pattern, s.name.as_bytes())).map(|s| s.name).collect()
            } else {
                return Reply::err("ERR syntax error");
            }
        }
        _ => return Reply::err("ERR syntax error"),
    };
    Reply::Array(names.into_iter().map(Reply::bulk).collect())
}

/// COMMAND GETKEYS / GETKEYSANDFLAGS over the command `cmd`.
fn getkeys(cmd: &[Bytes], with_flags: bool) -> Reply {
    let Some((_, spec)) = resolve(cmd).filter(|(_, s)| {
        // A container asked for a subcommand it does not have.
        s.subcommands.is_empty() || cmd.len() < 2
    }) else {
        return Reply::err("ERR Invalid command specified");
    };
    let has_keys = spec.getkeys.is_some() || spec.key_specs.iter().any(|k| k.flags & key_flag::NOT_KEY == 0);
    if !has_keys {
        return Reply::err("ERR The command has no key arguments");
    }
    if !spec.arity_ok(cmd.len()) {
        return Reply::err("ERR Invalid number of arguments specified for command");
    }
    let keys = match spec.key_args(cmd, false) {
        Some(k) if !k.is_empty() => k,
        _ if spec.has(flag::NO_MANDATORY_KEYS) => Vec::new(),
        _ => return Reply::err("ERR Invalid arguments specified for command"),
    };
    Reply::Array(
        keys.into_iter()
            .map(|(i, flags)| {
                let key = Reply::Bulk(cmd.get(i).cloned().unwrap_or_default());
                if with_flags {
                    Reply::Array(vec![key, key_flags(flags)])
                } else {
                    key
                }
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<Bytes> {
        words.iter().map(|w| Bytes::copy_from_slice(w.as_bytes())).collect()
    }

    #[test]
    fn getkeys_answers_as_redis() {
        let keys = |w: &[&str]| getkeys(&args(w), false);
        let bulk = |s: &str| Reply::bulk(s);
        assert_eq!(keys(&["get", "k"]), Reply::Array(vec![bulk("k")]));
        assert_eq!(keys(&["ping"]), Reply::err("ERR The command has no key arguments"));
        assert_eq!(keys(&["nosuch", "k"]), Reply::err("ERR Invalid command specified"));
        assert_eq!(keys(&["get"]), Reply::err("ERR Invalid number of arguments specified for command"));
        assert_eq!(keys(&["eval", "return 1", "0"]), Reply::Array(vec![]));
        assert_eq!(keys(&["sort", "a", "store", "b"]), Reply::Array(vec![bulk("a"), bulk("b")]));
    }

    #[test]
    fn docs_of_every_command_is_a_map_with_a_summary() {
        for s in commands() {
            let Reply::Map(m) = docs(s) else { panic!("{}", s.name) };
            assert!(m.iter().any(|(k, _)| *k == Reply::bulk("summary")), "{}", s.name);
        }
    }
}
