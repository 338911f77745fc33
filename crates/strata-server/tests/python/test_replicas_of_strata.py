"""Replicas of a strata-server primary: a real redis-server 7.0
(`--replicaof`) and a strata-server (REPLICAOF) follow it through a full
sync (disk-backed RDB image) and ~10k mixed writes (strings, hashes, lists,
sets, zsets, expiries, SPOP, INCRBYFLOAT, MULTI/EXEC, EVAL, served blocking
pops, several databases); every key of every database is compared once the
replica's offset reaches the primary's. The Redis replica also reconnects
(its link killed) and continues with a partial resync.
"""
import random
import threading
import time

import pytest

from conftest import RedisServer, Server
from test_replica_of_redis import DBS, dump, info, seed, wait_equal, wait_for, workload


def blocking_pops(primary, rng, n):
    """n blocking pops (BLPOP, BRPOP, BZPOPMIN, BLMOVE) served by pushes
    from another client, in database 2."""
    waiter, pusher = primary.client(db=2), primary.client(db=2)
    for i in range(n):
        kind = i % 4
        key = f"bq:{kind}"
        out = []

        def pop():
            if kind == 0:
                out.append(waiter.blpop([key], timeout=5))
            elif kind == 1:
                out.append(waiter.brpop([key], timeout=5))
            elif kind == 2:
                out.append(waiter.bzpopmin([key], timeout=5))
            else:
                out.append(waiter.blmove(key, "bq:moved", 5, "LEFT", "RIGHT"))

        t = threading.Thread(target=pop)
        t.start()
        wait_for(lambda: int(primary.client().info("clients")["blocked_clients"]) > 0, "a blocked client", 10)
        if kind == 2:
            pusher.zadd(key, {f"m{i}": rng.random()})
        else:
            pusher.rpush(key, f"a{i}")
        t.join()
        assert out and out[0], "the blocking pop was served"
    waiter.close()
    pusher.close()


def check_wait(primary):
    """WAIT 1 returns once the one replica acknowledged the write (well
    before its timeout: the primary asks for an ack); WAIT 2 waits for its
    timeout and counts the one; in MULTI, WAIT answers at once."""
    c = primary.client()
    c.set("waited", "1")
    t = time.monotonic()
    assert c.wait(1, 10000) == 1
    assert time.monotonic() - t < 5
    c.set("waited", "2")
    t = time.monotonic()
    assert c.wait(2, 400) == 1
    assert time.monotonic() - t >= 0.35
    p = c.pipeline(transaction=True)
    p.set("waited", "3")
    p.wait(5, 0)
    assert p.execute()[1] in (0, 1)
    c.close()


def exercise(primary, replica, rng):
    """Writes on the primary, then the replica must hold the same keys."""
    workload(primary, rng, 10_000)
    blocking_pops(primary, rng, 20)
    c = primary.client(db=1)
    c.setex("ttl:ex", 5000, "v")
    c.pexpire("s:1", 123456)
    c.close()
    return wait_equal(primary, replica, "the command stream")


@pytest.fixture
def primary():
    s = Server().start()
    yield s
    s.stop()


def test_a_redis_replica_follows_a_strata_primary(primary):
    rng = random.Random(5201)
    seed(primary, rng)
    p = primary.client()
    assert p.execute_command("ROLE") == [b"master", 0, []]
    # No replica: WAIT 0 answers at once, WAIT 1 at its timeout.
    assert p.wait(0, 0) == 0
    t = time.monotonic()
    assert p.wait(1, 300) == 0
    assert time.monotonic() - t >= 0.25
    replica = RedisServer("--replicaof", "127.0.0.1", str(primary.port)).start()
    try:
        r = replica.client()
        wait_for(lambda: info(r).get("master_link_status") == "up", "master_link_status:up")
        assert info(r)["master_replid"] == info(p)["master_replid"]
        wait_equal(primary, replica, "the full sync")
        i = info(p)
        assert i["connected_slaves"] == 1 and i["repl_backlog_active"] == 1
        assert i["slave0"]["ip"] == "127.0.0.1" and i["slave0"]["port"] == replica.port
        assert i["slave0"]["state"] == "online"
        role = p.execute_command("ROLE")
        assert role[0] == b"master" and role[2][0][:2] == [b"127.0.0.1", str(replica.port).encode()]

        check_wait(primary)
        data = exercise(primary, replica, rng)
        check_wait(primary)
        assert any(db == 2 and k == b"bq:moved" for db, k in data)
        assert {db for db, _ in data} == set(range(DBS))
        wait_for(lambda: info(p)["slave0"]["offset"] == info(p)["master_repl_offset"], "the replica's ack")

        # The link drops: the replica continues from the backlog.
        r.execute_command("CLIENT", "KILL", "TYPE", "master")
        primary.client(db=3).set("after:kill", "1")
        wait_for(lambda: info(r).get("master_link_status") == "up", "the link back up")
        wait_equal(primary, replica, "the partial resync")
        assert "Successful partial resynchronization" in replica.log(), replica.log()
    finally:
        replica.stop()


def test_a_strata_replica_follows_a_strata_primary(primary):
    rng = random.Random(5202)
    seed(primary, rng)
    replica = Server().start()
    try:
        r = replica.client()
        assert r.execute_command("REPLICAOF", "127.0.0.1", primary.port) == b"OK"
        wait_for(lambda: info(r).get("master_link_status") == "up", "master_link_status:up")
        wait_equal(primary, replica, "the full sync")
        assert info(primary.client())["connected_slaves"] == 1
        check_wait(primary)
        exercise(primary, replica, rng)
        check_wait(primary)
        assert replica.client().execute_command("ROLE")[3] == b"connected"
    finally:
        replica.stop()
