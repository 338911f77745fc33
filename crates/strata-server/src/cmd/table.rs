//! The command table: name, arity (Redis convention: `n` exact, `-n` at
//! least n, both counting the name), which arguments are keys, and the
//! handler.

use std::collections::HashMap;
use std::sync::OnceLock;

use bytes::Bytes;

use super::{
    bitfield as bf, bits as b, blocking as bl, collscan as cs, connection as c, dump as du, hashes as h, keys as k,
    lists as l, server as s, sets as st, strings as str_,
};
use super::{
    lcs, listedit as le, memory as m, object as o, pubsub as ps, random as rnd, rename as rn, script as sc,
    setstore as ss, sort as so, transactions as t, zalgebra as za, zlex as zl, zmore as zm, zpop as zp, zrange as zr,
    zsets as z, CmdResult, Ctx, Session, Shared,
};
use crate::resp::Reply;

/// A handler that needs only the connection (no keyspace access).
pub type SessionFn = fn(&Shared, &mut Session, &[Bytes]) -> Reply;
/// A handler that reads and writes the keyspace through a transaction.
pub type DataFn = fn(&mut Ctx<'_>, &[Bytes]) -> CmdResult;

/// How a command runs.
#[derive(Clone, Copy)]
pub enum Run {
    /// Connection-level command.
    Session(SessionFn),
    /// Keyspace command.
    Data(DataFn),
}

/// Which arguments are keys (for locking).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keys {
    /// No keys.
    None,
    /// The first argument.
    First,
    /// Every argument.
    All,
    /// Every other argument from the first (MSET).
    Pairs,
    /// The whole keyspace (FLUSHALL).
    Global,
}

/// One command.
pub struct Spec {
    /// Lower-case name.
    pub name: &'static str,
    /// Arity.
    pub arity: i32,
    /// Key positions.
    pub keys: Keys,
    /// Handler.
    pub run: Run,
}

const fn sess(name: &'static str, arity: i32, f: SessionFn) -> Spec {
    Spec { name, arity, keys: Keys::None, run: Run::Session(f) }
}

const fn data(name: &'static str, arity: i32, keys: Keys, f: DataFn) -> Spec {
    Spec { name, arity, keys, run: Run::Data(f) }
}

use Keys::{All, First, Global, Pairs};

static COMMANDS: &[Spec] = &[
    // connection
    sess("ping", -1, c::ping),
    sess("echo", 2, c::echo),
    sess("hello", -1, c::hello),
    sess("auth", -2, c::auth),
    sess("select", 2, c::select),
    sess("quit", -1, c::quit),
    sess("reset", 1, c::reset),
    sess("client", -2, c::client),
    // server
    sess("config", -2, s::config),
    sess("info", -1, s::info),
    sess("dbsize", 1, s::dbsize),
    sess("command", -1, s::command),
    sess("time", 1, s::time),
    sess("save", 1, s::save),
    sess("bgsave", -1, s::bgsave),
    sess("lastsave", 1, s::lastsave),
    sess("shutdown", -1, s::shutdown),
    sess("function", -2, sc::function),
    sess("script", -2, sc::script),
    data("eval", -3, Global, sc::eval),
    data("evalsha", -3, Global, sc::evalsha),
    data("eval_ro", -3, Global, sc::eval_ro),
    data("evalsha_ro", -3, Global, sc::evalsha_ro),
    data("fcall", -3, Global, sc::fcall),
    data("fcall_ro", -3, Global, sc::fcall_ro),
    data("flushdb", -1, Global, s::flushdb),
    data("flushall", -1, Global, s::flushall),
    data("swapdb", 3, Global, rn::swapdb),
    // keys
    data("del", -2, All, k::del),
    data("unlink", -2, All, k::del),
    data("exists", -2, All, k::exists),
    data("type", 2, First, k::type_),
    data("scan", -2, Keys::None, k::scan),
    data("sort", -2, Global, so::sort),
    data("sort_ro", -2, Global, so::sort_ro),
    data("keys", 2, Keys::None, k::keys),
    data("expire", -3, First, k::expire),
    data("pexpire", -3, First, k::pexpire),
    data("expireat", -3, First, k::expireat),
    data("pexpireat", -3, First, k::pexpireat),
    data("ttl", 2, First, k::ttl),
    data("pttl", 2, First, k::pttl),
    data("persist", 2, First, k::persist),
    data("expiretime", 2, First, k::expiretime),
    data("pexpiretime", 2, First, k::pexpiretime),
    data("object", -2, All, o::object),
    data("memory", -2, All, m::memory),
    data("rename", 3, All, rn::rename),
    data("renamenx", 3, All, rn::renamenx),
    data("copy", -3, All, rn::copy),
    data("dump", 2, First, du::dump),
    data("restore", -4, First, du::restore),
    data("move", 3, First, rn::move_),
    data("randomkey", 1, Keys::None, rn::randomkey),
    data("sscan", -3, First, cs::sscan),
    data("hscan", -3, First, cs::hscan),
    data("zscan", -3, First, cs::zscan),
    // strings
    data("get", 2, First, str_::get),
    data("set", -3, First, str_::set),
    data("setnx", 3, First, str_::setnx),
    data("setex", 4, First, str_::setex),
    data("psetex", 4, First, str_::psetex),
    data("getset", 3, First, str_::getset),
    data("getdel", 2, First, str_::getdel),
    data("mget", -2, All, str_::mget),
    data("mset", -3, Pairs, str_::mset),
    data("msetnx", -3, Pairs, str_::msetnx),
    data("incr", 2, First, str_::incr),
    data("decr", 2, First, str_::decr),
    data("incrby", 3, First, str_::incrby),
    data("decrby", 3, First, str_::decrby),
    data("append", 3, First, str_::append),
    data("strlen", 2, First, str_::strlen),
    data("incrbyfloat", 3, First, str_::incrbyfloat),
    data("getex", -2, First, str_::getex),
    data("getrange", 4, First, str_::getrange),
    data("lcs", -3, All, lcs::lcs),
    data("setrange", 4, First, str_::setrange),
    data("setbit", 4, First, b::setbit),
    data("getbit", 3, First, b::getbit),
    data("bitcount", -2, First, b::bitcount),
    data("bitpos", -3, First, b::bitpos),
    data("bitop", -4, All, b::bitop),
    data("bitfield", -2, First, bf::bitfield),
    data("bitfield_ro", -2, First, bf::bitfield_ro),
    // hashes
    data("hset", -4, First, h::hset),
    data("hmset", -4, First, h::hmset),
    data("hsetnx", 4, First, h::hsetnx),
    data("hget", 3, First, h::hget),
    data("hmget", -3, First, h::hmget),
    data("hgetall", 2, First, h::hgetall),
    data("hkeys", 2, First, h::hkeys),
    data("hvals", 2, First, h::hvals),
    data("hdel", -3, First, h::hdel),
    data("hrandfield", -2, First, rnd::hrandfield),
    data("hexists", 3, First, h::hexists),
    data("hlen", 2, First, h::hlen),
    data("hincrby", 4, First, h::hincrby),
    data("hincrbyfloat", 4, First, h::hincrbyfloat),
    data("hstrlen", 3, First, h::hstrlen),
    // sorted sets
    data("zadd", -4, First, z::zadd),
    data("zrem", -3, First, z::zrem),
    data("zcard", 2, First, z::zcard),
    data("zscore", 3, First, z::zscore),
    data("zincrby", 4, First, z::zincrby),
    data("zrangebyscore", -4, First, z::zrangebyscore),
    data("zcount", 4, First, z::zcount),
    data("zrange", -4, First, zr::zrange),
    data("zrangestore", -5, All, zr::zrangestore),
    data("zmscore", -3, First, zm::zmscore),
    data("zremrangebyrank", 4, First, zm::zremrangebyrank),
    data("zremrangebyscore", 4, First, zm::zremrangebyscore),
    data("zremrangebylex", 4, First, zm::zremrangebylex),
    data("zintercard", -3, All, zm::zintercard),
    data("zrandmember", -2, First, rnd::zrandmember),
    data("zrevrange", -4, First, z::zrevrange),
    data("zrevrangebyscore", -4, First, z::zrevrangebyscore),
    data("zrank", 3, First, z::zrank),
    data("zrevrank", 3, First, z::zrevrank),
    data("zpopmin", -2, First, zp::zpopmin),
    data("zrangebylex", -4, First, zl::zrangebylex),
    data("zrevrangebylex", -4, First, zl::zrevrangebylex),
    data("zlexcount", 4, First, zl::zlexcount),
    data("zpopmax", -2, First, zp::zpopmax),
    data("zmpop", -4, All, zp::zmpop),
    data("bzpopmin", -3, All, zp::bzpopmin),
    data("bzpopmax", -3, All, zp::bzpopmax),
    data("bzmpop", -5, All, zp::bzmpop),
    data("zunion", -3, All, za::zunion),
    data("zinter", -3, All, za::zinter),
    data("zdiff", -3, All, za::zdiff),
    data("zunionstore", -4, All, za::zunionstore),
    data("zinterstore", -4, All, za::zinterstore),
    data("zdiffstore", -4, All, za::zdiffstore),
    // lists
    data("lpush", -3, First, l::lpush),
    data("rpush", -3, First, l::rpush),
    data("lpushx", -3, First, l::lpushx),
    data("rpushx", -3, First, l::rpushx),
    data("lpop", -2, First, l::lpop),
    data("rpop", -2, First, l::rpop),
    data("lrange", 4, First, l::lrange),
    data("llen", 2, First, l::llen),
    data("lindex", 3, First, l::lindex),
    data("lset", 4, First, l::lset),
    data("ltrim", 4, First, l::ltrim),
    data("linsert", 5, First, le::linsert),
    data("blpop", -3, All, bl::blpop),
    data("brpop", -3, All, bl::brpop),
    data("blmove", 6, All, bl::blmove),
    data("brpoplpush", 4, All, bl::brpoplpush),
    data("blmpop", -5, All, bl::blmpop),
    data("lmpop", -4, All, bl::lmpop),
    data("lrem", 4, First, le::lrem),
    data("lpos", -3, First, le::lpos),
    data("lmove", 5, All, le::lmove),
    data("rpoplpush", 3, All, le::rpoplpush),
    // sets
    data("sadd", -3, First, st::sadd),
    data("srem", -3, First, st::srem),
    data("srandmember", -2, First, rnd::srandmember),
    data("spop", -2, First, st::spop),
    data("scard", 2, First, st::scard),
    data("smembers", 2, First, st::smembers),
    data("sismember", 3, First, st::sismember),
    data("smismember", -3, First, st::smismember),
    data("sinter", -2, All, st::sinter),
    data("sunion", -2, All, st::sunion),
    data("sdiff", -2, All, st::sdiff),
    data("smove", 4, All, ss::smove),
    data("sinterstore", -3, All, ss::sinterstore),
    data("sunionstore", -3, All, ss::sunionstore),
    data("sdiffstore", -3, All, ss::sdiffstore),
    data("sintercard", -3, All, ss::sintercard),
    // pub/sub
    sess("subscribe", -2, ps::subscribe),
    sess("unsubscribe", -1, ps::unsubscribe),
    sess("psubscribe", -2, ps::psubscribe),
    sess("punsubscribe", -1, ps::punsubscribe),
    sess("ssubscribe", -2, ps::ssubscribe),
    sess("sunsubscribe", -1, ps::sunsubscribe),
    sess("publish", 3, ps::publish),
    sess("spublish", 3, ps::spublish),
    sess("pubsub", -2, ps::pubsub),
    // transactions
    sess("multi", 1, t::multi),
    sess("exec", 1, t::exec),
    sess("discard", 1, t::discard),
    sess("watch", -2, t::watch),
    sess("unwatch", 1, t::unwatch),
];

/// Number of commands in the table (COMMAND COUNT).
pub fn count() -> usize {
    COMMANDS.len()
}

/// The spec of command `name` (any case).
pub fn lookup(name: &[u8]) -> Option<&'static Spec> {
    lookup_id(name).map(|(_, s)| s)
}

/// The spec of command `name` (any case) and its place in the table (the
/// index of its INFO commandstats counters).
pub fn lookup_id(name: &[u8]) -> Option<(usize, &'static Spec)> {
    static INDEX: OnceLock<HashMap<&'static [u8], usize>> = OnceLock::new();
    let index = INDEX.get_or_init(|| COMMANDS.iter().enumerate().map(|(i, s)| (s.name.as_bytes(), i)).collect());
    // Lower-case into a stack buffer: no allocation per request.
    let mut buf = [0u8; 32];
    let lower = buf.get_mut(..name.len())?;
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    let id = *index.get(&*lower)?;
    Some((id, COMMANDS.get(id)?))
}

/// The name of the command at `id` in the table.
pub fn name_of(id: usize) -> Option<&'static str> {
    COMMANDS.get(id).map(|s| s.name)
}
