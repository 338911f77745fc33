"""Every command of issue 6 through redis-py, in RESP2 and RESP3."""
import time

import pytest
import redis


def test_connection_commands(r):
    assert r.ping() is True
    assert r.echo("hi") == b"hi"
    assert r.execute_command("SELECT", 0) in (True, b"OK", "OK")
    with pytest.raises(redis.ResponseError, match="DB index is out of range"):
        r.execute_command("SELECT", 16)
    with pytest.raises(redis.ResponseError, match="DB index is out of range"):
        r.execute_command("SELECT", -1)
    assert r.client_setname("tester")
    assert r.client_getname() in (b"tester", "tester")
    assert isinstance(r.client_id(), int)
    assert r.execute_command("CLIENT", "SETINFO", "LIB-NAME", "x") in (True, b"OK", "OK")
    hello = r.execute_command("HELLO")
    as_dict = hello if isinstance(hello, dict) else dict(zip(hello[::2], hello[1::2]))
    assert as_dict[b"server"] == b"redis"
    assert as_dict[b"proto"] in (2, 3)
    for k in (b"version", b"id", b"mode", b"role", b"modules"):
        assert k in as_dict


def test_hello_versions(server):
    c = server.client(protocol=2)
    with pytest.raises(redis.ResponseError, match="NOPROTO"):
        c.execute_command("HELLO", 4)
    with pytest.raises(redis.ResponseError, match="Protocol version is not an integer"):
        c.execute_command("HELLO", "x")
    c.close()


def test_errors_keep_connection(r):
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("NOSUCHCMD", "a", "b")
    assert str(e.value) == "unknown command 'NOSUCHCMD', with args beginning with: 'a' 'b' "
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("GET")
    assert str(e.value) == "wrong number of arguments for 'get' command"
    r.set("s", "abc")
    with pytest.raises(redis.ResponseError) as e:
        r.incr("s")
    assert str(e.value) == "value is not an integer or out of range"
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("SET", "k", "v", "BOGUS")
    assert str(e.value) == "syntax error"
    with pytest.raises(redis.ResponseError) as e:
        r.hset("s", "f", "v")
    assert str(e.value).startswith("WRONGTYPE Operation against a key holding the wrong kind of value")
    assert r.ping()


def test_introspection(r):
    r.set("a", "1")
    r.hset("h", "f", "v")
    assert r.dbsize() == 2
    assert r.type("a") == b"string"
    assert r.type("h") == b"hash"
    assert r.type("nope") == b"none"
    cfg = r.config_get("save")
    assert "save" in {k.decode() if isinstance(k, bytes) else k for k in cfg}
    assert r.config_get("no-such-parameter") == {}
    appendonly = r.config_get("appendonly")
    assert len(appendonly) == 1
    info = r.info()
    for field in ("redis_version", "connected_clients", "used_memory", "total_commands_processed", "loading"):
        assert field in info, field
    assert info["db0"]["keys"] == 2
    assert "engine_pm_slots" in r.info("persistence")
    assert r.command_count() > 50
    raw = r.connection_pool.get_connection()
    try:
        raw.send_command("COMMAND", "DOCS")
        docs = raw.read_response()
        # One document per top-level command (a flat array in RESP2).
        names = docs[::2] if isinstance(docs, list) else list(docs)
        assert len(names) == r.command_count()
        assert b"get" in names or "get" in names
    finally:
        r.connection_pool.release(raw)


def test_del_unlink_exists_flush(r):
    r.mset({"a": 1, "b": 2, "c": 3})
    assert r.exists("a", "a", "b", "zz") == 3
    assert r.delete("a", "zz") == 1
    assert r.unlink("b") == 1
    assert r.exists("a", "b") == 0
    r.flushdb()
    assert r.dbsize() == 0
    r.set("x", 1)
    r.flushall()
    assert r.get("x") is None


def test_scan_iteration_types_and_match(r):
    for i in range(300):
        r.set(f"str:{i}", i)
    for i in range(50):
        r.hset(f"hash:{i}", "f", i)
    got = set(r.scan_iter(match="str:*", count=17))
    assert got == {f"str:{i}".encode() for i in range(300)}
    hashes = set(r.scan_iter(_type="hash", count=25))
    assert hashes == {f"hash:{i}".encode() for i in range(50)}
    assert set(r.scan_iter()) == got | hashes
    cursor, keys = r.scan(0, count=10)
    assert cursor != 0 and len(keys) >= 10
    with pytest.raises(redis.ResponseError, match="invalid cursor"):
        r.execute_command("SCAN", "abc")
    assert sorted(r.keys("hash:1*")) == sorted({f"hash:{i}".encode() for i in [1] + list(range(10, 20))})


def test_scan_sees_stable_keys_under_writes(r):
    for i in range(200):
        r.set(f"k{i}", i)
    seen = set()
    cursor = 0
    rounds = 0
    while True:
        cursor, keys = r.scan(cursor, count=20)
        seen.update(keys)
        r.set(f"new{rounds}", 1)  # writes during the iteration
        rounds += 1
        if cursor == 0 or rounds > 10000:
            break
    assert {f"k{i}".encode() for i in range(200)} <= seen


def test_strings(r):
    assert r.set("k", "v") is True
    assert r.get("k") == b"v"
    assert r.set("k", "w", nx=True) is None
    assert r.set("k", "w", xx=True) is True
    assert r.set("k2", "w", xx=True) is None
    assert r.set("k", "x", get=True) == b"w"
    assert r.setnx("k", "y") is False
    assert r.setnx("n", "y") is True
    assert r.setex("e", 100, "v") is True
    assert 95 <= r.ttl("e") <= 100
    assert r.set("px", "v", px=100000) and 99000 <= r.pttl("px") <= 100000
    assert r.set("ex", "v", ex=50) and 45 <= r.ttl("ex") <= 50
    assert r.set("ex", "v2", keepttl=True) and r.ttl("ex") > 0
    assert r.set("ex", "v3") and r.ttl("ex") == -1
    with pytest.raises(redis.ResponseError, match="invalid expire time in 'set' command"):
        r.set("bad", "v", ex=0)
    with pytest.raises(redis.ResponseError, match="invalid expire time in 'setex' command"):
        r.setex("bad", -1, "v")
    assert r.mset({"a": "1", "b": "2"}) is True
    assert r.mget("a", "b", "missing", "e") == [b"1", b"2", None, b"v"]
    r.hset("h", "f", "v")
    assert r.mget("h") == [None]
    assert r.incr("cnt") == 1
    assert r.incrby("cnt", 10) == 11
    assert r.decr("cnt") == 10
    assert r.decrby("cnt", 5) == 5
    assert r.incrby("cnt", -7) == -2
    r.set("big", str(2**63 - 1))
    with pytest.raises(redis.ResponseError, match="increment or decrement would overflow"):
        r.incr("big")
    assert r.append("ap", "ab") == 2
    assert r.append("ap", "cd") == 4
    assert r.get("ap") == b"abcd"
    assert r.strlen("ap") == 4 and r.strlen("none") == 0
    assert r.getdel("ap") == b"abcd"
    assert r.getdel("ap") is None
    assert r.exists("ap") == 0
    binary = bytes(range(256)) * 4
    r.set(b"bin\x00key", binary)
    assert r.get(b"bin\x00key") == binary
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.get("h")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.set("h", "x", get=True)
    assert r.set("h", "now a string") is True  # SET replaces any type
    assert r.type("h") == b"string"


def test_hashes(r):
    assert r.hset("h", mapping={"a": "1", "b": "2"}) == 2
    assert r.hset("h", "a", "3") == 0
    assert r.execute_command("HSET", "h", "c", "4", "d", "5") == 2
    assert r.hmset("h2", {"x": "1"}) is True
    assert r.execute_command("HMSET", "h2", "y", "2") in (True, b"OK", "OK")
    assert r.hget("h", "a") == b"3"
    assert r.hget("h", "zz") is None
    assert r.hmget("h", "a", "zz", "b") == [b"3", None, b"2"]
    assert r.hgetall("h") == {b"a": b"3", b"b": b"2", b"c": b"4", b"d": b"5"}
    assert r.hgetall("nohash") == {}
    assert r.hlen("h") == 4
    assert r.hexists("h", "a") is True and r.hexists("h", "zz") is False
    assert r.hdel("h", "a", "zz") == 1
    assert r.hlen("h") == 3
    assert sorted(r.hkeys("h")) == [b"b", b"c", b"d"]
    assert r.hincrby("h", "n", 5) == 5
    assert r.hdel("h", "b", "c", "d", "n") == 4
    assert r.exists("h") == 0
    with pytest.raises(redis.ResponseError, match="wrong number of arguments for 'hset' command"):
        r.execute_command("HSET", "h", "a", "1", "b")
    r.set("s", "x")
    for call in (lambda: r.hget("s", "a"), lambda: r.hgetall("s"), lambda: r.hlen("s")):
        with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
            call()


def pairs(x):
    return [tuple(p) for p in x]


def test_sorted_sets(r):
    assert r.zadd("z", {"a": 1, "b": 2.5, "c": -3}) == 3
    assert r.zadd("z", {"a": 10}) == 0
    assert r.zadd("z", {"a": 11, "d": 0}, ch=True) == 2
    assert r.zadd("z", {"a": 1}, nx=True) == 0
    assert r.zadd("z", {"zz": 1}, xx=True) == 0
    assert r.zcard("z") == 4
    assert r.zscore("z", "b") == 2.5
    assert r.zscore("z", "none") is None
    assert r.zrangebyscore("z", "-inf", "+inf") == [b"c", b"d", b"b", b"a"]
    assert r.zrangebyscore("z", "(0", "11") == [b"b", b"a"]
    assert r.zrangebyscore("z", "-inf", "(2.5") == [b"c", b"d"]
    assert pairs(r.zrangebyscore("z", 0, "+inf", withscores=True)) == [(b"d", 0.0), (b"b", 2.5), (b"a", 11.0)]
    assert r.zrangebyscore("z", "-inf", "+inf", start=1, num=2) == [b"d", b"b"]
    # Java YCSB sends Double.toString() forms such as -1.23456789E9.
    r.zadd("idx", {"k1": -1.23456789e9, "k2": 5e3})
    assert r.execute_command("ZRANGEBYSCORE", "idx", "-1.23456789E9", "+inf", "LIMIT", "0", "10") == [b"k1", b"k2"]
    assert r.execute_command("ZRANGEBYSCORE", "idx", "5.0E3", "Infinity") == [b"k2"]
    with pytest.raises(redis.ResponseError, match="min or max is not a float"):
        r.zrangebyscore("z", "abc", "1")
    with pytest.raises(redis.ResponseError, match="not a valid float"):
        r.zadd("z", {"a": "x"})
    assert r.zrange("z", 0, 1) == [b"c", b"d"]
    # Highest first: redis-py's desc=True sends ZREVRANGE, byscore=True ZRANGE ... BYSCORE.
    assert r.zrange("z", 0, 1, desc=True) == [b"a", b"b"]
    assert r.zrevrange("z", 0, -1) == [b"a", b"b", b"d", b"c"]
    assert r.zrevrangebyscore("z", "+inf", "(0") == [b"a", b"b"]
    assert r.zrange("z", "(0", "+inf", byscore=True, offset=1, num=1) == [b"a"]
    assert r.zrank("z", "d") == 1 and r.zrevrank("z", "d") == 2 and r.zrank("z", "none") is None
    assert r.zrem("z", "c", "none") == 1
    popped = r.zpopmin("z")
    assert popped in ([(b"d", 0.0)], [b"d", 0.0])  # RESP3: flat pair, as Redis sends
    assert pairs(r.zpopmin("z", 2)) == [(b"b", 2.5), (b"a", 11.0)]
    assert r.exists("z") == 0
    assert r.zpopmin("z") == []
    assert r.zincrby("zi", 2, "m") == 2.0
    assert r.zincrby("zi", 0.5, "m") == 2.5
    assert r.zcount("zi", 0, 3) == 1


def test_lists(r):
    assert r.lpush("l", "a", "b") == 2
    assert r.rpush("l", "c", "d") == 4
    assert r.lrange("l", 0, -1) == [b"b", b"a", b"c", b"d"]
    assert r.lrange("l", 1, 2) == [b"a", b"c"]
    assert r.lrange("l", -2, 100) == [b"c", b"d"]
    assert r.lrange("l", 5, 10) == []
    assert r.llen("l") == 4
    assert r.lindex("l", -1) == b"d"
    assert r.lpop("l") == b"b"
    assert r.rpop("l") == b"d"
    assert r.lpop("l", 5) == [b"a", b"c"]
    assert r.exists("l") == 0
    assert r.lpop("l") is None
    assert r.lpop("l", 2) is None
    assert r.llen("l") == 0
    for i in range(100):
        r.rpush("big", i)
    assert r.lrange("big", 95, -1) == [str(i).encode() for i in range(95, 100)]


def test_sets(r):
    assert r.sadd("s", "a", "b", "c", "a") == 3
    assert r.sadd("s", "a") == 0
    assert r.scard("s") == 3
    assert r.smembers("s") == {b"a", b"b", b"c"}
    assert r.sismember("s", "a") and not r.sismember("s", "z")
    assert r.srem("s", "a", "z") == 1
    popped = r.spop("s")
    assert popped in (b"b", b"c")
    assert r.scard("s") == 1
    rest = r.spop("s", 5)
    assert set(rest) == {b"b", b"c"} - {popped}
    assert r.exists("s") == 0
    assert r.spop("s") is None
    assert r.smembers("s") == set()


def test_expiry(r):
    r.set("k", "v")
    assert r.ttl("k") == -1
    assert r.ttl("missing") == -2 and r.pttl("missing") == -2
    assert r.expire("k", 100) is True
    assert 99 <= r.ttl("k") <= 100
    assert r.persist("k") is True
    assert r.persist("k") is False
    assert r.ttl("k") == -1
    assert r.pexpire("k", 100000) is True
    assert r.expire("missing", 10) is False
    r.hset("h", "f", "v")
    assert r.expire("h", 1000) is True
    assert r.info("keyspace")["db0"]["expires"] == 2
    assert r.expire("k", 10, nx=True) is False
    assert r.expire("k", 10, xx=True) is True
    assert r.expire("k", -1) is True  # deletes
    assert r.exists("k") == 0
    # Short expiry: the key disappears on read and is then swept.
    r.set("short", "v", px=1)
    r.hset("shorth", "f", "v")
    r.pexpire("shorth", 1)
    time.sleep(0.05)
    assert r.get("short") is None
    assert r.hgetall("shorth") == {}
    assert r.exists("short", "shorth") == 0
    deadline = time.monotonic() + 10
    while r.dbsize() > 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert r.dbsize() == 1  # only "h" is left
    assert int(r.info("stats")["expired_keys"]) >= 2


def test_pipeline_in_order(r):
    p = r.pipeline(transaction=False)
    for i in range(500):
        p.set(f"p{i}", i)
        p.incr("counter")
        p.get(f"p{i}")
    out = p.execute()
    assert out[2::3] == [str(i).encode() for i in range(500)]
    assert out[1::3] == list(range(1, 501))
    # A failing command inside a pipeline fails alone.
    p = r.pipeline(transaction=False)
    p.set("pa", "1").hset("pa", "f", "v").incr("pa").get("pa").lpush("pl", "x").rpop("pl")
    res = p.execute(raise_on_error=False)
    assert res[0] is True and isinstance(res[1], redis.ResponseError)
    assert res[2:] == [2, b"2", 1, b"x"]


def test_multi_exec(r):
    p = r.pipeline(transaction=True)
    p.set("a", 1).incr("a").hset("h", "f", "v").hgetall("h").get("a")
    assert p.execute() == [True, 2, 1, {b"f": b"v"}, b"2"]
    # Errors at queue time abort the whole transaction.
    r.execute_command("MULTI")
    r.execute_command("SET", "x", "1")
    with pytest.raises(redis.ResponseError):
        r.execute_command("GET")
    with pytest.raises(redis.ResponseError, match="Transaction discarded because of previous errors"):
        r.execute_command("EXEC")
    assert r.get("x") is None
    # A run-time error fails only that command.
    p = r.pipeline(transaction=True)
    p.set("y", "1").hset("y", "f", "v").set("z", "2")
    res = p.execute(raise_on_error=False)
    assert res[0] is True and isinstance(res[1], redis.ResponseError) and res[2] is True
    with pytest.raises(redis.ResponseError, match="EXEC without MULTI"):
        r.execute_command("EXEC")
    with pytest.raises(redis.ResponseError, match="DISCARD without MULTI"):
        r.execute_command("DISCARD")
    r.execute_command("MULTI")
    r.execute_command("SET", "d", "1")
    r.execute_command("DISCARD")
    assert r.get("d") is None


def test_multi_exec_is_atomic_against_other_clients(server):
    clients = [server.client() for _ in range(4)]
    clients[0].set("ctr", 0)
    import threading

    def work(c):
        for _ in range(50):
            p = c.pipeline(transaction=True)
            p.incr("ctr").incr("ctr")
            a, b = p.execute()
            assert b == a + 1

    ts = [threading.Thread(target=work, args=(c,)) for c in clients]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert int(clients[0].get("ctr")) == 400
    for c in clients:
        c.close()


def test_concurrent_incr_is_atomic(server):
    import threading
    c0 = server.client()
    c0.delete("n")

    def work():
        c = server.client()
        for _ in range(200):
            c.incr("n")
        c.close()

    ts = [threading.Thread(target=work) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert int(c0.get("n")) == 1600
    c0.close()


def test_resp3_types(server):
    c = server.client(protocol=3)
    c.flushall()
    c.hset("h", "a", "1")
    c.sadd("s", "x")
    c.zadd("z", {"m": 1.5})
    raw = c.connection_pool.get_connection()
    try:
        raw.send_command("HGETALL", "h")
        assert raw.read_response() == {b"a": b"1"}
        raw.send_command("SMEMBERS", "s")
        assert list(raw.read_response()) == [b"x"]
        raw.send_command("ZSCORE", "z", "m")
        assert raw.read_response() == 1.5
        raw.send_command("GET", "missing")
        assert raw.read_response() is None
    finally:
        c.connection_pool.release(raw)
    c.close()


def test_large_value(r):
    v = b"x" * (8 << 20)
    r.set("big", v)
    assert r.get("big") == v
    assert r.strlen("big") == 8 << 20


def test_watch(server):
    a, b = server.client(), server.client()
    a.set("w", "1")
    p = a.pipeline(transaction=True)
    p.watch("w")
    assert p.get("w") == b"1"
    b.set("w", "2")  # another client changes the watched key
    p.multi()
    p.set("w", "3")
    with pytest.raises(redis.WatchError):
        p.execute()
    assert a.get("w") == b"2"
    # Unchanged watched key: EXEC runs.
    p = a.pipeline(transaction=True)
    p.watch("w")
    p.multi()
    p.set("w", "4")
    assert p.execute() == [True]
    assert a.get("w") == b"4"
    a.close()
    b.close()


def watch_then(client, key, change):
    """WATCH key, run change() from elsewhere, then MULTI/SET/EXEC: True if
    EXEC ran (the watch saw no change)."""
    p = client.pipeline(transaction=True)
    p.watch(key)
    change()
    p.multi()
    p.set("watch:marker", "x")
    try:
        p.execute()
        return True
    except redis.WatchError:
        return False


def test_watch_sees_every_change_and_only_changes(server):
    a, b = server.client(), server.client()
    b.delete("wl", "wh", "wz", "ws", "wd", "wt", "wb")
    b.rpush("wl", *range(10))
    # A hash big enough to be stored field by field (not packed in its meta).
    b.hset("wh", mapping={"f%d" % i: "v" * 100 for i in range(300)})
    b.zadd("wz", {"m%d" % i: i for i in range(300)})
    b.sadd("ws", "a", "b")
    b.set("wt", "v")
    # Changes that touch only a member entry (not the key's meta) or only
    # the expiry are seen.
    changes = [
        ("wl", lambda: b.lset("wl", 5, "x")),
        ("wh", lambda: b.hset("wh", "f7", "changed")),
        ("wz", lambda: b.zadd("wz", {"m9": 1000})),
        ("ws", lambda: b.srem("ws", "a")),
        ("wt", lambda: b.expire("wt", 100)),
        ("wt", lambda: b.persist("wt")),
    ]
    for key, change in changes:
        assert not watch_then(a, key, change), key
    # What changes nothing is not a change (as in Redis): an SMOVE that
    # adds nothing to its destination, a delete of nothing, a read.
    b.sadd("wsrc", "b")  # "b" is in "ws" already
    assert watch_then(a, "ws", lambda: b.smove("wsrc", "ws", "b"))
    assert b.smembers("wsrc") == set()
    assert watch_then(a, "ws", lambda: b.srem("ws", "nope"))
    assert watch_then(a, "wd", lambda: b.delete("wd"))
    assert watch_then(a, "wh", lambda: b.hgetall("wh"))
    a.close()
    b.close()


def test_watch_based_increment_is_correct_under_contention(server):
    import threading
    c0 = server.client()
    c0.set("wctr", 0)

    def work():
        c = server.client()
        for _ in range(30):
            def incr(pipe):
                v = int(pipe.get("wctr"))
                pipe.multi()
                pipe.set("wctr", v + 1)
            c.transaction(incr, "wctr")
        c.close()

    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert int(c0.get("wctr")) == 120
    c0.close()


def test_dump_restore_and_client_unblock(server, r):
    r.delete("d:h", "d:h2", "d:z", "d:z2")
    r.hset("d:h", mapping={"a": "1", "b": "x" * 1000})
    r.zadd("d:z", {"m": 1.5, "n": -3})
    r.expire("d:z", 100)
    for src, dst in (("d:h", "d:h2"), ("d:z", "d:z2")):
        payload = r.dump(src)
        assert r.restore(dst, r.pttl(src) if r.pttl(src) > 0 else 0, payload)
        with pytest.raises(redis.ResponseError, match="BUSYKEY"):
            r.restore(dst, 0, payload)
        assert r.restore(dst, 0, payload, replace=True)
    assert r.hgetall("d:h2") == r.hgetall("d:h")
    assert [tuple(p) for p in r.zrange("d:z2", 0, -1, withscores=True)] == [(b"n", -3.0), (b"m", 1.5)]
    assert r.dump("d:nokey") is None
    with pytest.raises(redis.ResponseError, match="checksum"):
        r.restore("d:bad", 0, b"\x00\x01a\x0a\x00" + b"\x00" * 8)
    # A client waiting in BLPOP is released by CLIENT UNBLOCK from another.
    waiter = server.client()
    wid = waiter.client_id()
    import threading
    got = []
    t = threading.Thread(target=lambda: got.append(waiter.blpop(["d:empty"], timeout=0)))
    t.start()
    deadline = time.time() + 10
    while r.info("clients")["blocked_clients"] < 1:
        assert time.time() < deadline
        time.sleep(0.01)
    assert r.client_unblock(wid) == 1
    t.join(10)
    assert got == [None]
    assert r.client_unblock(wid) == 0
    waiter.close()
