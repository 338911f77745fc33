"""The command table as clients see it: COMMAND, COMMAND COUNT|LIST|INFO|DOCS|
GETKEYS|GETKEYSANDFLAGS against redis-server 7.0, read-only scripts refusing
every command the table flags `write`, redis-py's cluster key-slot parser and
redis-cli --bigkeys/--memkeys.

Each test is written to pass against redis-server 7.0 itself:

    STRATA_TEST_AGAINST_REDIS=1 python -m pytest -q test_command_table.py

points the tests at a redis-server (started like `reference` below) instead
of $STRATA_SERVER_BIN. The tests that compare with a live redis-server
(`reference`) skip when no redis-server is installed; the COMMAND INFO/DOCS
test compares with tests/fixtures/redis-7.0-commands.json, written by
scripts/dev/redis-command-fixture.py (see its docstring for the JSON
encoding of RESP3 replies, which RespConn.call below produces too).

Redis emits the subcommands of a container command (COMMAND INFO's 10th
element, COMMAND DOCS' "subcommands" map) in the order of its command dict,
whose hash seed is random per process: two redis-server processes disagree
on that order. Only that order is normalized away before comparing; every
other reply element, including its RESP type, is compared exactly.
"""
import json
import os
import re
import shutil
import socket
import subprocess

import pytest

from conftest import RedisServer, Server

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "..", "fixtures", "redis-7.0-commands.json")
AGAINST_REDIS = os.environ.get("STRATA_TEST_AGAINST_REDIS", "") not in ("", "0")
REDIS_SERVER = shutil.which("redis-server")
REDIS_CLI = shutil.which("redis-cli")

# Commands strata-server has and redis-server 7.0 has not, so they have no
# fixture entry. Keep this small and explicit.
STRATA_ONLY_COMMANDS = set()


# --- servers -----------------------------------------------------------------

@pytest.fixture(scope="module")
def target():
    """The server under test: strata-server, or redis-server with
    STRATA_TEST_AGAINST_REDIS=1."""
    if AGAINST_REDIS:
        if not REDIS_SERVER:
            pytest.skip("STRATA_TEST_AGAINST_REDIS is set but redis-server is not installed")
        s = RedisServer().start()
    else:
        s = Server().start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def reference():
    """A redis-server 7.0 to compare answers with (a second process when the
    target is redis-server too)."""
    if not REDIS_SERVER:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    s = RedisServer().start()
    c = RespConn(s.port)
    info = c.call("INFO", "server")
    c.close()
    version = re.search(r"redis_version:(\S+)", info).group(1)
    if not version.startswith("7.0."):
        s.stop()
        pytest.skip("the installed redis-server is %s, not 7.0" % version)
    yield s
    s.stop()


# --- a raw RESP2/RESP3 connection --------------------------------------------

def read_reply(f):
    """One reply as the fixture script encodes it: bulk → str, simple →
    {"+": s}, error → {"error": s}, integer → int, array → list, map →
    {"%": [[k, v], ...]}, set → {"~": [...]}, null → None."""
    line = f.readline()
    if not line:
        raise EOFError("connection closed")
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return {"+": rest.decode()}
    if kind == b"-":
        return {"error": rest.decode()}
    if kind == b":":
        return int(rest)
    if kind == b"=":
        return f.read(int(rest) + 2)[4:-2].decode()
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        return f.read(n + 2)[:-2].decode()
    if kind == b"!":
        return {"error": f.read(int(rest) + 2)[:-2].decode()}
    if kind == b"_":
        return None
    if kind == b",":
        return {",": rest.decode()}
    if kind == b"#":
        return {"#": rest == b"t"}
    if kind == b"(":
        return int(rest)
    if kind in (b"*", b"~"):
        n = int(rest)
        if n < 0:
            return None
        items = [read_reply(f) for _ in range(n)]
        return items if kind == b"*" else {"~": items}
    if kind == b"%":
        return {"%": [[read_reply(f), read_reply(f)] for _ in range(int(rest))]}
    raise ValueError("unexpected reply line %r" % line)


class RespConn:
    def __init__(self, port, protocol=2):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.f = self.sock.makefile("rb")
        if protocol == 3:
            hello = self.call("HELLO", "3")
            assert isinstance(hello, dict) and "%" in hello, hello

    def send(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(out))

    def call(self, *args):
        self.send(*args)
        return read_reply(self.f)

    def close(self):
        self.f.close()
        self.sock.close()


def flatten_resp2(x):
    """The RESP2 form of a RESP3 tree: a map becomes a flat [k, v, ...]
    array, a set an array; simple strings stay simple strings."""
    if isinstance(x, list):
        return [flatten_resp2(i) for i in x]
    if isinstance(x, dict):
        if "%" in x:
            return [flatten_resp2(e) for kv in x["%"] for e in kv]
        if "~" in x:
            return [flatten_resp2(i) for i in x["~"]]
    return x


def simple(x):
    """The text of a simple or bulk string reply."""
    return x["+"] if isinstance(x, dict) and "+" in x else x


def items(x):
    """The elements of an array or set reply."""
    return x["~"] if isinstance(x, dict) and "~" in x else x


def is_error(x):
    return isinstance(x, dict) and "error" in x


# --- normalizing the subcommand order ----------------------------------------

def _sort_key(v):
    return json.dumps(v, sort_keys=True)


def norm_info(entry):
    """A COMMAND INFO entry with its subcommand entries sorted by name."""
    if not isinstance(entry, list) or len(entry) < 10 or not isinstance(entry[9], list):
        return entry
    entry = list(entry)
    entry[9] = sorted((norm_info(e) for e in entry[9]),
                      key=lambda e: _sort_key(e[0] if isinstance(e, list) and e else e))
    return entry


def norm_docs(doc):
    """A COMMAND DOCS document (RESP3 map or RESP2 flat array) with its
    "subcommands" map sorted by name."""
    if isinstance(doc, dict) and "%" in doc:
        out = []
        for kv in doc["%"]:
            if (isinstance(kv, list) and len(kv) == 2 and kv[0] == "subcommands"
                    and isinstance(kv[1], dict) and "%" in kv[1]):
                subs = [[k, norm_docs(v)] for k, v in kv[1]["%"]]
                kv = ["subcommands", {"%": sorted(subs, key=lambda p: _sort_key(p[0]))}]
            out.append(kv)
        return {"%": out}
    if isinstance(doc, list) and len(doc) % 2 == 0:
        out = list(doc)
        for i in range(0, len(out), 2):
            if out[i] == "subcommands" and isinstance(out[i + 1], list) and len(out[i + 1]) % 2 == 0:
                flat = out[i + 1]
                pairs = sorted(([flat[j], norm_docs(flat[j + 1])] for j in range(0, len(flat), 2)),
                               key=lambda p: _sort_key(p[0]))
                out[i + 1] = [e for p in pairs for e in p]
        return out
    return doc


def norm_docs_reply(reply):
    """COMMAND DOCS name: a map (RESP3) or flat array (RESP2) name → doc."""
    if isinstance(reply, dict) and "%" in reply:
        return {"%": [[k, norm_docs(v)] for k, v in reply["%"]]}
    if isinstance(reply, list) and len(reply) % 2 == 0:
        return [norm_docs(e) if i % 2 else e for i, e in enumerate(reply)]
    return reply


def only_listed_info(entry, listed):
    """A fixture COMMAND INFO entry (RESP3 tree) keeping the subcommands in `listed`."""
    if isinstance(entry[9], list):
        entry = list(entry)
        entry[9] = [e for e in entry[9] if e[0] in listed]
    return entry


def only_listed_docs(doc, listed):
    """A fixture COMMAND DOCS document keeping the subcommands in `listed`."""
    if not isinstance(doc, dict):
        return doc
    out = []
    for k, v in doc["%"]:
        if k == "subcommands":
            v = {"%": [[n, d] for n, d in v["%"] if n in listed]}
        out.append([k, v])
    return {"%": out}


# --- short diffs -------------------------------------------------------------

def _short(v, n=160):
    s = json.dumps(v)
    return s if len(s) <= n else s[:n] + "..."


def diffs(want, got, path="", limit=3):
    """Up to `limit` differences between two reply trees as 'path: want X got Y'."""
    out = []

    def walk(a, b, p):
        if len(out) >= limit:
            return
        if isinstance(a, list) and isinstance(b, list):
            for i, (x, y) in enumerate(zip(a, b)):
                walk(x, y, "%s[%d]" % (p, i))
            if len(a) != len(b) and len(out) < limit:
                out.append("%s: want %d elements, got %d (extra: %s)" % (
                    p or "/", len(a), len(b),
                    _short(a[len(b):] if len(a) > len(b) else b[len(a):])))
            return
        if (isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys()
                and list(a) in (["%"], ["~"])):
            if "%" in a:
                wk = [k for k, _ in a["%"]]
                gk = [k for k, _ in b["%"]]
                if wk != gk:
                    out.append("%s: map keys want %s got %s" % (p or "/", _short(wk), _short(gk)))
                    return
                for (k, x), (_, y) in zip(a["%"], b["%"]):
                    walk(x, y, "%s.%s" % (p, k))
            else:
                walk(a["~"], b["~"], p + "~")
            return
        if a != b:
            out.append("%s: want %s got %s" % (p or "/", _short(a), _short(b)))

    walk(want, got, path)
    return out


def report(problems):
    """Fails with every problem found, one a line."""
    if problems:
        pytest.fail("%d problem(s):\n  " % len(problems) + "\n  ".join(problems), pytrace=False)


# --- 1. COMMAND INFO / DOCS against the fixture -------------------------------

# Commands that must not be sent (not even queued) by the implemented-but-
# unlisted probe: MULTI runs them at once, or they would take over the
# connection or the server.
PROBE_SKIP = {"exec", "discard", "multi", "watch", "quit", "reset", "sync", "psync",
              "monitor", "shutdown", "failover", "debug"}


def implemented_commands(port, names):
    """The top-level fixture commands the server knows: each is sent bare
    inside MULTI (so nothing runs) and counts unless the answer is an
    unknown-command error."""
    c = RespConn(port)
    try:
        assert c.call("MULTI") == {"+": "OK"}
        known = set()
        for name in names:
            if name in PROBE_SKIP:
                continue
            reply = c.call(name)
            if not (is_error(reply) and "unknown command" in reply["error"]):
                known.add(name)
        c.call("DISCARD")
        return known
    finally:
        c.close()


def test_command_info_and_docs_match_redis(target):
    with open(FIXTURE) as f:
        fixture = json.load(f)
    assert fixture["redis_version"].startswith("7.0."), fixture["redis_version"]
    problems = []

    c2 = RespConn(target.port, protocol=2)
    c3 = RespConn(target.port, protocol=3)
    try:
        listed = c2.call("COMMAND", "LIST")
        assert isinstance(listed, list), listed
        listed_set = set(listed)
        if len(listed_set) != len(listed):
            problems.append("COMMAND LIST has duplicates: %s"
                            % sorted(n for n in listed_set if listed.count(n) > 1))

        # COMMAND COUNT, COMMAND (no args) and COMMAND LIST agree.
        count = c2.call("COMMAND", "COUNT")
        everything = c2.call("COMMAND")
        top = [e[0] for e in everything if isinstance(e, list) and e] if isinstance(everything, list) else None
        if top is None:
            problems.append("COMMAND answered %s" % _short(everything))
        else:
            if count != len(top):
                problems.append("COMMAND COUNT is %r but COMMAND has %d entries" % (count, len(top)))
            top_listed = sorted(n for n in listed_set if "|" not in n)
            if sorted(top) != top_listed:
                problems.append("COMMAND entries %s vs COMMAND LIST top-level names %s differ: "
                                "only in COMMAND %s, only in LIST %s" % (
                                    len(top), len(top_listed), sorted(set(top) - set(top_listed)),
                                    sorted(set(top_listed) - set(top))))

        # Every listed name is a Redis 7.0 command or an allowlisted one.
        unknown = sorted(n for n in listed_set
                         if n not in fixture["info"] and n not in STRATA_ONLY_COMMANDS)
        if unknown:
            problems.append("listed but not in Redis 7.0 (nor in STRATA_ONLY_COMMANDS): %s" % unknown)

        # Every command the server has is listed (guards against a table that
        # lists too little, e.g. nothing at all).
        top_fixture = sorted(n for n in fixture["info"] if "|" not in n)
        unlisted = sorted(implemented_commands(target.port, top_fixture) - listed_set)
        if unlisted:
            problems.append("the server runs these commands but COMMAND LIST lacks them (%d): %s"
                            % (len(unlisted), unlisted))

        # COMMAND INFO / COMMAND DOCS of every listed name, RESP3 and RESP2.
        for name in sorted(listed_set):
            if name not in fixture["info"]:
                continue
            # A container is compared over the subcommands the server lists
            # (strata-server has some of Redis's, e.g. not CLIENT KILL yet).
            want_info = [only_listed_info(fixture["info"][name], listed_set)]
            doc = only_listed_docs(fixture["docs"][name], listed_set)
            want_docs = {"%": [[name, doc]]} if doc is not None else {"%": []}
            for proto, conn, flat in ((3, c3, lambda x: x), (2, c2, flatten_resp2)):
                got = conn.call("COMMAND", "INFO", name)
                want = flat(want_info)
                if isinstance(got, list):
                    got = [norm_info(e) for e in got]
                want = [norm_info(e) for e in want]
                d = diffs(want, got)
                if d:
                    problems.append("COMMAND INFO %s (RESP%d): %s" % (name, proto, "; ".join(d)))
                got = norm_docs_reply(conn.call("COMMAND", "DOCS", name))
                want = norm_docs_reply(flat(want_docs))
                d = diffs(want, got)
                if d:
                    problems.append("COMMAND DOCS %s (RESP%d): %s" % (name, proto, "; ".join(d)))
    finally:
        c2.close()
        c3.close()

    report(problems)


# --- 2. write commands refused in EVAL_RO --------------------------------------

SCRIPT_SUFFIX = re.compile(r" script: [0-9a-f]{40}, on @user_script:\d+\.$")


def script_error(reply):
    """An EVAL_RO error without Redis's ' script: <sha1>, on @user_script:N.'
    location suffix (strata-server does not report script locations)."""
    if not is_error(reply):
        return reply
    return {"error": SCRIPT_SUFFIX.sub("", reply["error"])}


def lua_call(name, arity, first, last, step):
    """EVAL_RO arguments calling `name` (e.g. 'function|load') with dummy
    arguments enough for its arity, the key positions passed in KEYS."""
    parts = name.split("|")
    argc = arity if arity > 0 else -arity
    argc = max(argc, len(parts))
    keypos = set()
    if first > 0 and step > 0:
        last = last if last >= 0 else argc + last
        keypos = set(range(first, last + 1, step))
    lua_args, keys, argv = ["'%s'" % p for p in parts], [], []
    for pos in range(len(parts), argc):
        if pos in keypos:
            keys.append("k%d" % pos)
            lua_args.append("KEYS[%d]" % len(keys))
        else:
            argv.append("0")
            lua_args.append("ARGV[%d]" % len(argv))
    script = "return redis.call(%s)" % ", ".join(lua_args)
    return ["EVAL_RO", script, str(len(keys)), *keys, *argv]


def command_infos(conn):
    """{name: COMMAND INFO entry} for every name in COMMAND LIST (RESP2)."""
    names = conn.call("COMMAND", "LIST")
    assert isinstance(names, list), names
    if not names:
        return {}
    entries = conn.call("COMMAND", "INFO", *names)
    assert isinstance(entries, list) and len(entries) == len(names), _short(entries)
    return {n: e for n, e in zip(names, entries) if isinstance(e, list)}


def test_write_commands_refused_in_eval_ro(target, reference):
    t, ref = RespConn(target.port), RespConn(reference.port)
    try:
        problems = []
        # The regression first: ZREMRANGEBYRANK ran in EVAL_RO and emptied z.
        for conn in (t, ref):
            conn.call("FLUSHALL")
            assert conn.call("ZADD", "z", "1", "a", "2", "b", "3", "c") == 3
        call = ["EVAL_RO", "return redis.call('zremrangebyrank', KEYS[1], 0, -1)", "1", "z"]
        want, got = script_error(ref.call(*call)), script_error(t.call(*call))
        assert want == {"error": "ERR Write commands are not allowed from read-only scripts."}, want
        if got != want:
            problems.append("zremrangebyrank regression: want %s got %s" % (want, got))
        zcard = t.call("ZCARD", "z")
        if zcard != 3:
            problems.append("zremrangebyrank regression: ZCARD z is %r after EVAL_RO, want 3" % zcard)

        infos = command_infos(t)
        writes = {n: e for n, e in infos.items()
                  if "write" in [simple(f) for f in items(e[2])]}
        if not writes:
            problems.append("COMMAND INFO flags no command `write` (COMMAND LIST has %d names)"
                            % len(infos))
        seen = set()
        for name, e in sorted(writes.items()):
            call = lua_call(name, e[1], e[3], e[4], e[5])
            want = script_error(ref.call(*call))
            if is_error(want) and want["error"].startswith("ERR Unknown Redis command"):
                # Not a Redis 7.0 command: the read-only refusal is expected.
                want = {"error": "ERR Write commands are not allowed from read-only scripts."}
            seen.add(want["error"] if is_error(want) else repr(want))
            got = script_error(t.call(*call))
            if got != want:
                problems.append("%s via %s: want %s got %s" % (name, call[1], _short(want), _short(got)))
        # Redis refuses with one of two errors; anything else means the dummy
        # call itself is wrong (arity), not the refusal.
        odd = seen - {"ERR Write commands are not allowed from read-only scripts.",
                      "ERR This Redis command is not allowed from script"}
        assert not odd, "redis-server answered the dummy calls with %s" % sorted(odd)
        report(problems)
    finally:
        t.close()
        ref.close()


# --- 3. COMMAND GETKEYS / GETKEYSANDFLAGS ------------------------------------

GETKEYS_CASES = [
    ["get", "a"],
    ["set", "a", "b"],
    ["set", "a", "b", "GET"],
    ["mset", "a", "1", "b", "2"],
    ["del", "a", "b", "c"],
    ["zunionstore", "d", "2", "a", "b", "WEIGHTS", "1", "2"],
    ["zunionstore", "d", "5", "a", "b"],          # numkeys beyond the arguments
    ["eval", "return 1", "2", "a", "b", "c"],
    ["eval", "return 1", "0"],                     # movable keys, none given
    ["sort", "a", "STORE", "b"],
    ["sort", "a", "BY", "w_*", "GET", "o_*"],
    ["lmpop", "2", "a", "b", "LEFT"],
    ["blmpop", "0", "2", "a", "b", "LEFT", "COUNT", "1"],
    ["bzmpop", "0", "2", "a", "b", "MIN"],
    ["zintercard", "2", "a", "b", "LIMIT", "1"],
    ["sintercard", "2", "a", "b"],
    ["rename", "a", "b"],
    ["lmove", "a", "b", "LEFT", "RIGHT"],
    ["bitop", "AND", "d", "a", "b"],
    ["object", "encoding", "a"],
    ["memory", "usage", "a"],
    ["object", "nosuch", "a"],                     # unknown subcommand
    ["nosuchcmd", "a"],                            # unknown command
    ["ping", "x"],                                 # no key arguments
    ["set", "a"],                                  # wrong arity
    ["get", "a", "b"],                             # wrong arity
    [],                                            # COMMAND GETKEYS alone
    ["get"],                                       # too few for GETKEYS itself
]
# Commands the server may not have: when it does not, GETKEYS must answer like
# for any unknown command; when it does, like Redis.
OPTIONAL_GETKEYS_CASES = [
    ["xadd", "s", "*", "f", "v"],
    ["xread", "STREAMS", "a", "b", "0", "0"],
]


def knows(conn, name):
    """Whether the server has `name` (all these need arguments, so a bare
    call is refused on arity without running)."""
    reply = conn.call(name)
    return not (is_error(reply) and "unknown command" in reply["error"])


def test_command_getkeys(target, reference):
    problems = []
    for proto in (2, 3):
        t, ref = RespConn(target.port, proto), RespConn(reference.port, proto)
        try:
            cases = [(c, True) for c in GETKEYS_CASES]
            cases += [(c, knows(t, c[0])) for c in OPTIONAL_GETKEYS_CASES]
            for args, known in cases:
                for sub in ("GETKEYS", "GETKEYSANDFLAGS"):
                    call = ["COMMAND", sub, *args]
                    want = ref.call(*call) if known else {"error": "ERR Invalid command specified"}
                    got = t.call(*call)
                    if got != want:
                        problems.append("RESP%d %s: want %s got %s" % (
                            proto, " ".join(call), _short(want), _short(got)))
        finally:
            t.close()
            ref.close()
    report(problems)


# --- 4. redis-py's cluster key-slot parser ------------------------------------

try:
    from redis._parsers import CommandsParser
except ImportError:  # redis-py < 5
    from redis.commands.parser import CommandsParser

PARSER_CASES = [
    ("GET", "a"),
    ("SET", "a", "1", "EX", "10"),
    ("MSET", "a", "1", "b", "2"),
    ("MGET", "a", "b", "c"),
    ("DEL", "a", "b"),
    ("HSET", "h", "f", "v"),
    ("ZUNIONSTORE", "d", "2", "a", "b"),
    ("EVAL", "return 1", "2", "a", "b", "c"),
    ("SORT", "a", "STORE", "b"),
    ("LMPOP", "2", "a", "b", "LEFT"),
    ("BLMPOP", "0", "2", "a", "b", "LEFT"),
    ("ZINTERCARD", "2", "a", "b"),
    ("SINTERCARD", "3", "a", "b", "c"),
    ("RENAME", "a", "b"),
    ("LMOVE", "a", "b", "LEFT", "RIGHT"),
    ("BITOP", "OR", "d", "a", "b"),
    ("MEMORY USAGE", "a"),
    ("OBJECT", "ENCODING", "a"),
    ("PUBLISH", "ch", "msg"),
]


def parser_keys(conn):
    out = []
    parser = CommandsParser(conn)
    for args in PARSER_CASES:
        try:
            out.append(("ok", parser.get_keys(conn, *args)))
        except Exception as e:  # noqa: BLE001 - compared with Redis's outcome
            out.append(("error", type(e).__name__, str(e)))
    return out


def test_redis_py_cluster_key_slots(target, reference):
    problems = []
    for proto in (2, 3):
        t = target.client(protocol=proto, decode_responses=True)
        ref = reference.client(protocol=proto, decode_responses=True)
        try:
            try:
                got = parser_keys(t)
            except Exception as e:  # noqa: BLE001 - COMMAND itself unusable
                got = [("parser", type(e).__name__, str(e))] * len(PARSER_CASES)
            want = parser_keys(ref)
            for args, w, g in zip(PARSER_CASES, want, got):
                assert w[0] == "ok", (args, w)
                if w != g:
                    problems.append("RESP%d %s: want %s got %s" % (proto, " ".join(args), w, g))
        finally:
            t.close()
            ref.close()
    report(problems)


# --- 5. redis-cli --bigkeys / --memkeys ---------------------------------------

N_PER_TYPE = 200
BIG = 1000


def fill(conn):
    conn.flushall()
    p = conn.pipeline(transaction=False)
    for i in range(N_PER_TYPE):
        p.set("str:%d" % i, "v" * 5)
        p.rpush("list:%d" % i, *range(3))
        p.hset("hash:%d" % i, mapping={"f%d" % j: "v" for j in range(3)})
        p.sadd("set:%d" % i, *range(3))
        p.zadd("zset:%d" % i, {"m%d" % j: j for j in range(3)})
    p.execute()
    p.set("big:str", "x" * (5 * BIG))
    p.rpush("big:list", *range(BIG))
    p.hset("big:hash", mapping={"f%d" % j: "v" for j in range(BIG)})
    p.sadd("big:set", *range(BIG))
    p.zadd("big:zset", {"m%d" % j: j for j in range(BIG)})
    p.execute()
    return 5 * (N_PER_TYPE + 1)


def run_cli(port, mode):
    proc = subprocess.run([REDIS_CLI, "-h", "127.0.0.1", "-p", str(port), mode],
                          capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.skipif(not REDIS_CLI, reason="redis-cli is not installed")
def test_redis_cli_bigkeys_memkeys(target):
    conn = target.client()
    try:
        total = fill(conn)
        assert conn.dbsize() == total
    finally:
        conn.close()
    n = N_PER_TYPE + 1

    code, out, err = run_cli(target.port, "--bigkeys")
    ctx = "redis-cli --bigkeys exited %d\nstdout:\n%s\nstderr:\n%s" % (code, out[-3000:], err[-2000:])
    assert code == 0, ctx
    assert "Sampled %d keys in the keyspace!" % total in out, ctx
    for line in ("Biggest   list found '\"big:list\"' has %d items" % BIG,
                 "Biggest   hash found '\"big:hash\"' has %d fields" % BIG,
                 "Biggest string found '\"big:str\"' has %d bytes" % (5 * BIG),
                 "Biggest    set found '\"big:set\"' has %d members" % BIG,
                 "Biggest   zset found '\"big:zset\"' has %d members" % BIG,
                 "%d lists with %d items" % (n, 3 * N_PER_TYPE + BIG),
                 "%d hashs with %d fields" % (n, 3 * N_PER_TYPE + BIG),
                 "%d strings with %d bytes" % (n, 5 * N_PER_TYPE + 5 * BIG),
                 "%d sets with %d members" % (n, 3 * N_PER_TYPE + BIG),
                 "%d zsets with %d members" % (n, 3 * N_PER_TYPE + BIG)):
        assert line in out, "missing %r\n%s" % (line, ctx)

    code, out, err = run_cli(target.port, "--memkeys")
    ctx = "redis-cli --memkeys exited %d\nstdout:\n%s\nstderr:\n%s" % (code, out[-3000:], err[-2000:])
    assert code == 0, ctx
    assert "Sampled %d keys in the keyspace!" % total in out, ctx
    for kind, key in (("list", "big:list"), ("hash", "big:hash"), ("string", "big:str"),
                      ("set", "big:set"), ("zset", "big:zset")):
        m = re.search(r"Biggest +%s found '\"%s\"' has (\d+) bytes" % (kind, key), out)
        assert m and int(m.group(1)) > 0, "no biggest %s %s\n%s" % (kind, key, ctx)
        m = re.search(r"^%d %ss with (\d+) bytes" % (n, kind), out, re.M)
        assert m and int(m.group(1)) > 0, "no %s total\n%s" % (kind, ctx)
