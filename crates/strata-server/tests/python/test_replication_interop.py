"""Replication interop under 100,000 mixed writes, in three pairings:
strata-server primary -> strata-server replica, strata-server primary ->
redis-server 7 replica, redis-server 7 primary -> strata-server replica.

Each test attaches a replica, sends 100,000 pipelined writes from a seeded
RNG (strings, hashes, lists, sets, zsets, expiries with some keys expiring
during the run, DEL/RENAME/COPY/MOVE/FLUSHDB across databases 0 and 1,
EVAL scripts, MULTI/EXEC blocks, blocking pops served by the writes), waits
until the replica's offset reaches the primary's and compares every key of
every database: type, value, and absolute expiry within a second. A second
replica attached after the writes (a full sync of the non-empty data set) is
compared too. Each test prints how long its phases took (run with -s).
"""
import random
import signal
import threading
import time

import pytest
import redis

from conftest import RedisServer, Server, wait_for

WRITES = 100_000
# Databases compared: the workload writes to 0 and 1; 2 and 3 must stay empty.
DBS = range(4)
# Keys per namespace (s:, n:, f:, h:, l:, set:, z:, t:) in each database.
N = 300
EXPIRY_TOLERANCE_MS = 1000
# Short TTLs put on a few percent of the keys, so keys expire during the run.
SHORT_MS = (50, 500)

SCRIPT_SET_INCR = "redis.call('SET', KEYS[1], ARGV[1]); return redis.call('INCR', KEYS[2])"
# SPOP makes the script's effect depend on the primary's random choice: a
# replica must apply the effects (SREM/SADD), not run the script again.
SCRIPT_SPOP_MOVE = ("local m = redis.call('SPOP', KEYS[1]); "
                    "if m then redis.call('SADD', KEYS[2], m) end; return m")
SCRIPT_HASH_ZSET = ("local v = redis.call('HINCRBYFLOAT', KEYS[1], 'x0', ARGV[1]); "
                    "redis.call('ZADD', KEYS[2], v, 'from-hash'); return v")


def key(rng, prefix):
    return f"{prefix}:{rng.randrange(N)}"


def val(rng):
    return f"v{rng.randrange(10**6)}" * rng.randint(1, 3)


def long_s(rng):
    return rng.randint(1000, 9000)


def string_op(rng, db):
    x = rng.randrange(12)
    k = key(rng, "s")
    if x == 0:
        opt = rng.choice([["EX", long_s(rng)], ["PX", long_s(rng) * 1000], ["KEEPTTL"], ["NX"],
                          ["XX", "GET"], ["GET"], []])
        return [["SET", k, val(rng), *opt]]
    if x == 1:
        return [["APPEND", k, rng.choice("abcdef") * rng.randint(1, 4)]]
    if x == 2:
        return [["INCR", key(rng, "n")]]
    if x == 3:
        return [["INCRBY", key(rng, "n"), rng.randint(-1000, 1000)]]
    if x == 4:
        return [["INCRBYFLOAT", key(rng, "f"), f"{rng.uniform(-10, 10):.4f}"]]
    if x == 5:
        return [["SETRANGE", k, rng.randint(0, 40), rng.choice(["xy", "Q", "zzz"])]]
    if x == 6:
        return [["GETDEL", k]]
    if x == 7:
        now = int(time.time())
        opt = rng.choice([["EX", long_s(rng)], ["PX", long_s(rng) * 1000], ["PERSIST"],
                          ["EXAT", now + long_s(rng)], ["PXAT", (now + long_s(rng)) * 1000]])
        return [["GETEX", k, *opt]]
    if x == 8:
        return [["MSET", k, val(rng), key(rng, "s"), val(rng)]]
    if x == 9:
        return [["SETEX", k, long_s(rng), val(rng)]]
    if x == 10:
        return [["SET", key(rng, "s"), val(rng), "EX", long_s(rng)]]
    return [["SET", k, val(rng)]]


def hash_op(rng, db):
    x = rng.randrange(5)
    k = key(rng, "h")
    if x == 0:
        return [["HSET", k, f"f{rng.randrange(20)}", val(rng), f"f{rng.randrange(20)}", val(rng)]]
    if x == 1:
        return [["HDEL", k, f"f{rng.randrange(20)}", f"i{rng.randrange(5)}"]]
    if x == 2:
        return [["HINCRBY", k, f"i{rng.randrange(5)}", rng.randint(-50, 50)]]
    if x == 3:
        return [["HINCRBYFLOAT", k, f"x{rng.randrange(3)}", f"{rng.uniform(-5, 5):.3f}"]]
    return [["HSET", k, f"f{rng.randrange(20)}", val(rng)]]


def list_op(rng, db):
    x = rng.randrange(10)
    k = key(rng, "l")
    if x == 0:
        return [["LPUSH", k, *[f"e{rng.randrange(50)}" for _ in range(rng.randint(1, 4))]]]
    if x == 1:
        return [["RPUSH", k, *[f"e{rng.randrange(50)}" for _ in range(rng.randint(1, 4))]]]
    if x == 2:
        return [["LPOP", k, rng.randint(1, 3)]]
    if x == 3:
        return [["RPOP", k, rng.randint(1, 3)]]
    if x == 4:
        return [["LMOVE", k, key(rng, "l"), rng.choice(["LEFT", "RIGHT"]), rng.choice(["LEFT", "RIGHT"])]]
    if x == 5:
        return [["LINSERT", k, rng.choice(["BEFORE", "AFTER"]), f"e{rng.randrange(50)}", "ins"]]
    if x == 6:
        return [["LSET", k, rng.randint(-3, 3), "setv"]]
    if x == 7:
        return [["LTRIM", k, rng.randint(0, 2), rng.randint(10, 40)]]
    if x == 8:
        return [["LREM", k, rng.randint(-2, 2), f"e{rng.randrange(50)}"]]
    return [["RPUSH", k, f"e{rng.randrange(50)}"]]


def set_op(rng, db):
    x = rng.randrange(7)
    k = key(rng, "set")
    if x == 0:
        return [["SADD", k, *[rng.randrange(100) for _ in range(rng.randint(1, 5))]]]
    if x == 1:
        return [["SREM", k, rng.randrange(100), rng.randrange(100)]]
    if x == 2:
        return [["SPOP", k] + ([rng.randint(1, 3)] if rng.random() < 0.5 else [])]
    if x == 3:
        return [["SMOVE", k, key(rng, "set"), rng.randrange(100)]]
    if x == 4:
        return [["SINTERSTORE", key(rng, "set"), k, key(rng, "set")]]
    if x == 5:
        return [["SUNIONSTORE", key(rng, "set"), k, key(rng, "set")]]
    return [["SADD", k, f"m{rng.randrange(100)}"]]


def zset_op(rng, db):
    x = rng.randrange(7)
    k = key(rng, "z")
    if x == 0:
        flags = rng.choice([[], ["NX"], ["XX"], ["GT"], ["LT"], ["CH"], ["XX", "CH"], ["GT", "CH"]])
        pairs = []
        for _ in range(rng.randint(1, 3)):
            pairs += [f"{rng.uniform(-100, 100):.3f}", f"m{rng.randrange(60)}"]
        return [["ZADD", k, *flags, *pairs]]
    if x == 1:
        return [["ZADD", k, "INCR", f"{rng.uniform(0, 5):.2f}", f"m{rng.randrange(60)}"]]
    if x == 2:
        return [["ZINCRBY", k, f"{rng.uniform(-3, 3):.2f}", f"m{rng.randrange(60)}"]]
    if x == 3:
        return [["ZREM", k, f"m{rng.randrange(60)}", f"m{rng.randrange(60)}"]]
    if x == 4:
        return [["ZPOPMIN", k] + ([rng.randint(1, 3)] if rng.random() < 0.5 else [])]
    if x == 5:
        return [["ZRANGESTORE", key(rng, "z"), k, 0, rng.randint(2, 10)]]
    agg = rng.choice([[], ["AGGREGATE", "MIN"], ["AGGREGATE", "MAX"], ["WEIGHTS", 2, "0.5"]])
    return [["ZUNIONSTORE", key(rng, "z"), 2, k, key(rng, "z"), *agg]]


def any_key(rng):
    return key(rng, rng.choice(["s", "n", "f", "h", "l", "set", "z"]))


def expiry_op(rng, db):
    x = rng.randrange(5)
    k = any_key(rng)
    if x == 0:
        return [["EXPIRE", k, long_s(rng)]]
    if x == 1:
        return [["PEXPIRE", k, long_s(rng) * 1000]]
    if x == 2:
        # Now and then in the past: the key is deleted at once.
        at = int(time.time()) + (long_s(rng) if rng.random() < 0.9 else -10)
        return [["EXPIREAT", k, at]]
    return [["PERSIST", k]]


def short_ttl_op(rng, db):
    """A key that expires during the run (50-500 ms)."""
    if rng.random() < 0.6:
        return [["SET", key(rng, "t"), val(rng), "PX", rng.randint(*SHORT_MS)]]
    return [["PEXPIRE", any_key(rng), rng.randint(*SHORT_MS)]]


def keyspace_op(rng, db):
    x = rng.randrange(6)
    prefix = rng.choice(["s", "h", "l", "set", "z"])
    k = key(rng, prefix)
    if x == 0:
        return [["DEL", k, any_key(rng)]]
    if x == 1:
        return [["RENAME", k, key(rng, prefix)]]
    if x == 2:
        return [["COPY", k, key(rng, prefix), "REPLACE"]]
    if x == 3:
        return [["COPY", k, key(rng, prefix), "DB", 1 - db]]
    if x == 4:
        return [["MOVE", k, 1 - db]]
    if db == 1 and rng.random() < 0.01:
        return [["FLUSHDB"]]
    return [["UNLINK", k]]


def script_op(rng, db):
    x = rng.randrange(3)
    if x == 0:
        return [["EVAL", SCRIPT_SET_INCR, 2, key(rng, "s"), key(rng, "n"), val(rng)]]
    if x == 1:
        return [["EVAL", SCRIPT_SPOP_MOVE, 2, key(rng, "set"), key(rng, "set")]]
    return [["EVAL", SCRIPT_HASH_ZSET, 2, key(rng, "h"), key(rng, "z"), f"{rng.uniform(0, 2):.2f}"]]


def push_op(rng, db):
    """Pushes that the blocked popper (database 0) takes."""
    if rng.random() < 0.5:
        return [["RPUSH", "bq:l", f"p{rng.randrange(1000)}"]]
    return [["ZADD", "bq:z", f"{rng.uniform(0, 10):.2f}", f"p{rng.randrange(1000)}"]]


OPS = [(string_op, 26), (hash_op, 12), (list_op, 14), (set_op, 11), (zset_op, 12), (expiry_op, 6),
       (short_ttl_op, 3), (keyspace_op, 7), (script_op, 5), (push_op, 4)]


class Popper(threading.Thread):
    """Blocks in BLPOP / BZPOPMIN on database 0 of the primary until stopped,
    so some of the workload's pushes are served to a blocked client."""

    def __init__(self, server):
        super().__init__(daemon=True)
        self.client = server.client(db=0)
        self.stop_flag = threading.Event()
        self.served = 0
        self.error = None

    def run(self):
        try:
            i = 0
            while not self.stop_flag.is_set():
                if i % 2 == 0:
                    got = self.client.blpop(["bq:l"], timeout=0.1)
                else:
                    got = self.client.bzpopmin(["bq:z"], timeout=0.1)
                self.served += got is not None
                i += 1
        except redis.RedisError as e:
            self.error = e

    def stop(self):
        self.stop_flag.set()
        self.join(timeout=10)
        self.client.close()


def workload(primary, seed, writes=WRITES, short_ttls=True):
    """`writes` random write commands on the primary, in pipelines of a few
    hundred (some of them MULTI/EXEC blocks), with a blocked popper running;
    without `short_ttls`, no key expires during the run. Returns the number
    of pops served to the popper."""
    rng = random.Random(seed)
    ops = [(f, w) for f, w in OPS if short_ttls or f is not short_ttl_op]
    fns, weights = [f for f, _ in ops], [w for _, w in ops]
    clients = [primary.client(db=db) for db in (0, 1)]
    for c in clients:
        # Raw replies: redis-py's parsers assume the common form of a command
        # (ZADD's integer, not ZADD INCR's score).
        c.response_callbacks.clear()
    popper = Popper(primary)
    popper.start()
    sent = 0
    try:
        while sent < writes:
            db = 0 if rng.random() < 0.75 else 1
            transaction = rng.random() < 0.1
            p = clients[db].pipeline(transaction=transaction)
            size = rng.randint(20, 60) if transaction else rng.randint(200, 400)
            for fn in rng.choices(fns, weights, k=size):
                for cmd in fn(rng, db):
                    p.execute_command(*cmd)
                    sent += 1
            # Some commands fail by design (WRONGTYPE, LSET out of range,
            # RENAME of a missing key); the replica must see the same result.
            p.execute(raise_on_error=False)
    finally:
        popper.stop()
        for c in clients:
            c.close()
    assert popper.error is None, popper.error
    return popper.served


def dump(server, dbs=DBS):
    """Every key of databases `dbs`: {(db, key): (type, value, expire_at_ms)}
    with expire_at_ms None for keys without a TTL."""
    out = {}
    for db in dbs:
        c = server.client(db=db)
        keys = list(c.scan_iter(count=1000))
        p = c.pipeline(transaction=False)
        for k in keys:
            p.type(k)
        types = [t.decode() for t in p.execute()]
        p = c.pipeline(transaction=False)
        for k, t in zip(keys, types):
            if t == "string":
                p.get(k)
            elif t == "hash":
                p.hgetall(k)
            elif t == "list":
                p.lrange(k, 0, -1)
            elif t == "set":
                p.smembers(k)
            elif t == "zset":
                p.zrange(k, 0, -1, withscores=True)
            else:
                p.type(k)
            p.execute_command("PEXPIRETIME", k)
        res = p.execute()
        for i, (k, t) in enumerate(zip(keys, types)):
            v, at = res[2 * i], res[2 * i + 1]
            if t == "none" or at == -2:
                continue  # gone meanwhile
            if t == "hash":
                v = sorted(v.items())
            elif t == "set":
                v = sorted(v)
            out[(db, k)] = (t, v, None if at == -1 else at)
        c.close()
    return out


def differences(a, b):
    """The first few keys that differ between dumps `a` (primary) and `b`."""
    missing = [k for k in a if k not in b][:5]
    extra = [(k, b[k]) for k in b if k not in a][:5]
    differ = []
    for k in a:
        if k not in b:
            continue
        (ta, va, xa), (tb, vb, xb) = a[k], b[k]
        same_expiry = (xa is None) == (xb is None) and (xa is None or abs(xa - xb) <= EXPIRY_TOLERANCE_MS)
        if ta != tb or va != vb or not same_expiry:
            differ.append((k, a[k], b[k]))
            if len(differ) == 5:
                break
    return missing, extra, differ


def replication_info(server):
    c = server.client()
    try:
        return c.info("replication")
    finally:
        c.close()


def caught_up(primary, replica):
    want = replication_info(primary)["master_repl_offset"]
    got = replication_info(replica)
    return got.get("master_link_status") == "up" and got.get("slave_repl_offset") == want


def wait_link_up(replica, what):
    wait_for(lambda: replication_info(replica).get("master_link_status") == "up", what)


def compare(primary, replicas, what):
    """Waits until every replica's offset reaches the primary's, then
    compares their dumps with the primary's; returns the primary's."""
    for r in replicas:
        wait_for(lambda r=r: caught_up(primary, r), f"{what}: replica on port {r.port} to catch up", 90)
    a = dump(primary)
    # Another check after the dump: the primary may have propagated DELs of
    # keys that expired lazily while it was read.
    for r in replicas:
        wait_for(lambda r=r: caught_up(primary, r), f"{what}: replica on port {r.port} to catch up", 30)
    for r in replicas:
        check_replica(r, a, what)
    # DEBUG DIGEST, computed as Redis computes it, agrees too (whichever
    # server is which); retried while the primary's expiry cycle may still
    # delete a key between the two reads.
    for r in replicas:
        wait_for(lambda r=r: caught_up(primary, r) and digest(primary) == digest(r),
                 f"{what}: DEBUG DIGEST of the replica on port {r.port} to equal the primary's", 30)
    return a


def digest(server):
    c = server.client()
    try:
        return c.execute_command("DEBUG", "DIGEST")
    finally:
        c.close()


def replica_expires_keys_itself(primary, replica):
    """Whether strata-server `replica` deletes a key its primary keeps: the
    replica is frozen while the primary sets a key with a 200 ms TTL and
    PERSISTs it at once, and applies both after the 200 ms. A Redis replica
    keeps the key (it expires keys only on its primary's DEL)."""
    c = primary.client(db=3)
    replica.proc.send_signal(signal.SIGSTOP)
    try:
        c.set("probe:expiry", "v", px=200)
        c.persist("probe:expiry")
        time.sleep(0.5)
    finally:
        replica.proc.send_signal(signal.SIGCONT)
    wait_for(lambda: caught_up(primary, replica), "the replica to apply the probe", 30)
    gone = replica.client(db=3).get("probe:expiry") is None
    c.delete("probe:expiry")
    c.close()
    return gone


def check_replica(replica, a, what):
    """Compares `replica`'s dump with `a` (the primary's); a difference
    fails, naming the first few keys."""
    b = dump(replica)
    missing, extra, differ = differences(a, b)
    assert not missing and not extra and not differ, (
        f"{what}: replica on port {replica.port} ({len(a)} keys on the primary, {len(b)} on the "
        f"replica): missing {missing}, extra {extra}, differ {differ}")


def run_pairing(name, primary, make_replica, seed, writes=WRITES, short_ttls=True, second=True):
    """Attaches a replica, runs the workload, compares; attaches a second
    replica after the writes (a full sync of the non-empty data set) and
    compares both. Prints the timings."""
    t0 = time.monotonic()
    replica = make_replica(primary.port).start()
    replicas = [replica]
    try:
        wait_link_up(replica, "the first replica's link")
        t1 = time.monotonic()
        served = workload(primary, seed, writes, short_ttls)
        t2 = time.monotonic()
        # Let every short TTL pass, then read every key on the primary so it
        # expires (and propagates the deletion of) whatever is left.
        time.sleep(SHORT_MS[1] / 1000 + 0.2)
        dump(primary)
        data = compare(primary, [replica], f"{name}, after the writes")
        t3 = time.monotonic()
        assert {db for db, _ in data} == {0, 1}, "the workload writes to databases 0 and 1 only"
        assert len(data) > 1000
        assert served > 0, "no blocking pop was served"

        t4 = t3
        if second:
            late = make_replica(primary.port).start()
            replicas.append(late)
            wait_link_up(late, "the second replica's link")
            compare(primary, [replica, late], f"{name}, full sync of a second replica")
            t4 = time.monotonic()
        print(f"\n{name}: {writes} writes in {t2 - t1:.1f}s, first replica caught up and compared in "
              f"{t3 - t2:.1f}s ({len(data)} keys, {served} blocking pops served), second replica "
              f"synced and compared in {t4 - t3:.1f}s; total {t4 - t0:.1f}s")
    finally:
        for r in replicas:
            r.stop()


def strata_replica(port):
    return Server("--replicaof", f"127.0.0.1 {port}")


def redis_replica(port):
    return RedisServer("--replicaof", "127.0.0.1", str(port))


def test_strata_primary_strata_replica():
    primary = Server().start()
    try:
        run_pairing("strata -> strata", primary, strata_replica, 1001)
    finally:
        primary.stop()


def test_strata_primary_redis_replica():
    primary = Server().start()
    try:
        run_pairing("strata -> redis", primary, redis_replica, 1002)
    finally:
        primary.stop()


def test_redis_primary_strata_replica():
    primary = RedisServer("--repl-diskless-sync-delay", "0").start()
    try:
        run_pairing("redis -> strata", primary, strata_replica, 1003)
    finally:
        primary.stop()


@pytest.mark.parametrize("primary_kind", ["strata", "redis"])
def test_strata_replica_without_expiries_during_the_run(primary_kind):
    """The pairings with a strata-server replica again, with no key expiring
    during the run: a difference here is not about expiry."""
    if primary_kind == "strata":
        primary = Server().start()
    else:
        primary = RedisServer("--repl-diskless-sync-delay", "0").start()
    try:
        run_pairing(f"{primary_kind} -> strata, no short TTLs", primary, strata_replica, 1004,
                    writes=30_000, short_ttls=False, second=False)
    finally:
        primary.stop()


def test_a_strata_replica_leaves_expiry_to_its_primary():
    """A strata-server replica that applies its primary's writes late keeps
    a key the primary kept (set with a 200 ms TTL, then PERSISTed), as a
    Redis replica does: it expires keys only on its primary's DEL."""
    primary = RedisServer("--repl-diskless-sync-delay", "0").start()
    replica = strata_replica(primary.port).start()
    try:
        wait_link_up(replica, "the replica's link")
        assert not replica_expires_keys_itself(primary, replica)
    finally:
        replica.stop()
        primary.stop()
