"""strata-server as a replica of a real redis-server 7 primary (REPLICAOF):
full sync (disk-backed `$<len>` and diskless `$EOF:` images), the command
stream (MULTI/EXEC, EVAL effects, EXPIRE, DEL, SPOP, INCRBYFLOAT, several
databases), -READONLY for clients, REPLICAOF NO ONE, and a resync after the
primary restarts empty.

Every key of every database is compared on both sides (type, value, whether
it has a TTL) once the replica's offset reaches the primary's.
"""
import random
import time

import pytest
import redis

from conftest import RedisServer, Server, wait_for

DBS = 4


def info(c, section="replication"):
    return c.info(section)


def dump(server):
    """Every key of databases 0..DBS-1: {(db, key): (type, value, has_ttl)}."""
    out = {}
    for db in range(DBS):
        c = server.client(db=db)
        for k in c.scan_iter(count=1000):
            t = c.type(k).decode()
            if t == "string":
                v = c.get(k)
            elif t == "hash":
                v = sorted(c.hgetall(k).items())
            elif t == "list":
                v = c.lrange(k, 0, -1)
            elif t == "set":
                v = sorted(c.smembers(k))
            elif t == "zset":
                v = c.zrange(k, 0, -1, withscores=True)
            else:
                v = None
            pttl = c.pttl(k)
            if pttl == -2:
                continue  # gone meanwhile
            out[(db, k)] = (t, v, pttl != -1)
        c.close()
    return out


def seed(primary, rng):
    """A data set of every type, with expiries, in several databases."""
    for db in range(DBS):
        c = primary.client(db=db)
        p = c.pipeline(transaction=False)
        for i in range(300):
            p.set(f"s:{i}", f"v{db}-{i}" * rng.randint(1, 5))
            p.hset(f"h:{i % 40}", f"f{i}", rng.randint(0, 10**6))
            p.rpush(f"l:{i % 30}", *[f"e{j}" for j in range(rng.randint(1, 8))])
            p.sadd(f"set:{i % 30}", *[rng.randint(0, 500) for _ in range(4)])
            p.zadd(f"z:{i % 30}", {f"m{rng.randint(0, 200)}": rng.random() * 100})
            if i % 10 == 0:
                p.expire(f"s:{i}", 3600 + i)
        # Large values: listpack, quicklist and hashtable encodings.
        p.hset("bighash", mapping={f"f{j}": "x" * 70 for j in range(600)})
        p.rpush("biglist", *[str(j) * 30 for j in range(2000)])
        p.sadd("intset", *range(100))
        p.sadd("bigset", *[f"m{j}" for j in range(1000)])
        p.zadd("bigzset", {f"m{j}": j * 1.5 for j in range(500)})
        p.set("counter", 10)
        p.set("float", "1.5")
        p.execute()
        c.close()


def workload(primary, rng, n):
    """About n mixed commands on the primary, most pipelined."""
    clients = [primary.client(db=db) for db in range(DBS)]
    done = 0
    while done < n:
        c = rng.choice(clients)
        p = c.pipeline(transaction=rng.random() < 0.2)  # MULTI/EXEC
        for _ in range(50):
            k = rng.randint(0, 299)
            op = rng.randint(0, 15)
            if op == 0:
                p.set(f"s:{k}", f"w{rng.random()}")
            elif op == 1:
                p.incrbyfloat("float", rng.random())
            elif op == 2:
                p.expire(f"s:{k}", rng.randint(1000, 9000))
            elif op == 3:
                p.delete(f"s:{k}", f"h:{k % 40}")
            elif op == 4:
                p.spop(f"set:{k % 30}", rng.randint(1, 2))
            elif op == 5:
                p.hincrby(f"h:{k % 40}", f"f{k}", 3)
            elif op == 6:
                p.lpush(f"l:{k % 30}", "new")
                p.rpop(f"l:{(k + 1) % 30}")
            elif op == 7:
                p.zincrby(f"z:{k % 30}", 2.5, f"m{k}")
            elif op == 8:
                p.incr("counter")
            elif op == 9:
                p.eval("redis.call('SET', KEYS[1], ARGV[1]); return redis.call('INCR', KEYS[2])",
                       2, f"ev:{k}", "counter", str(rng.random()))
            elif op == 10:
                p.persist(f"s:{k}")
            elif op == 11:
                p.set(f"s:{k}", "px", px=rng.randint(10**6, 10**7))
            elif op == 12:
                p.srem(f"set:{k % 30}", rng.randint(0, 500))
                p.sadd(f"set:{k % 30}", rng.randint(0, 500))
            elif op == 13:
                p.getdel(f"s:{(k + 7) % 300}")
            elif op == 14:
                p.zpopmin(f"z:{k % 30}")
            else:
                p.hdel(f"h:{k % 40}", f"f{k}")
                p.expire(f"h:{(k + 1) % 40}", 5000)
        done += len(p.command_stack)
        try:
            p.execute(raise_on_error=False)
        except redis.ResponseError:
            pass
    for c in clients:
        c.close()


def caught_up(primary, replica):
    want = info(primary.client())["master_repl_offset"]
    got = info(replica.client())
    return got.get("master_link_status") == "up" and got.get("slave_repl_offset") == want


def wait_equal(primary, replica, what):
    """Waits for the replica's offset to reach the primary's, then compares."""
    wait_for(lambda: caught_up(primary, replica), what)
    a, b = dump(primary), dump(replica)
    assert len(a) > 0 or what.startswith("empty")
    missing = [k for k in a if k not in b][:5]
    extra = [k for k in b if k not in a][:5]
    diff = [(k, a[k], b[k]) for k in a if k in b and a[k] != b[k]][:3]
    assert not missing and not extra and not diff, f"{what}: missing {missing}, extra {extra}, differ {diff}"
    return a


@pytest.fixture
def primary():
    # Disk-backed full sync: the image arrives as `$<len>`.
    s = RedisServer("--repl-diskless-sync", "no").start()
    yield s
    s.stop()


@pytest.fixture
def replica():
    s = Server().start()
    yield s
    s.stop()


def test_strata_follows_a_redis_primary(primary, replica):
    rng = random.Random(52)
    seed(primary, rng)
    r = replica.client()
    assert r.execute_command("ROLE") == [b"master", 0, []]
    assert info(r)["role"] == "master"
    assert r.execute_command("REPLICAOF", "127.0.0.1", primary.port) == b"OK"
    role = r.execute_command("ROLE")
    assert role[0] == b"slave" and role[1] == b"127.0.0.1" and role[2] == primary.port
    wait_for(lambda: info(r).get("master_link_status") == "up", "master_link_status:up")
    i = info(r)
    assert i["role"] == "slave" and i["master_host"] == "127.0.0.1" and i["master_port"] == primary.port
    assert i["master_sync_in_progress"] == 0
    assert i["master_replid"] == info(primary.client())["master_replid"]
    wait_equal(primary, replica, "the full sync")
    assert info(primary.client())["connected_slaves"] == 1

    # WAIT on the primary counts the replica (it answers REPLCONF GETACK).
    pc = primary.client()
    pc.set("waited", "1")
    assert pc.wait(1, 5000) == 1
    wait_for(lambda: r.get("waited") == b"1", "the waited write")
    workload(primary, rng, 10_000)
    data = wait_equal(primary, replica, "the command stream")
    assert r.execute_command("ROLE")[3] == b"connected"
    assert r.execute_command("ROLE")[4] == info(primary.client())["master_repl_offset"]

    # Clients cannot write to a read-only replica; reads are served.
    with pytest.raises(redis.ReadOnlyError):
        r.set("x", "1")
    with pytest.raises(redis.ReadOnlyError):
        r.eval("return redis.call('SET', 'x', '1')", 0)
    p = r.pipeline(transaction=True)
    p.set("x", 1)
    with pytest.raises(redis.exceptions.ResponseError):
        p.execute()
    assert r.get("counter") == primary.client().get("counter")
    r.config_set("replica-read-only", "no")
    assert r.set("scratch", "1")
    r.delete("scratch")
    r.config_set("replica-read-only", "yes")

    # REPLICAOF NO ONE: a primary again, writable, with the data.
    assert r.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
    assert r.execute_command("ROLE")[0] == b"master"
    assert info(r)["role"] == "master"
    assert r.set("x", "1")
    r.delete("x")
    assert dump(replica) == data


def test_replica_resyncs_after_the_primary_restarts_empty(primary):
    rng = random.Random(7)
    seed(primary, rng)
    # From the start, through the flag (as `replicaof` in a config file).
    replica = Server("--replicaof", f"127.0.0.1 {primary.port}").start()
    try:
        r = replica.client()
        wait_for(lambda: info(r).get("master_link_status") == "up", "the first sync")
        wait_equal(primary, replica, "the first sync")
        port = primary.port
        primary.proc.kill()
        primary.proc.wait(timeout=30)
        wait_for(lambda: info(r).get("master_link_status") == "down", "the link going down")
        # Same port, empty, diskless now: the image comes as `$EOF:<mark>`.
        again = RedisServer("--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0")
        again.port = port
        again.start()
        try:
            c = again.client(db=1)
            c.set("after", "restart")
            c.hset("h", "a", "1")
            wait_for(lambda: info(r).get("master_link_status") == "up", "the resync", timeout=90)
            wait_equal(again, replica, "the resync")
            assert replica.client(db=0).dbsize() == 0
            workload(again, rng, 1000)
            wait_equal(again, replica, "the stream after the resync")
        finally:
            again.stop()
    finally:
        replica.stop()
