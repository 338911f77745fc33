"""DEBUG DIGEST and DEBUG DIGEST-VALUE against a real redis-server 7.0: the
same commands sent to both (every data type, several databases, expiries,
collections small and large, integers and odd scores) give the same
digests, and the digest follows changes of contents but not of TTLs."""
import random

import pytest

from conftest import RedisServer


@pytest.fixture(scope="module")
def real():
    s = RedisServer().start()
    yield s
    s.stop()


def fill(c, rng, db):
    """Writes a seeded mix of every type into database `db` of client `c`."""
    c.execute_command("SELECT", db)
    p = c.pipeline(transaction=False)
    for i in range(300):
        kind = rng.randrange(6)
        k = f"k{db}:{i}"
        if kind == 0:
            p.set(k, rng.choice([str(rng.randrange(-10**12, 10**12)), "x" * rng.randrange(0, 100), "hello"]))
        elif kind == 1:
            p.rpush(k, *[rng.choice(["a", "b", str(rng.randrange(1000)), "long" * 20]) for _ in range(rng.randrange(1, 200))])
        elif kind == 2:
            p.sadd(k, *[str(rng.randrange(10**6)) if rng.random() < 0.5 else f"m{rng.randrange(500)}"
                        for _ in range(rng.randrange(1, 300))])
        elif kind == 3:
            n = rng.randrange(1, 300)
            p.hset(k, mapping={f"f{j}": rng.choice(["v", str(j), "w" * 70]) for j in range(n)})
        elif kind == 4:
            scores = [1.5, 0.1, 1e20, -3, 2.5e-7, 1 / 3, 12345678901234567, float("inf"), -0.0001]
            p.zadd(k, {f"z{j}": rng.choice(scores) if rng.random() < 0.5 else rng.uniform(-1e6, 1e6)
                       for j in range(rng.randrange(1, 200))})
        else:
            p.set(k, "expiring", px=rng.randrange(100_000, 900_000))
    p.execute()


def digests(server, dbs):
    c = server.client()
    out = [c.execute_command("DEBUG", "DIGEST")]
    for db in dbs:
        c.execute_command("SELECT", db)
        keys = sorted(c.keys("*"))
        out.append(list(zip(keys, c.execute_command("DEBUG", "DIGEST-VALUE", *keys))))
    c.close()
    return out


def test_digests_equal_redis_for_the_same_data(server, real):
    dbs = [0, 1, 5]
    for s in (server, real):
        c = s.client()
        c.flushall()
        rng = random.Random(7)
        for db in dbs:
            fill(c, rng, db)
        c.close()
    ours, theirs = digests(server, dbs), digests(real, dbs)
    assert ours[0] != "0" * 40
    assert ours == theirs


def test_digest_follows_contents_not_ttls(server):
    c = server.client(decode_responses=True)
    c.flushall()
    assert c.execute_command("DEBUG", "DIGEST") == "0" * 40
    assert c.execute_command("DEBUG", "DIGEST-VALUE", "nothing") == ["0" * 40]
    c.set("a", "1", ex=1000)
    first = c.execute_command("DEBUG", "DIGEST")
    c.expire("a", 5000)
    assert c.execute_command("DEBUG", "DIGEST") == first
    c.persist("a")
    assert c.execute_command("DEBUG", "DIGEST") != first
    c.execute_command("SELECT", 1)
    c.set("a", "1")
    moved = c.execute_command("DEBUG", "DIGEST")
    c.execute_command("SELECT", 0)
    c.delete("a")
    assert c.execute_command("DEBUG", "DIGEST") not in (moved, "0" * 40)
    with pytest.raises(Exception, match="unknown subcommand"):
        c.execute_command("DEBUG", "SEGFAULT")
    assert c.execute_command("DEBUG", "SLEEP", "0") in ("OK", True)
    c.close()


def test_populate_writes_what_redis_writes(server, real):
    """DEBUG POPULATE count [prefix] [size] gives the keys and values Redis
    gives (equal digests), leaves existing keys alone, and refuses a bad
    count as Redis does."""
    for s in (server, real):
        c = s.client()
        c.flushall()
        c.set("key:3", "mine")
        assert c.execute_command("DEBUG", "POPULATE", 50) in (b"OK", "OK", True)
        c.execute_command("DEBUG", "POPULATE", 20, "p", 12)
        c.execute_command("DEBUG", "POPULATE", 10, "q", 3)
        c.execute_command("SELECT", 2)
        c.execute_command("DEBUG", "POPULATE", 7, "other")
        with pytest.raises(Exception, match="must be positive"):
            c.execute_command("DEBUG", "POPULATE", -1)
        c.close()
    ours, theirs = digests(server, [0, 2]), digests(real, [0, 2])
    assert ours == theirs
    c = server.client()
    assert c.get("key:3") == b"mine"
    assert c.get("p:7") == b"value:7" + b"\0" * 5
    assert c.get("q:9") == b"val"
    assert c.dbsize() == 50 + 20 + 10
    c.close()


def test_rdb_key_save_delay_slows_a_full_sync(server):
    """CONFIG SET rdb-key-save-delay (microseconds per key written into a
    full sync's image) is kept, shown by CONFIG GET, refused when not an
    integer, and makes an image of 200 keys take at least 200 x 2 ms."""
    import time

    c = server.client()
    c.flushall()
    c.execute_command("DEBUG", "POPULATE", 200)
    assert c.config_set("rdb-key-save-delay", 2000)
    assert c.config_get("rdb-key-save-delay") == {"rdb-key-save-delay": "2000"}
    with pytest.raises(Exception, match="integer"):
        c.config_set("rdb-key-save-delay", "soon")
    replica = server.__class__().start()
    try:
        r = replica.client()
        started = time.monotonic()
        r.execute_command("REPLICAOF", "127.0.0.1", server.port)
        while r.info("replication").get("master_link_status") != "up":
            assert time.monotonic() - started < 60, "no sync"
            time.sleep(0.05)
        assert time.monotonic() - started >= 0.4
        assert r.dbsize() == 200
        r.close()
    finally:
        c.config_set("rdb-key-save-delay", 0)
        replica.stop()
        c.close()
