//! What a command is: the types of the command table (`Spec`, its flags,
//! ACL categories, key specs, events and documentation) and what follows
//! from them (the key arguments of a request, the categories and the key
//! range COMMAND reports). The table itself, one `Spec` per command, is
//! generated from `commands/*.json` (see `table`).

use bytes::Bytes;

use super::{CmdResult, Ctx, Session, Shared};
use crate::resp::Reply;

/// A handler that needs only the connection (no keyspace access).
pub type SessionFn = fn(&Shared, &mut Session, &[Bytes]) -> Reply;
/// A handler that reads and writes the keyspace through a transaction.
pub type DataFn = fn(&mut Ctx<'_>, &[Bytes]) -> CmdResult;
/// A command's own key finder, for key specs Redis marks incomplete or
/// unknown (SORT's STORE): key argument positions and their key flags.
pub type GetKeysFn = fn(&[Bytes]) -> Vec<(usize, u32)>;

/// How a command runs.
#[derive(Clone, Copy)]
pub enum Run {
    /// Connection-level command.
    Session(SessionFn),
    /// Keyspace command.
    Data(DataFn),
}

/// Command flags: Redis 7's, then the server's own (never shown).
pub mod flag {
    /// Writes the keyspace.
    pub const WRITE: u64 = 1 << 0;
    /// Only reads the keyspace.
    pub const READONLY: u64 = 1 << 1;
    /// May grow memory use (refused under an OOM condition).
    pub const DENYOOM: u64 = 1 << 2;
    /// Administrative.
    pub const ADMIN: u64 = 1 << 3;
    /// Pub/sub.
    pub const PUBSUB: u64 = 1 << 4;
    /// Not allowed in scripts.
    pub const NOSCRIPT: u64 = 1 << 5;
    /// May block the client.
    pub const BLOCKING: u64 = 1 << 6;
    /// Allowed while loading the database.
    pub const LOADING: u64 = 1 << 7;
    /// Allowed on a replica with stale data.
    pub const STALE: u64 = 1 << 8;
    /// Not shown in MONITOR.
    pub const SKIP_MONITOR: u64 = 1 << 9;
    /// Not shown in SLOWLOG.
    pub const SKIP_SLOWLOG: u64 = 1 << 10;
    /// Cluster: allowed on an importing slot with ASKING.
    pub const ASKING: u64 = 1 << 11;
    /// O(1) or O(log N).
    pub const FAST: u64 = 1 << 12;
    /// Allowed before AUTH.
    pub const NO_AUTH: u64 = 1 << 13;
    /// May replicate even if it does not write (hidden in COMMAND).
    pub const MAY_REPLICATE: u64 = 1 << 14;
    /// Key arguments may be absent (EVAL with 0 keys).
    pub const NO_MANDATORY_KEYS: u64 = 1 << 15;
    /// Refused while loading asynchronously.
    pub const NO_ASYNC_LOADING: u64 = 1 << 16;
    /// Refused inside MULTI.
    pub const NO_MULTI: u64 = 1 << 17;
    /// Allowed while a script is busy.
    pub const ALLOW_BUSY: u64 = 1 << 18;
    /// Derived, never stated: keys not found by fixed positions.
    pub const MOVABLEKEYS: u64 = 1 << 19;
    /// Locks the whole keyspace (its keys are not known before it runs:
    /// scripts, SORT's BY/GET, flushes).
    pub const LOCK_ALL: u64 = 1 << 32;
    /// Allowed in RESP2 subscribed mode.
    pub const SUBSCRIBED_OK: u64 = 1 << 33;
    /// Runs at once inside MULTI instead of being queued (EXEC, DISCARD …).
    pub const MULTI_CONTROL: u64 = 1 << 34;
    /// Runs a script (on the script thread, where there is one).
    pub const RUNS_SCRIPT: u64 = 1 << 35;

    /// The flags COMMAND shows, in Redis's order.
    pub const SHOWN: &[(u64, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (PUBSUB, "pubsub"),
        (NOSCRIPT, "noscript"),
        (BLOCKING, "blocking"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (SKIP_MONITOR, "skip_monitor"),
        (SKIP_SLOWLOG, "skip_slowlog"),
        (ASKING, "asking"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
        (NO_MANDATORY_KEYS, "no_mandatory_keys"),
        (NO_ASYNC_LOADING, "no_async_loading"),
        (NO_MULTI, "no_multi"),
        (MOVABLEKEYS, "movablekeys"),
        (ALLOW_BUSY, "allow_busy"),
    ];
}

/// ACL categories, in Redis's order.
pub mod acl {
    /// The categories with their names (without the `@`).
    pub const NAMES: &[(u32, &str)] = &[
        (KEYSPACE, "keyspace"),
        (READ, "read"),
        (WRITE, "write"),
        (SET, "set"),
        (SORTEDSET, "sortedset"),
        (LIST, "list"),
        (HASH, "hash"),
        (STRING, "string"),
        (BITMAP, "bitmap"),
        (HYPERLOGLOG, "hyperloglog"),
        (GEO, "geo"),
        (STREAM, "stream"),
        (PUBSUB, "pubsub"),
        (ADMIN, "admin"),
        (FAST, "fast"),
        (SLOW, "slow"),
        (BLOCKING, "blocking"),
        (DANGEROUS, "dangerous"),
        (CONNECTION, "connection"),
        (TRANSACTION, "transaction"),
        (SCRIPTING, "scripting"),
    ];
    /// `@keyspace`.
    pub const KEYSPACE: u32 = 1 << 0;
    /// `@read`.
    pub const READ: u32 = 1 << 1;
    /// `@write`.
    pub const WRITE: u32 = 1 << 2;
    /// `@set`.
    pub const SET: u32 = 1 << 3;
    /// `@sortedset`.
    pub const SORTEDSET: u32 = 1 << 4;
    /// `@list`.
    pub const LIST: u32 = 1 << 5;
    /// `@hash`.
    pub const HASH: u32 = 1 << 6;
    /// `@string`.
    pub const STRING: u32 = 1 << 7;
    /// `@bitmap`.
    pub const BITMAP: u32 = 1 << 8;
    /// `@hyperloglog`.
    pub const HYPERLOGLOG: u32 = 1 << 9;
    /// `@geo`.
    pub const GEO: u32 = 1 << 10;
    /// `@stream`.
    pub const STREAM: u32 = 1 << 11;
    /// `@pubsub`.
    pub const PUBSUB: u32 = 1 << 12;
    /// `@admin`.
    pub const ADMIN: u32 = 1 << 13;
    /// `@fast`.
    pub const FAST: u32 = 1 << 14;
    /// `@slow`.
    pub const SLOW: u32 = 1 << 15;
    /// `@blocking`.
    pub const BLOCKING: u32 = 1 << 16;
    /// `@dangerous`.
    pub const DANGEROUS: u32 = 1 << 17;
    /// `@connection`.
    pub const CONNECTION: u32 = 1 << 18;
    /// `@transaction`.
    pub const TRANSACTION: u32 = 1 << 19;
    /// `@scripting`.
    pub const SCRIPTING: u32 = 1 << 20;
}

/// Key spec flags, in Redis's order.
pub mod key_flag {
    /// Read only.
    pub const RO: u32 = 1 << 0;
    /// Read and write.
    pub const RW: u32 = 1 << 1;
    /// Overwrite.
    pub const OW: u32 = 1 << 2;
    /// Remove.
    pub const RM: u32 = 1 << 3;
    /// Reads the value.
    pub const ACCESS: u32 = 1 << 4;
    /// Updates the value.
    pub const UPDATE: u32 = 1 << 5;
    /// Inserts into the value.
    pub const INSERT: u32 = 1 << 6;
    /// Deletes from the value.
    pub const DELETE: u32 = 1 << 7;
    /// Not a key (a shard channel).
    pub const NOT_KEY: u32 = 1 << 8;
    /// The spec may miss keys.
    pub const INCOMPLETE: u32 = 1 << 9;
    /// The flags depend on the arguments.
    pub const VARIABLE_FLAGS: u32 = 1 << 10;
    /// The flags with their names.
    pub const NAMES: &[(u32, &str)] = &[
        (RO, "RO"),
        (RW, "RW"),
        (OW, "OW"),
        (RM, "RM"),
        (ACCESS, "access"),
        (UPDATE, "update"),
        (INSERT, "insert"),
        (DELETE, "delete"),
        (NOT_KEY, "not_key"),
        (INCOMPLETE, "incomplete"),
        (VARIABLE_FLAGS, "variable_flags"),
    ];
}

/// Where a key spec's keys begin.
#[derive(Clone, Copy, Debug)]
pub enum Begin {
    /// At this argument.
    Index(i32),
    /// After this keyword, searched from `startfrom` (negative: from the
    /// end, backwards).
    Keyword {
        /// The keyword (any case).
        keyword: &'static str,
        /// Where the search starts.
        startfrom: i32,
    },
    /// Not known from the arguments' positions.
    Unknown,
}

/// How many keys a key spec covers from where they begin.
#[derive(Clone, Copy, Debug)]
pub enum Find {
    /// Up to `lastkey` (relative; negative: from the end), every `keystep`;
    /// with `limit` > 1 and `lastkey` -1, the first 1/`limit` of the rest.
    Range {
        /// Last key, relative to the first.
        lastkey: i32,
        /// Step between keys.
        keystep: i32,
        /// Fraction of the remaining arguments.
        limit: i32,
    },
    /// An argument gives the number of keys.
    Keynum {
        /// Where the number is, relative to the first.
        keynumidx: i32,
        /// The first key, relative to the first.
        firstkey: i32,
        /// Step between keys.
        keystep: i32,
    },
    /// Not known.
    Unknown,
}

/// One of a command's key specs (Redis 7).
#[derive(Clone, Copy, Debug)]
pub struct KeySpec {
    /// A remark shown by COMMAND INFO.
    pub notes: Option<&'static str>,
    /// [`key_flag`] bits.
    pub flags: u32,
    /// Where the keys begin.
    pub begin: Begin,
    /// Which keys follow.
    pub find: Find,
}

/// A keyspace event a command's write publishes: its class, its name and
/// the argument that is the key.
#[derive(Clone, Copy, Debug)]
pub struct Event {
    /// The class (`crate::pubsub::events`).
    pub class: u32,
    /// The event's name.
    pub event: &'static str,
    /// The key's argument index.
    pub arg: usize,
    /// Published only if the command did not delete the key (then its
    /// `del` stands for it).
    pub kept: bool,
}

/// Where an events function puts each event: `(class, event, key, kept)`
/// (`kept`: only if the command did not delete the key).
pub type Push<'a> = dyn FnMut(u32, &'static str, &[u8], bool) + 'a;

/// A function that lists the events of a command whose events depend on
/// its arguments.
pub type EventsFn = fn(&[Bytes], &mut Push<'_>);

/// The keyspace events of a command's write.
#[derive(Clone, Copy)]
pub enum Events {
    /// None (or published by the handler itself, where the key is chosen
    /// at run time).
    None,
    /// These, in order.
    Fixed(&'static [Event]),
    /// Computed from the arguments.
    Custom(EventsFn),
}

/// Documentation, as COMMAND DOCS answers it.
#[derive(Debug)]
pub enum Doc {
    /// A bulk string.
    Str(&'static str),
    /// A status string.
    Simple(&'static str),
    /// An integer.
    Int(i64),
    /// An array.
    List(&'static [Doc]),
    /// A set.
    Set(&'static [Doc]),
    /// A map, in order.
    Map(&'static [(&'static str, Doc)]),
}

impl Doc {
    /// The reply.
    pub fn reply(&self) -> Reply {
        match self {
            Doc::Str(s) => Reply::bulk(s),
            Doc::Simple(s) => Reply::Simple(s),
            Doc::Int(n) => Reply::Int(*n),
            Doc::List(l) => Reply::Array(l.iter().map(Doc::reply).collect()),
            Doc::Set(l) => Reply::Set(l.iter().map(Doc::reply).collect()),
            Doc::Map(m) => Reply::Map(m.iter().map(|(k, v)| (Reply::bulk(k), v.reply())).collect()),
        }
    }
}

/// One command or subcommand.
pub struct Spec {
    /// Lower-case full name (`get`, `client|list`).
    pub name: &'static str,
    /// Arity.
    pub arity: i32,
    /// [`flag`] bits.
    pub flags: u64,
    /// The [`acl`] categories stated (the implied ones are derived).
    pub acl: u32,
    /// Where its keys are.
    pub key_specs: &'static [KeySpec],
    /// Hints for clients and proxies (COMMAND INFO).
    pub tips: &'static [&'static str],
    /// Handler (a subcommand's is its container's).
    pub run: Run,
    /// Its own key finder, where Redis has one that the key specs cannot
    /// stand for (SORT's STORE).
    pub getkeys: Option<GetKeysFn>,
    /// How its writes go to replicas, where not as the client sent them.
    pub propagate: Option<super::propagate::PropagateFn>,
    /// The keyspace events its writes publish.
    pub events: Events,
    /// Documentation (COMMAND DOCS).
    pub docs: Doc,
    /// Its place in the table (its INFO commandstats counters).
    pub id: usize,
    /// Its container's name, for a subcommand.
    pub parent: Option<&'static str>,
    /// Its subcommands, for a container.
    pub subcommands: &'static [&'static Spec],
}

impl Spec {
    /// Whether it has every flag of `f`.
    pub fn has(&self, f: u64) -> bool {
        self.flags & f == f
    }

    /// Whether the arity accepts `n` arguments (the name included).
    pub fn arity_ok(&self, n: usize) -> bool {
        let n = n as i64;
        let a = i64::from(self.arity);
        if a >= 0 {
            n == a
        } else {
            n >= -a
        }
    }

    /// The name without its container (`list` for `client|list`).
    pub fn short_name(&self) -> &'static str {
        self.name.rsplit('|').next().unwrap_or(self.name)
    }

    /// Its subcommands.
    pub fn subs(&self) -> impl Iterator<Item = &'static Spec> {
        self.subcommands.iter().copied()
    }

    /// The subcommand `name` (any case).
    pub fn sub(&self, name: &[u8]) -> Option<&'static Spec> {
        self.subs().find(|s| s.short_name().as_bytes().eq_ignore_ascii_case(name))
    }

    /// Every flag, the derived `movablekeys` included: set when some key
    /// spec is not a fixed position and range (as Redis 7.0 derives it).
    pub fn all_flags(&self) -> u64 {
        let (_, _, _, movable) = self.legacy_range();
        if movable {
            self.flags | flag::MOVABLEKEYS
        } else {
            self.flags
        }
    }

    /// Every ACL category: the stated ones and those its flags imply.
    pub fn acl_categories(&self) -> u32 {
        let mut c = self.acl;
        if self.has(flag::WRITE) {
            c |= acl::WRITE;
        }
        if self.has(flag::READONLY) && c & acl::SCRIPTING == 0 {
            c |= acl::READ;
        }
        if self.has(flag::ADMIN) {
            c |= acl::ADMIN | acl::DANGEROUS;
        }
        if self.has(flag::PUBSUB) {
            c |= acl::PUBSUB;
        }
        if self.has(flag::FAST) {
            c |= acl::FAST;
        }
        if self.has(flag::BLOCKING) {
            c |= acl::BLOCKING;
        }
        if c & acl::FAST == 0 {
            c |= acl::SLOW;
        }
        c
    }

    /// COMMAND INFO's first key, last key and step (the key specs folded
    /// into one range, as Redis 7 does for old clients), and whether some
    /// keys fall outside it (`movablekeys`).
    pub fn legacy_range(&self) -> (i64, i64, i64, bool) {
        let specs = self.key_specs;
        if let [KeySpec { begin: Begin::Index(pos), find: Find::Range { lastkey, keystep, .. }, flags, .. }] = specs {
            let last = if *lastkey >= 0 { i64::from(pos + lastkey) } else { i64::from(*lastkey) };
            return (i64::from(*pos), last, i64::from(*keystep), flags & key_flag::INCOMPLETE != 0);
        }
        let mut movable = false;
        let (mut first, mut last): (Option<i64>, i64) = (None, 0);
        let mut prev_last = 0i64;
        for s in specs {
            let (Begin::Index(pos), Find::Range { lastkey, keystep, .. }) = (s.begin, s.find) else {
                movable = true;
                continue;
            };
            if keystep != 1 || (prev_last != 0 && prev_last != i64::from(pos) - 1) {
                movable = true;
                continue;
            }
            if s.flags & key_flag::INCOMPLETE != 0 {
                movable = true;
            }
            first = Some(first.map_or(i64::from(pos), |f| f.min(i64::from(pos))));
            let abs = if lastkey >= 0 { i64::from(lastkey + pos) } else { i64::from(lastkey) };
            // Redis compares as unsigned: a key counted from the end wins.
            last = if (abs as u64) > (last as u64) { abs } else { last };
            prev_last = last;
        }
        match first {
            None => (0, 0, 0, movable || !specs.is_empty()),
            Some(f) => (f, last, 1, movable),
        }
    }

    /// The key arguments of `args` (the command name first) with their key
    /// flags, as COMMAND GETKEYS finds them: by the key specs, or by the
    /// command's own finder where a spec cannot tell. `None` when the
    /// arguments do not hold the keys the specs promise. With `partial`, a
    /// spec that cannot tell is passed over instead (locking).
    pub fn key_args(&self, args: &[Bytes], partial: bool) -> Option<Vec<(usize, u32)>> {
        // Flags that depend on the arguments (SET with GET) come from the
        // command's own finder, as in Redis.
        if let Some(f) =
            self.getkeys.filter(|_| !partial && self.key_specs.iter().any(|k| k.flags & key_flag::VARIABLE_FLAGS != 0))
        {
            return Some(f(args));
        }
        let mut out = Vec::new();
        let argc = args.len() as i64;
        for s in self.key_specs {
            if s.flags & key_flag::NOT_KEY != 0 {
                continue;
            }
            match spec_keys(s, args, argc, self.arity < 0) {
                Some(found) if s.flags & key_flag::INCOMPLETE == 0 => {
                    out.extend(found.into_iter().map(|i| (i, s.flags)));
                }
                Some(found) if partial => out.extend(found.into_iter().map(|i| (i, s.flags))),
                _ if partial => {}
                _ => return self.getkeys.map(|f| f(args)),
            }
        }
        Some(out)
    }
}

/// The positions one key spec finds in `args` (`None`: it cannot tell).
fn spec_keys(s: &KeySpec, args: &[Bytes], argc: i64, variadic: bool) -> Option<Vec<usize>> {
    let first = match s.begin {
        Begin::Index(pos) => i64::from(pos),
        Begin::Keyword { keyword, startfrom } => {
            let from = i64::from(startfrom);
            let start = if from > 0 { from } else { argc + from };
            let found = if from > 0 {
                (start..argc).find(|&i| arg_is(args, i, keyword))
            } else {
                (1..=start).rev().find(|&i| arg_is(args, i, keyword))
            };
            // A keyword that is absent: this spec has no keys.
            match found {
                Some(i) => i + 1,
                None => return Some(Vec::new()),
            }
        }
        Begin::Unknown => return None,
    };
    let (first, last, step) = match s.find {
        Find::Range { lastkey, keystep, limit } => {
            let last = if lastkey >= 0 {
                first + i64::from(lastkey)
            } else if limit == 0 {
                argc + i64::from(lastkey)
            } else {
                first + ((argc - first) / i64::from(limit) + i64::from(lastkey))
            };
            (first, last, i64::from(keystep))
        }
        Find::Keynum { keynumidx, firstkey, keystep } => {
            let at = first + i64::from(keynumidx);
            let n = usize::try_from(at).ok().and_then(|i| args.get(i)).and_then(|a| crate::numbers::parse_i64(a))?;
            if n < 0 {
                return None;
            }
            let f = first + i64::from(firstkey);
            (f, f + n - 1, i64::from(keystep))
        }
        Find::Unknown => return None,
    };
    if last >= argc || last < first || first >= argc {
        // No keys where some were promised (a key count of 0 included).
        return if last < first && matches!(s.find, Find::Keynum { .. }) { Some(Vec::new()) } else { None };
    }
    let mut out = Vec::new();
    let mut i = first;
    while i <= last {
        if i >= argc && variadic {
            break;
        }
        out.push(i as usize);
        i += step.max(1);
    }
    Some(out)
}

fn arg_is(args: &[Bytes], i: i64, word: &str) -> bool {
    usize::try_from(i).ok().and_then(|i| args.get(i)).is_some_and(|a| a.eq_ignore_ascii_case(word.as_bytes()))
}
