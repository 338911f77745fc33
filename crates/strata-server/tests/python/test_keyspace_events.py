"""Keyspace notifications, command by command, against redis-server 7.0's.

Each write command strata-server implements runs the same small scenario on
a strata-server and on a real redis-server (7.0, from $PATH): FLUSHALL, the
set-up commands, then the command itself in a few argument variants where the
events depend on them. Both servers have `notify-keyspace-events KEA`; a
`PSUBSCRIBE __key*__:*` connection on each records the (channel, message)
pairs published, and the sequences must be equal, in order.

No phase waits on a sleep: every phase (set-up, command) ends with a marker
key of its own set in db 15 from another connection, and the events of the
phase are those read before the marker's. The set-up's events are dropped.

One test per command (the id names it), with every variant of that command
checked and the differing ones listed in the failure. A second test checks
that every write command of the command table has a scenario here.

KEYSPACE_EVENTS_SUBJECT=redis puts redis-server on the strata side too: both
sides are then redis-server, which shows the scenarios are deterministic.
"""
import hashlib
import json
import os
import re
import threading
import time
from pathlib import Path

import pytest
import redis

from conftest import RedisServer, Server

PATTERN = "__key*__:*"
MARK_DB = 15
MARK_PREFIX = "__mark__:"
SUBJECT_IS_REDIS = os.environ.get("KEYSPACE_EVENTS_SUBJECT", "").lower() == "redis"

HERE = Path(__file__).resolve().parent
CRATE = HERE.parents[1]
FIXTURE = CRATE / "tests" / "fixtures" / "redis-7.0-commands.json"


# --------------------------------------------------------------------------
# One side of the comparison: a server, its subscriber and its marker client


def text(b):
    if isinstance(b, bytes):
        return b.decode("utf-8", errors="backslashreplace")
    return str(b)


class Conn:
    """A raw RESP2 connection: replies as parsed, no redis-py callbacks."""

    def __init__(self, port, timeout=30):
        self.c = redis.Connection(host="127.0.0.1", port=port, socket_timeout=timeout)

    def call(self, *args):
        self.c.send_command(*args)
        return self.c.read_response()

    def close(self):
        self.c.disconnect()


class Side:
    def __init__(self, name, server):
        self.name = name
        self.server = server
        self.port = server.port
        self.actor = None
        self.marker = Conn(self.port)
        self.marker.call("CONFIG", "SET", "notify-keyspace-events", "KEA")
        self.marker.call("SELECT", MARK_DB)
        self.sub = redis.Redis(host="127.0.0.1", port=self.port, protocol=2, socket_timeout=30).pubsub()
        self.sub.psubscribe(PATTERN)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            m = self.sub.get_message(timeout=1)
            if m and m["type"] == "psubscribe":
                break
        else:
            raise RuntimeError(f"{name}: no PSUBSCRIBE confirmation")
        self.n = 0

    def close(self):
        self.sub.close()
        self.marker.close()

    def sync(self, timeout=10.0):
        """Sets a fresh marker key in db 15 and returns the (channel,
        message) pairs published before the marker's own events."""
        self.n += 1
        key = f"{MARK_PREFIX}{self.n}"
        self.marker.call("SET", key, "1")
        events = []
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                events.append(("<marker never arrived>", key))
                return events
            m = self.sub.get_message(timeout=min(left, 1.0))
            if not m or m["type"] != "pmessage":
                continue
            ch, data = text(m["channel"]), text(m["data"])
            mark = None
            if ch.startswith(f"__keyspace@{MARK_DB}__:{MARK_PREFIX}"):
                mark = ch.split(":", 1)[1]
            elif ch.startswith(f"__keyevent@{MARK_DB}__:") and data.startswith(MARK_PREFIX):
                mark = data
            if mark is None:
                events.append((ch, data))
            elif mark == key:
                return events
            # else: the second event of an earlier marker; not the phase's

    def blocked_clients(self):
        info = text(self.actor.call("INFO", "clients"))
        m = re.search(r"blocked_clients:(\d+)", info)
        return int(m.group(1)) if m else 0


def do(side, cmd):
    """Runs one step: a command tuple on the actor, or an Action."""
    try:
        if isinstance(cmd, Action):
            return cmd.fn(side)
        return side.actor.call(*cmd)
    except redis.ResponseError as e:
        return f"(error) {e}"


def run_variant(side, v):
    """FLUSHALL, set-up, marker; the actions, marker. Returns the actions'
    events, their replies, and the set-up steps that failed."""
    side.actor = Conn(side.port)
    try:
        side.actor.call("FLUSHALL")
        setup_errors = []
        for cmd in v.setup:
            r = do(side, cmd)
            if isinstance(r, str) and r.startswith("(error)"):
                setup_errors.append((cmd, r))
        side.sync()
        replies = [do(side, a) for a in v.actions]
        events = side.sync()
        return events, replies, setup_errors
    finally:
        side.actor.close()
        side.actor = None


# --------------------------------------------------------------------------
# Scenarios


class Action:
    """A step that is not a plain command (DUMP then RESTORE, a blocked
    client woken by a push, a pause)."""

    def __init__(self, desc, fn):
        self.desc = desc
        self.fn = fn

    def __repr__(self):
        return self.desc


def pause(seconds):
    return Action(f"<sleep {seconds}>", lambda side: time.sleep(seconds))


def dump_restore(src, dst, ttl="0", *opts):
    def fn(side):
        payload = side.actor.call("DUMP", src)
        return side.actor.call("RESTORE", dst, ttl, payload, *opts)
    return Action(f"RESTORE {dst} {ttl} <DUMP {src}> {' '.join(opts)}".rstrip(), fn)


def wake(block, *pushes):
    """`block` on a client of its own (it must block), then `pushes` on the
    actor; done once the blocked client has its reply."""
    def fn(side):
        c = Conn(side.port, timeout=30)
        out = {}

        def blocked():
            try:
                out["reply"] = c.call(*block)
            except Exception as e:  # noqa: BLE001 - reported as the reply
                out["reply"] = f"(error) {e}"
        t = threading.Thread(target=blocked, daemon=True)
        t.start()
        deadline = time.monotonic() + 10
        while side.blocked_clients() < 1:
            if time.monotonic() > deadline or not t.is_alive():
                t.join(30)
                c.close()
                return ["(not blocked)", out.get("reply")]
            time.sleep(0.01)
        replies = [do(side, p) for p in pushes]
        t.join(30)
        c.close()
        return [replies, out.get("reply", "(no reply)")]
    desc = " ".join(map(str, block)) + " <- " + "; ".join(" ".join(map(str, p)) for p in pushes)
    return Action(f"<{desc}>", fn)


class V:
    """One variant: a label, set-up commands, the commands under test."""

    def __init__(self, label, setup, *actions):
        self.label = label
        self.setup = [tuple(map(str, c)) if not isinstance(c, Action) else c for c in setup]
        self.actions = [tuple(map(str, a)) if not isinstance(a, Action) else a for a in actions]

    def describe(self):
        return "; ".join(a.desc if isinstance(a, Action) else " ".join(a) for a in self.actions)


LIST3 = [("RPUSH", "l", "a", "b", "c")]
SET3 = [("SADD", "s", "a", "b", "c")]
ZSET3 = [("ZADD", "z", 1, "a", 2, "b", 3, "c")]
HASH2 = [("HSET", "h", "f1", "1", "f2", "2")]


def IN_DB1(*cmds):  # noqa: N802 - reads as the constants around it
    return [("SELECT", 1), *cmds, ("SELECT", 0)]


SCRIPT = ("redis.call('set', KEYS[1], ARGV[1]); redis.call('lpush', KEYS[2], 'x'); "
          "redis.call('expire', KEYS[1], 100); redis.call('del', KEYS[1]); return 1")
LIBRARY = ("#!lua name=evlib\n"
           "redis.register_function('evf', function(keys, args) "
           "redis.call('set', keys[1], args[1]); redis.call('rpush', keys[2], 'y'); return 1 end)")


def _sha1(s):
    return hashlib.sha1(s.encode()).hexdigest()


SCENARIOS = {
    # ---- generic
    "del": [
        V("one", [("SET", "a", 1)], ("DEL", "a")),
        V("several, one missing", [("SET", "a", 1), ("RPUSH", "b", "x"), ("SADD", "d", "m")],
          ("DEL", "a", "c", "b", "d")),
        V("missing", [], ("DEL", "nope")),
    ],
    "unlink": [
        V("several, one missing", [("SET", "a", 1), ("HSET", "b", "f", "v")], ("UNLINK", "b", "c", "a")),
    ],
    "expire": [
        V("future", [("SET", "k", "v")], ("EXPIRE", "k", 100)),
        V("into the past", [("SET", "k", "v")], ("EXPIRE", "k", -1)),
        V("zero", [("RPUSH", "k", "v")], ("EXPIRE", "k", 0)),
        V("missing key", [], ("EXPIRE", "k", 100)),
        V("NX on a volatile key", [("SET", "k", "v", "EX", 100)], ("EXPIRE", "k", 200, "NX")),
        V("XX on a volatile key", [("SET", "k", "v", "EX", 100)], ("EXPIRE", "k", 200, "XX")),
        V("GT on a persistent key", [("SET", "k", "v")], ("EXPIRE", "k", 200, "GT")),
        V("LT on a persistent key", [("SET", "k", "v")], ("EXPIRE", "k", 200, "LT")),
    ],
    "pexpire": [
        V("future", [("SET", "k", "v")], ("PEXPIRE", "k", 100000)),
        V("into the past", [("SADD", "k", "m")], ("PEXPIRE", "k", -5)),
    ],
    "expireat": [
        V("future", [("SET", "k", "v")], ("EXPIREAT", "k", 4102444800)),
        V("into the past", [("SET", "k", "v")], ("EXPIREAT", "k", 1)),
    ],
    "pexpireat": [
        V("future", [("SET", "k", "v")], ("PEXPIREAT", "k", 4102444800000)),
        V("into the past", [("ZADD", "k", 1, "m")], ("PEXPIREAT", "k", 1)),
    ],
    "persist": [
        V("volatile", [("SET", "k", "v", "EX", 100)], ("PERSIST", "k")),
        V("persistent", [("SET", "k", "v")], ("PERSIST", "k")),
        V("missing", [], ("PERSIST", "k")),
    ],
    "rename": [
        V("to a new name", [("SET", "a", 1)], ("RENAME", "a", "b")),
        V("onto an existing key", [("SET", "a", 1), ("RPUSH", "b", "x")], ("RENAME", "a", "b")),
        V("volatile hash", [("HSET", "a", "f", "v"), ("EXPIRE", "a", 100)], ("RENAME", "a", "b")),
        V("to itself", [("SET", "a", 1)], ("RENAME", "a", "a")),
        V("missing source", [], ("RENAME", "a", "b")),
    ],
    "renamenx": [
        V("to a new name", [("SET", "a", 1)], ("RENAMENX", "a", "b")),
        V("destination exists", [("SET", "a", 1), ("SET", "b", 2)], ("RENAMENX", "a", "b")),
    ],
    "copy": [
        V("to a new key", [("SET", "a", 1)], ("COPY", "a", "b")),
        V("destination exists", [("SET", "a", 1), ("SET", "b", 2)], ("COPY", "a", "b")),
        V("REPLACE", [("SADD", "a", "m"), ("SET", "b", 2)], ("COPY", "a", "b", "REPLACE")),
        V("to db 1", [("ZADD", "a", 1, "m")], ("COPY", "a", "b", "DB", 1)),
        V("missing source", [], ("COPY", "a", "b")),
    ],
    "restore": [
        V("new key", [("SET", "src", "v")], dump_restore("src", "dst")),
        V("with a ttl", [("RPUSH", "src", "a", "b")], dump_restore("src", "dst", "100000")),
        V("REPLACE", [("SADD", "src", "m"), ("SET", "dst", "old")], dump_restore("src", "dst", "0", "REPLACE")),
        V("ABSTTL in the past", [("SET", "src", "v")], dump_restore("src", "dst", "1", "ABSTTL")),
        V("BUSYKEY", [("SET", "src", "v"), ("SET", "dst", "old")], dump_restore("src", "dst")),
    ],
    "move": [
        V("to db 1", [("SET", "k", "v")], ("MOVE", "k", 1)),
        V("volatile list to db 1", [("RPUSH", "k", "a"), ("EXPIRE", "k", 100)], ("MOVE", "k", 1)),
        V("exists in db 1", [*IN_DB1(("SET", "k", "other")), ("SET", "k", "v")], ("MOVE", "k", 1)),
        V("missing", [], ("MOVE", "k", 1)),
    ],
    "sort": [
        V("STORE", [("RPUSH", "src", 3, 1, 2)], ("SORT", "src", "STORE", "dst")),
        V("ALPHA DESC STORE over a set", [("SADD", "src", "b", "a"), ("SET", "dst", "x")],
          ("SORT", "src", "ALPHA", "DESC", "STORE", "dst")),
        V("empty result STORE", [("SET", "dst", "x")], ("SORT", "missing", "STORE", "dst")),
        V("no STORE", [("RPUSH", "src", 3, 1, 2)], ("SORT", "src")),
    ],
    "flushdb": [
        V("keys in db 0 and 1", [("SET", "a", 1), *IN_DB1(("SET", "b", 2))], ("FLUSHDB",)),
        V("ASYNC", [("SET", "a", 1)], ("FLUSHDB", "ASYNC")),
    ],
    "flushall": [
        V("keys in db 0 and 1", [("SET", "a", 1), *IN_DB1(("SET", "b", 2))], ("FLUSHALL",)),
    ],
    "swapdb": [
        V("0 and 1", [("SET", "a", 1), *IN_DB1(("SET", "b", 2))], ("SWAPDB", 0, 1)),
    ],
    # ---- strings
    "set": [
        V("new", [], ("SET", "k", "v")),
        V("overwrite", [("SET", "k", "v")], ("SET", "k", "w")),
        V("overwrite a list", [("RPUSH", "k", "a")], ("SET", "k", "w")),
        V("EX", [], ("SET", "k", "v", "EX", 100)),
        V("PX over a volatile key", [("SET", "k", "v", "EX", 100)], ("SET", "k", "w", "PX", 5000)),
        V("plain over a volatile key", [("SET", "k", "v", "EX", 100)], ("SET", "k", "w")),
        V("KEEPTTL", [("SET", "k", "v", "EX", 100)], ("SET", "k", "w", "KEEPTTL")),
        V("NX, key exists", [("SET", "k", "v")], ("SET", "k", "w", "NX")),
        V("XX, key missing", [], ("SET", "k", "w", "XX")),
        V("GET", [("SET", "k", "v")], ("SET", "k", "w", "GET")),
        V("PXAT in the past", [], ("SET", "k", "v", "PXAT", 1)),
        V("EX 0 (error)", [], ("SET", "k", "v", "EX", 0)),
    ],
    "setnx": [
        V("new", [], ("SETNX", "k", "v")),
        V("exists", [("SET", "k", "v")], ("SETNX", "k", "w")),
    ],
    "setex": [
        V("new", [], ("SETEX", "k", 100, "v")),
        V("bad ttl", [], ("SETEX", "k", 0, "v")),
    ],
    "psetex": [
        V("new", [], ("PSETEX", "k", 100000, "v")),
    ],
    "getset": [
        V("exists", [("SET", "k", "v", "EX", 100)], ("GETSET", "k", "w")),
        V("missing", [], ("GETSET", "k", "w")),
    ],
    "getdel": [
        V("exists", [("SET", "k", "v")], ("GETDEL", "k")),
        V("missing", [], ("GETDEL", "k")),
    ],
    "getex": [
        V("EX", [("SET", "k", "v")], ("GETEX", "k", "EX", 100)),
        V("PERSIST, volatile", [("SET", "k", "v", "EX", 100)], ("GETEX", "k", "PERSIST")),
        V("PERSIST, persistent", [("SET", "k", "v")], ("GETEX", "k", "PERSIST")),
        V("no option", [("SET", "k", "v", "EX", 100)], ("GETEX", "k")),
        V("PXAT in the past", [("SET", "k", "v")], ("GETEX", "k", "PXAT", 1)),
        V("missing", [], ("GETEX", "k", "EX", 100)),
    ],
    "mset": [
        V("two keys, one existing", [("SET", "b", 0)], ("MSET", "a", 1, "b", 2)),
        V("same key twice", [], ("MSET", "a", 1, "a", 2)),
    ],
    "msetnx": [
        V("all new", [], ("MSETNX", "a", 1, "b", 2)),
        V("one exists", [("SET", "b", 0)], ("MSETNX", "a", 1, "b", 2)),
    ],
    "incr": [
        V("missing", [], ("INCR", "k")),
        V("exists", [("SET", "k", 5)], ("INCR", "k")),
        V("not an integer", [("SET", "k", "x")], ("INCR", "k")),
    ],
    "decr": [
        V("missing", [], ("DECR", "k")),
        V("exists", [("SET", "k", 5)], ("DECR", "k")),
    ],
    "incrby": [
        V("exists", [("SET", "k", 5)], ("INCRBY", "k", 10)),
        V("by zero", [("SET", "k", 5)], ("INCRBY", "k", 0)),
    ],
    "decrby": [
        V("missing", [], ("DECRBY", "k", 3)),
    ],
    "incrbyfloat": [
        V("missing", [], ("INCRBYFLOAT", "k", "1.5")),
        V("exists", [("SET", "k", 1)], ("INCRBYFLOAT", "k", "0.25")),
    ],
    "append": [
        V("missing", [], ("APPEND", "k", "ab")),
        V("exists", [("SET", "k", "x")], ("APPEND", "k", "ab")),
        V("empty suffix", [("SET", "k", "x")], ("APPEND", "k", "")),
    ],
    "setrange": [
        V("exists", [("SET", "k", "hello")], ("SETRANGE", "k", 1, "EY")),
        V("missing", [], ("SETRANGE", "k", 3, "x")),
        V("missing, empty value", [], ("SETRANGE", "k", 3, "")),
        V("exists, empty value", [("SET", "k", "hello")], ("SETRANGE", "k", 1, "")),
    ],
    "setbit": [
        V("missing", [], ("SETBIT", "k", 7, 1)),
        V("unchanged bit", [("SET", "k", "\x00")], ("SETBIT", "k", 0, 0)),
    ],
    "bitop": [
        V("AND into a new key", [("SET", "a", "ab"), ("SET", "b", "cd")], ("BITOP", "AND", "dst", "a", "b")),
        V("NOT over an existing key", [("SET", "a", "ab"), ("SET", "dst", "x")], ("BITOP", "NOT", "dst", "a")),
        V("empty result deletes", [("SET", "dst", "x")], ("BITOP", "OR", "dst", "a", "b")),
        V("empty result, no destination", [], ("BITOP", "OR", "dst", "a", "b")),
    ],
    "bitfield": [
        V("SET", [], ("BITFIELD", "k", "SET", "u8", 0, 255)),
        V("INCRBY", [("SET", "k", "a")], ("BITFIELD", "k", "INCRBY", "u8", 0, 1)),
        V("GET only", [("SET", "k", "a")], ("BITFIELD", "k", "GET", "u8", 0)),
        V("OVERFLOW FAIL", [("SET", "k", "\xff")], ("BITFIELD", "k", "OVERFLOW", "FAIL", "INCRBY", "u8", 0, 10)),
    ],
    # ---- hashes
    "hset": [
        V("new hash", [], ("HSET", "h", "f", "v")),
        V("update a field", HASH2, ("HSET", "h", "f1", "x", "f3", "y")),
    ],
    "hmset": [
        V("new hash", [], ("HMSET", "h", "f", "v", "g", "w")),
    ],
    "hsetnx": [
        V("new field", HASH2, ("HSETNX", "h", "f3", "v")),
        V("existing field", HASH2, ("HSETNX", "h", "f1", "v")),
    ],
    "hdel": [
        V("one field", HASH2, ("HDEL", "h", "f1")),
        V("every field", HASH2, ("HDEL", "h", "f1", "f2", "f9")),
        V("missing field", HASH2, ("HDEL", "h", "f9")),
    ],
    "hincrby": [
        V("missing key", [], ("HINCRBY", "h", "f", 3)),
        V("existing field", HASH2, ("HINCRBY", "h", "f1", 3)),
    ],
    "hincrbyfloat": [
        V("missing key", [], ("HINCRBYFLOAT", "h", "f", "1.5")),
        V("existing field", HASH2, ("HINCRBYFLOAT", "h", "f1", "0.5")),
    ],
    # ---- sorted sets
    "zadd": [
        V("new", [], ("ZADD", "z", 1, "a")),
        V("new member and updated score", ZSET3, ("ZADD", "z", 9, "a", 4, "d")),
        V("same score", ZSET3, ("ZADD", "z", 1, "a")),
        V("INCR", ZSET3, ("ZADD", "z", "INCR", 5, "a")),
        V("NX, member exists", ZSET3, ("ZADD", "z", "NX", 5, "a")),
        V("XX, member missing", ZSET3, ("ZADD", "z", "XX", 5, "q")),
        V("GT CH, lower score", ZSET3, ("ZADD", "z", "GT", "CH", 0, "c")),
        V("XX on a missing key", [], ("ZADD", "z", "XX", 1, "a")),
    ],
    "zrem": [
        V("one", ZSET3, ("ZREM", "z", "a")),
        V("all", ZSET3, ("ZREM", "z", "a", "b", "c")),
        V("none", ZSET3, ("ZREM", "z", "q")),
    ],
    "zincrby": [
        V("existing", ZSET3, ("ZINCRBY", "z", 2, "a")),
        V("missing key", [], ("ZINCRBY", "z", 2, "a")),
    ],
    "zrangestore": [
        V("by rank", ZSET3, ("ZRANGESTORE", "dst", "z", 0, 1)),
        V("BYSCORE REV LIMIT", ZSET3, ("ZRANGESTORE", "dst", "z", "(3", 0, "BYSCORE", "REV", "LIMIT", 0, 1)),
        V("empty result over a key", [*ZSET3, ("SET", "dst", "x")], ("ZRANGESTORE", "dst", "z", 10, 20)),
        V("empty result, no destination", ZSET3, ("ZRANGESTORE", "dst", "z", 10, 20)),
    ],
    "zremrangebyrank": [
        V("some", ZSET3, ("ZREMRANGEBYRANK", "z", 0, 0)),
        V("all", ZSET3, ("ZREMRANGEBYRANK", "z", 0, -1)),
        V("none", ZSET3, ("ZREMRANGEBYRANK", "z", 5, 9)),
    ],
    "zremrangebyscore": [
        V("some", ZSET3, ("ZREMRANGEBYSCORE", "z", "-inf", "(2")),
        V("all", ZSET3, ("ZREMRANGEBYSCORE", "z", "-inf", "+inf")),
        V("none", ZSET3, ("ZREMRANGEBYSCORE", "z", 10, 20)),
    ],
    "zremrangebylex": [
        V("some", [("ZADD", "z", 0, "a", 0, "b", 0, "c")], ("ZREMRANGEBYLEX", "z", "[a", "(c")),
        V("all", [("ZADD", "z", 0, "a", 0, "b")], ("ZREMRANGEBYLEX", "z", "-", "+")),
        V("none", [("ZADD", "z", 0, "a")], ("ZREMRANGEBYLEX", "z", "[x", "[z")),
    ],
    "zpopmin": [
        V("one", ZSET3, ("ZPOPMIN", "z")),
        V("all", ZSET3, ("ZPOPMIN", "z", 10)),
        V("missing", [], ("ZPOPMIN", "z")),
    ],
    "zpopmax": [
        V("two", ZSET3, ("ZPOPMAX", "z", 2)),
        V("last one", [("ZADD", "z", 1, "a")], ("ZPOPMAX", "z")),
    ],
    "zmpop": [
        V("MIN, second key", [("ZADD", "z2", 1, "a", 2, "b")], ("ZMPOP", 2, "z1", "z2", "MIN")),
        V("MAX COUNT empties", [("ZADD", "z2", 1, "a", 2, "b")], ("ZMPOP", 2, "z1", "z2", "MAX", "COUNT", 10)),
        V("none", [], ("ZMPOP", 2, "z1", "z2", "MIN")),
    ],
    "bzpopmin": [
        V("second key", [("ZADD", "z2", 1, "a", 2, "b")], ("BZPOPMIN", "z1", "z2", 1)),
        V("woken by ZADD", [], wake(("BZPOPMIN", "z", 5), ("ZADD", "z", 1, "a", 2, "b"))),
    ],
    "bzpopmax": [
        V("last member", [("ZADD", "z", 1, "a")], ("BZPOPMAX", "z", 1)),
        V("woken by ZADD", [], wake(("BZPOPMAX", "z", 5), ("ZADD", "z", 1, "a"))),
    ],
    "bzmpop": [
        V("MAX COUNT, second key", [("ZADD", "z2", 1, "a", 2, "b", 3, "c")],
          ("BZMPOP", 1, 2, "z1", "z2", "MAX", "COUNT", 2)),
        V("MIN COUNT empties", [("ZADD", "z2", 1, "a")], ("BZMPOP", 1, 2, "z1", "z2", "MIN", "COUNT", 5)),
        V("woken by ZADD", [], wake(("BZMPOP", 5, 2, "z1", "z2", "MIN", "COUNT", 5), ("ZADD", "z2", 1, "a", 2, "b"))),
    ],
    "zunionstore": [
        V("new destination", [*ZSET3, ("ZADD", "y", 5, "q")], ("ZUNIONSTORE", "dst", 2, "z", "y")),
        V("empty result over a key", [("SET", "dst", "x")], ("ZUNIONSTORE", "dst", 2, "m1", "m2")),
    ],
    "zinterstore": [
        V("new destination", [*ZSET3, ("ZADD", "y", 5, "a")], ("ZINTERSTORE", "dst", 2, "z", "y")),
        V("empty result over a key", [*ZSET3, ("ZADD", "y", 5, "q"), ("ZADD", "dst", 1, "x")],
          ("ZINTERSTORE", "dst", 2, "z", "y")),
    ],
    "zdiffstore": [
        V("new destination", [*ZSET3, ("ZADD", "y", 5, "a")], ("ZDIFFSTORE", "dst", 2, "z", "y")),
        V("empty result over a key", [("ZADD", "y", 5, "a"), ("SET", "dst", "x")], ("ZDIFFSTORE", "dst", 2, "y", "y")),
    ],
    # ---- lists
    "lpush": [
        V("new", [], ("LPUSH", "l", "a", "b")),
        V("existing", LIST3, ("LPUSH", "l", "x")),
    ],
    "rpush": [
        V("new", [], ("RPUSH", "l", "a")),
        V("wrong type", [("SET", "l", "v")], ("RPUSH", "l", "a")),
    ],
    "lpushx": [
        V("existing", LIST3, ("LPUSHX", "l", "x")),
        V("missing", [], ("LPUSHX", "l", "x")),
    ],
    "rpushx": [
        V("existing", LIST3, ("RPUSHX", "l", "x", "y")),
        V("missing", [], ("RPUSHX", "l", "x")),
    ],
    "lpop": [
        V("one", LIST3, ("LPOP", "l")),
        V("COUNT empties", LIST3, ("LPOP", "l", 10)),
        V("COUNT 0", LIST3, ("LPOP", "l", 0)),
        V("missing", [], ("LPOP", "l")),
    ],
    "rpop": [
        V("last element", [("RPUSH", "l", "a")], ("RPOP", "l")),
        V("COUNT 2", LIST3, ("RPOP", "l", 2)),
    ],
    "lset": [
        V("in range", LIST3, ("LSET", "l", 1, "x")),
        V("out of range", LIST3, ("LSET", "l", 9, "x")),
    ],
    "ltrim": [
        V("some", LIST3, ("LTRIM", "l", 0, 0)),
        V("everything", LIST3, ("LTRIM", "l", 5, 9)),
        V("nothing removed", LIST3, ("LTRIM", "l", 0, -1)),
        V("missing", [], ("LTRIM", "l", 0, 1)),
    ],
    "linsert": [
        V("pivot found", LIST3, ("LINSERT", "l", "BEFORE", "b", "x")),
        V("pivot missing", LIST3, ("LINSERT", "l", "AFTER", "q", "x")),
        V("key missing", [], ("LINSERT", "l", "AFTER", "q", "x")),
    ],
    "lrem": [
        V("some", [("RPUSH", "l", "a", "b", "a")], ("LREM", "l", 0, "a")),
        V("all", [("RPUSH", "l", "a", "a")], ("LREM", "l", 0, "a")),
        V("none", LIST3, ("LREM", "l", 0, "q")),
    ],
    "lmove": [
        V("LEFT RIGHT to a new list", LIST3, ("LMOVE", "l", "d", "LEFT", "RIGHT")),
        V("RIGHT LEFT to an existing list", [*LIST3, ("RPUSH", "d", "x")], ("LMOVE", "l", "d", "RIGHT", "LEFT")),
        V("empties the source", [("RPUSH", "l", "a")], ("LMOVE", "l", "d", "LEFT", "LEFT")),
        V("same list", LIST3, ("LMOVE", "l", "l", "LEFT", "RIGHT")),
        V("same list, one element", [("RPUSH", "l", "a")], ("LMOVE", "l", "l", "RIGHT", "RIGHT")),
        V("missing source", [], ("LMOVE", "l", "d", "LEFT", "RIGHT")),
    ],
    "rpoplpush": [
        V("to a new list", LIST3, ("RPOPLPUSH", "l", "d")),
        V("empties the source", [("RPUSH", "l", "a"), ("RPUSH", "d", "x")], ("RPOPLPUSH", "l", "d")),
    ],
    "blpop": [
        V("second key, emptied", [("RPUSH", "l2", "a")], ("BLPOP", "l1", "l2", 1)),
        V("woken by RPUSH", [], wake(("BLPOP", "l", 5), ("RPUSH", "l", "a", "b"))),
        V("woken by LPUSH of one", [], wake(("BLPOP", "l", 5), ("LPUSH", "l", "a"))),
    ],
    "brpop": [
        V("data present", LIST3, ("BRPOP", "l", 1)),
        V("woken by LPUSH", [], wake(("BRPOP", "l1", "l2", 5), ("LPUSH", "l2", "a"))),
    ],
    "blmove": [
        V("RIGHT LEFT, data present", LIST3, ("BLMOVE", "l", "d", "RIGHT", "LEFT", 1)),
        V("LEFT RIGHT, empties the source", [("RPUSH", "l", "a")], ("BLMOVE", "l", "d", "LEFT", "RIGHT", 1)),
        V("woken by RPUSH", [], wake(("BLMOVE", "l", "d", "LEFT", "RIGHT", 5), ("RPUSH", "l", "a"))),
    ],
    "brpoplpush": [
        V("data present", LIST3, ("BRPOPLPUSH", "l", "d", 1)),
        V("woken by LPUSH", [], wake(("BRPOPLPUSH", "l", "d", 5), ("LPUSH", "l", "a", "b"))),
    ],
    "blmpop": [
        V("LEFT COUNT, second key", [("RPUSH", "l2", "a", "b", "c")], ("BLMPOP", 1, 2, "l1", "l2", "LEFT", "COUNT", 2)),
        V("RIGHT COUNT empties", [("RPUSH", "l2", "a")], ("BLMPOP", 1, 2, "l1", "l2", "RIGHT", "COUNT", 2)),
        V("woken by RPUSH", [], wake(("BLMPOP", 5, 2, "l1", "l2", "RIGHT", "COUNT", 3), ("RPUSH", "l2", "a", "b"))),
    ],
    "lmpop": [
        V("LEFT, second key", [("RPUSH", "l2", "a", "b", "c")], ("LMPOP", 2, "l1", "l2", "LEFT")),
        V("RIGHT COUNT empties", [("RPUSH", "l2", "a", "b")], ("LMPOP", 2, "l1", "l2", "RIGHT", "COUNT", 10)),
        V("none", [], ("LMPOP", 2, "l1", "l2", "LEFT")),
    ],
    # ---- sets
    "sadd": [
        V("new", [], ("SADD", "s", "a", "b")),
        V("existing member", SET3, ("SADD", "s", "a")),
        V("one new member", SET3, ("SADD", "s", "a", "d")),
    ],
    "srem": [
        V("one", SET3, ("SREM", "s", "a")),
        V("all", SET3, ("SREM", "s", "a", "b", "c", "q")),
        V("none", SET3, ("SREM", "s", "q")),
    ],
    "spop": [
        V("one", SET3, ("SPOP", "s")),
        V("last member", [("SADD", "s", "a")], ("SPOP", "s")),
        V("COUNT some", SET3, ("SPOP", "s", 2)),
        V("COUNT all", SET3, ("SPOP", "s", 3)),
        V("COUNT more than all", SET3, ("SPOP", "s", 10)),
        V("COUNT 0", SET3, ("SPOP", "s", 0)),
        V("missing", [], ("SPOP", "s")),
    ],
    "smove": [
        V("to a new set", SET3, ("SMOVE", "s", "d", "a")),
        V("empties the source", [("SADD", "s", "a"), ("SADD", "d", "x")], ("SMOVE", "s", "d", "a")),
        V("member already in the destination", [*SET3, ("SADD", "d", "a")], ("SMOVE", "s", "d", "a")),
        V("member missing", SET3, ("SMOVE", "s", "d", "q")),
        V("same set", SET3, ("SMOVE", "s", "s", "a")),
    ],
    "sinterstore": [
        V("new destination", [*SET3, ("SADD", "t", "a", "z")], ("SINTERSTORE", "dst", "s", "t")),
        V("empty result over a key", [*SET3, ("SADD", "t", "z"), ("SET", "dst", "x")],
          ("SINTERSTORE", "dst", "s", "t")),
        V("empty result, no destination", [], ("SINTERSTORE", "dst", "s", "t")),
    ],
    "sunionstore": [
        V("new destination", [*SET3, ("SADD", "t", "a", "z")], ("SUNIONSTORE", "dst", "s", "t")),
        V("empty result over a key", [("SET", "dst", "x")], ("SUNIONSTORE", "dst", "s", "t")),
    ],
    "sdiffstore": [
        V("new destination", [*SET3, ("SADD", "t", "a")], ("SDIFFSTORE", "dst", "s", "t")),
        V("empty result over a key", [*SET3, ("SADD", "dst", "x")], ("SDIFFSTORE", "dst", "s", "s")),
    ],
    # ---- not flagged `write` by Redis, but they write
    "eval": [
        V("script writes", [], ("EVAL", SCRIPT, 2, "a", "b", "v")),
    ],
    "evalsha": [
        V("script writes", [("SCRIPT", "LOAD", SCRIPT)], ("EVALSHA", _sha1(SCRIPT), 2, "a", "b", "v")),
    ],
    "fcall": [
        V("function writes", [("FUNCTION", "LOAD", "REPLACE", LIBRARY)], ("FCALL", "evf", 2, "a", "b", "v")),
    ],
    "multi": [
        V("MULTI/EXEC", [("SET", "c", 1)],
          ("MULTI",), ("SET", "a", 1), ("INCR", "c"), ("LPUSH", "l", "x"), ("DEL", "c"), ("EXEC",)),
        V("MULTI/DISCARD", [], ("MULTI",), ("SET", "a", 1), ("DISCARD",)),
    ],
    # Redis publishes `expired` at the latest when a read finds the key
    # expired (or earlier, from its active expiry cycle): either way it is
    # out before the read's reply. The pause is short, so that a server
    # publishing it only from a periodic cycle is caught on most runs.
    "expired": [
        V("PX 1, then GET", [], ("SET", "k", "v", "PX", 1), pause(0.005), ("GET", "k")),
        V("PEXPIRE 1 on a hash, then HGET", [("HSET", "h", "f", "v")],
          ("PEXPIRE", "h", 1), pause(0.005), ("HGET", "h", "f")),
        V("PEXPIRE 1 on a set, then EXISTS", [("SADD", "s", "m")],
          ("PEXPIRE", "s", 1), pause(0.005), ("EXISTS", "s")),
    ],
}

# Commands whose scenarios publish nothing on redis-server 7.0 either.
QUIET = {"flushdb", "flushall", "swapdb"}


# --------------------------------------------------------------------------
# Fixtures


@pytest.fixture(scope="module")
def peer():
    srv = RedisServer().start()
    side = Side("redis-server", srv)
    yield side
    side.close()
    srv.stop()


@pytest.fixture(scope="module")
def subject():
    srv = RedisServer().start() if SUBJECT_IS_REDIS else Server().start()
    side = Side("redis-server (as subject)" if SUBJECT_IS_REDIS else "strata-server", srv)
    yield side
    side.close()
    srv.stop()


# --------------------------------------------------------------------------
# Tests


def fmt(events):
    return "[" + ", ".join(f"{c} {m}" for c, m in events) + "]"


# Known differences, each in README "Where it differs": a read that finds a
# key expired does not delete it there (strata-server removes expired keys
# from its expiry cycle, ~100 ms later), so `expired` comes late. Not
# strict: the cycle may happen to run inside the pause.
KNOWN_GAPS = {"expired": "expired keys are removed by the expiry cycle, not by the read that finds them"}


@pytest.mark.parametrize("command", [
    pytest.param(c, marks=pytest.mark.xfail(reason=KNOWN_GAPS[c], strict=False)) if c in KNOWN_GAPS else c
    for c in sorted(SCENARIOS)])
def test_events_match_redis(command, peer, subject):
    diffs = []
    quiet = True
    for v in SCENARIOS[command]:
        want, want_replies, want_setup_errors = run_variant(peer, v)
        assert not want_setup_errors, f"{command}/{v.label}: set-up fails on redis-server: {want_setup_errors}"
        quiet = quiet and not want
        got, got_replies, got_setup_errors = run_variant(subject, v)
        if got != want:
            lines = [f"{command} / {v.label}: {v.describe()}",
                     f"    expected (redis): {fmt(want)}",
                     f"    got ({subject.name}): {fmt(got)}"]
            if got_replies != want_replies:
                lines.append(f"    replies: redis {want_replies!r}, {subject.name} {got_replies!r}")
            if got_setup_errors:
                lines.append(f"    set-up errors on {subject.name}: {got_setup_errors!r}")
            diffs.append("\n".join(lines))
    if command not in QUIET:
        assert not quiet, f"{command}: no variant publishes anything on redis-server (scenario mistake?)"
    assert not diffs, "events differ:\n" + "\n".join(diffs)


def table_commands():
    """Command names of strata-server's command table: the top-level names
    of crates/strata-server/commands/*.json, or the `data("name", ...)` /
    `sess("name", ...)` entries of src/cmd/table.rs in its older layout.
    Empty if neither is found."""
    names = set()
    for path in sorted((CRATE / "commands").glob("*.json")):
        names.update(json.loads(path.read_text()).keys())
    for path in (CRATE / "src" / "cmd").rglob("*.rs"):
        src = path.read_text(errors="replace")
        names.update(re.findall(r'\b(?:data|sess)\(\s*"([a-z_]+)"', src))
    return {n.lower() for n in names if "|" not in n}


def redis_write_commands():
    info = json.loads(FIXTURE.read_text())["info"]
    out = set()
    for name, entry in info.items():
        flags = [f.get("+") for f in entry[2]["~"]]
        if "write" in flags:
            out.add(name)
    return out


def test_every_write_command_has_a_scenario():
    table = table_commands()
    if not table:
        pytest.skip("no command table found (commands/*.json or src/cmd/table.rs)")
    missing = sorted((table & redis_write_commands()) - set(SCENARIOS))
    assert not missing, f"write commands without a keyspace-events scenario: {missing}"
