"""Storage modes and restarts: engine, memory with command log (always,
everysec, no), memory with snapshots, graceful shutdown on SIGTERM."""
import os
import shutil
import tempfile
import time

import pytest

from conftest import Server


def fill(c, n=200):
    p = c.pipeline(transaction=False)
    for i in range(n):
        p.set(f"s{i}", i)
    p.hset("h", mapping={"a": "1", "b": "2"})
    p.zadd("z", {"m1": 1.5, "m2": -2})
    p.rpush("l", "x", "y", "z")
    p.sadd("set", "p", "q")
    p.set("ttl", "v", ex=1000)
    p.execute()


def check(c, n=200):
    assert c.dbsize() == n + 5
    assert c.mget([f"s{i}" for i in range(n)]) == [str(i).encode() for i in range(n)]
    assert c.hgetall("h") == {b"a": b"1", b"b": b"2"}
    assert [tuple(x) for x in c.zrangebyscore("z", "-inf", "+inf", withscores=True)] == [(b"m2", -2.0), (b"m1", 1.5)]
    assert c.lrange("l", 0, -1) == [b"x", b"y", b"z"]
    assert c.smembers("set") == {b"p", b"q"}
    assert 0 < c.ttl("ttl") <= 1000
    assert c.info("keyspace")["db0"]["expires"] == 1


MODES = {
    "engine": [],
    "engine-sync": ["--durability", "sync"],
    "memory-aof-always": ["--storage", "memory", "--appendfsync", "always"],
    "memory-aof-everysec": ["--storage", "memory", "--appendfsync", "everysec"],
    "memory-aof-no": ["--storage", "memory", "--appendonly", "yes", "--appendfsync", "no"],
    "memory-snapshot": ["--storage", "memory", "--snapshot-seconds", "3600"],
}


@pytest.mark.parametrize("mode", list(MODES))
def test_graceful_restart_keeps_everything(mode):
    d = tempfile.mkdtemp(prefix="strata-persist-")
    try:
        s = Server(*MODES[mode], dir=d).start()
        c = s.client()
        fill(c)
        c.close()
        assert s.terminate() == 0, s.log()
        s = Server(*MODES[mode], dir=d, port=s.port).start()
        c = s.client()
        check(c)
        c.close()
        assert s.terminate() == 0
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("mode", ["engine", "memory-aof-always", "memory-aof-no"])
def test_kill9_keeps_acknowledged_writes(mode):
    # A process crash loses nothing acknowledged with the engine or a command log.
    d = tempfile.mkdtemp(prefix="strata-persist-")
    try:
        s = Server(*MODES[mode], dir=d).start()
        c = s.client()
        fill(c)
        c.close()
        s.kill9()
        s = Server(*MODES[mode], dir=d, port=s.port).start()
        c = s.client()
        check(c)
        c.close()
        s.stop()
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("mode", ["engine", "memory-aof-always", "memory-aof-everysec", "memory-snapshot"])
def test_flushall_then_writes_survive_a_restart(mode):
    # FLUSHALL must keep the keyspace version key, or the next start
    # refuses the directory as "not a strata-server keyspace".
    d = tempfile.mkdtemp(prefix="strata-persist-")
    try:
        s = Server(*MODES[mode], dir=d).start()
        c = s.client()
        c.set("a", 1)
        c.flushall()
        c.set("b", 2)
        with c.pipeline(transaction=True) as p:  # MULTI { FLUSHDB; SET } EXEC, applied as one step
            p.flushdb()
            p.set("c", 3)
            p.execute()
        c.close()
        assert s.terminate() == 0, s.log()
        s = Server(*MODES[mode], dir=d, port=s.port).start()
        c = s.client()
        assert (c.get("a"), c.get("b"), c.get("c"), c.dbsize()) == (None, None, b"3", 1)
        c.close()
        s.stop()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_switching_from_snapshots_to_a_command_log_keeps_the_data():
    d = tempfile.mkdtemp(prefix="strata-persist-")
    try:
        s = Server(*MODES["memory-snapshot"], dir=d).start()
        c = s.client()
        fill(c)
        c.close()
        assert s.terminate() == 0, s.log()
        # The first start with a log builds it from the snapshot before serving;
        # a kill right after must not leave an empty log that hides the snapshot.
        s = Server(*MODES["memory-aof-everysec"], dir=d, port=s.port).start()
        s.kill9()
        s = Server(*MODES["memory-aof-everysec"], dir=d, port=s.port).start()
        c = s.client()
        check(c)
        c.close()
        s.stop()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_memory_without_persistence_starts_empty():
    d = tempfile.mkdtemp(prefix="strata-persist-")
    try:
        s = Server("--storage", "memory", dir=d).start()
        c = s.client()
        fill(c)
        c.close()
        assert s.terminate() == 0
        s = Server("--storage", "memory", dir=d, port=s.port).start()
        assert s.client().dbsize() == 0
        s.stop()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_save_and_bgsave_write_a_snapshot():
    d = tempfile.mkdtemp(prefix="strata-persist-")
    try:
        s = Server("--storage", "memory", "--snapshot-seconds", "3600", dir=d).start()
        c = s.client()
        fill(c)
        assert c.save()
        assert c.bgsave()
        assert os.path.exists(os.path.join(d, "data", "dump.strata"))
        # BGSAVE runs in the background: wait until it has finished.
        deadline = time.monotonic() + 60
        while c.info("persistence")["rdb_bgsave_in_progress"] and time.monotonic() < deadline:
            time.sleep(0.02)
        assert c.info("persistence")["rdb_saves"] >= 2
        c.close()
        s.kill9()  # the snapshot, not the shutdown, carries the data
        s = Server("--storage", "memory", "--snapshot-seconds", "3600", dir=d, port=s.port).start()
        check(s.client())
        s.stop()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_shutdown_command_stops_the_server():
    s = Server("--storage", "memory", "--appendonly", "yes").start()
    c = s.client()
    c.set("k", "v")
    try:
        c.shutdown()
    except Exception:
        pass
    assert s.proc.wait(timeout=60) == 0
    s.stop()


def test_second_server_on_same_dir_is_refused():
    s = Server().start()
    other = Server(dir=s.dir)
    with pytest.raises(RuntimeError, match="exited early"):
        other.start()
    s.stop()


def test_sigterm_under_load_keeps_every_acknowledged_write():
    """With snapshots only, data survives a restart only through the final
    snapshot of a graceful shutdown: every write acknowledged before SIGTERM
    must be in it, and the server must exit 0."""
    import threading
    import time

    import redis as redis_mod
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    d = tempfile.mkdtemp(prefix="strata-persist-")
    args = ["--storage", "memory", "--snapshot-seconds", "3600"]
    acked, pending = {}, {}

    def writer(tid):
        c = redis_mod.Redis(port=s.port, protocol=2, socket_timeout=30, retry=Retry(NoBackoff(), 0))
        i = 0
        try:
            while True:
                i += 1
                key = f"w{tid}:{i % 100}"
                pending[key] = str(i)
                c.set(key, i)
                acked[key] = str(i)
                pending.pop(key, None)
        except (redis_mod.ConnectionError, redis_mod.TimeoutError, OSError):
            pass

    try:
        s = Server(*args, dir=d).start()
        threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        assert s.terminate() == 0, s.log()
        for t in threads:
            t.join(timeout=60)
        assert acked
        s = Server(*args, dir=d, port=s.port).start()
        c = s.client()
        keys = sorted(set(acked) | set(pending))
        for key, got in zip(keys, c.mget(keys)):
            got = got.decode() if got is not None else None
            assert got in {acked.get(key), pending.get(key)}, (key, got, acked.get(key), pending.get(key))
        c.close()
        s.stop()
    finally:
        shutil.rmtree(d, ignore_errors=True)
