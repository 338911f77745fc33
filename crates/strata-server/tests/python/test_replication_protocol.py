"""The replication protocol's core against strata-server and redis-server 7:
PSYNC2 (a chain primary -> replica -> sub-replica at equal offsets, partial
resyncs after a dropped link, after REPLICAOF NO ONE of one replica with
the other pointed at it), full syncs that complete while more than
repl-backlog-size is written during them (diskless and disk-backed),
min-replicas-to-write and replica-serve-stale-data.

Links are dropped through a small TCP relay the test owns (`Relay`), so
that no server has to support killing its replication link.
"""
import os
import socket
import threading
import time

import pytest
import redis

from conftest import RedisServer, Server, wait_for

DBS = 3


def info(c, section="replication"):
    return c.info(section)


def dump(server):
    """Every key of databases 0..DBS-1 with its type and value."""
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
            else:
                v = sorted(c.smembers(k)) if t == "set" else None
            out[(db, k)] = (t, v)
        c.close()
    return out


def offsets_equal(primary, *replicas):
    """Whether every replica's link is up at the primary's offset (a
    replica in a full sync has the image's offset before it is loaded)."""
    want = info(primary.client())["master_repl_offset"]
    return all(i.get("slave_repl_offset") == want and i.get("master_link_status") == "up"
               for i in (info(r.client()) for r in replicas))


def wait_equal(primary, *replicas, what="the replicas"):
    """Waits until every replica acknowledged the primary's offset, then
    compares every key."""
    wait_for(lambda: offsets_equal(primary, *replicas), f"{what} to reach the primary's offset")
    want = dump(primary)
    assert want, "the primary holds data"
    for r in replicas:
        assert dump(r) == want, f"{what}: contents differ"


def write_some(server, tag, n=300):
    for db in range(DBS):
        c = server.client(db=db)
        p = c.pipeline(transaction=False)
        for i in range(n):
            p.set(f"{tag}:s:{i}", f"{tag}-{db}-{i}")
            p.incr(f"{tag}:counter")
            p.rpush(f"{tag}:l:{i % 7}", i)
            p.hset(f"{tag}:h:{i % 5}", f"f{i}", i)
        p.execute()
        c.close()


def stats(server):
    i = info(server.client(), "stats")
    return i["sync_full"], i["sync_partial_ok"], i["sync_partial_err"]


class Relay:
    """A TCP relay from a free port to `port`: `cut()` closes every
    connection through it (a dropped link); new ones are accepted."""

    def __init__(self, port):
        self.target = port
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                a, _ = self.sock.accept()
            except OSError:
                return
            try:
                b = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                a.close()
                continue
            with self.lock:
                self.conns += [a, b]
            for x, y in ((a, b), (b, a)):
                threading.Thread(target=self._pump, args=(x, y), daemon=True).start()

    @staticmethod
    def _pump(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        with self.lock:
            conns, self.conns = self.conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self):
        self.closed = True
        self.cut()
        self.sock.close()


@pytest.fixture
def servers():
    """Starts strata servers on demand; stops them all at the end."""
    started = []

    def start(*args):
        s = Server(*args).start()
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


def follow(replica, port):
    c = replica.client()
    assert c.execute_command("REPLICAOF", "127.0.0.1", port) == b"OK"
    wait_for(lambda: info(c).get("master_link_status") == "up", "the link up")


def test_a_chain_converges_at_the_primarys_offsets(servers):
    p, r, s = servers(), servers(), servers()
    write_some(p, "a")
    follow(r, p.port)
    follow(s, r.port)
    write_some(p, "b")
    wait_equal(p, r, s, what="replica and sub-replica")
    ids = {info(x.client())["master_replid"] for x in (p, r, s)}
    assert len(ids) == 1, ids
    # The sub-replica is fed by the replica, not by the primary.
    assert info(p.client())["connected_slaves"] == 1
    assert info(r.client())["connected_slaves"] == 1
    assert stats(r)[0] == 1 and stats(p)[0] == 1


def test_a_dropped_link_resyncs_partially(servers):
    p, r = servers(), servers()
    relay = Relay(p.port)
    try:
        write_some(p, "a")
        follow(r, relay.port)
        wait_equal(p, r)
        assert stats(p) == (1, 0, 0)
        for round in range(3):
            relay.cut()
            write_some(p, f"cut{round}", 50)
            wait_for(lambda: stats(p)[1] == round + 1, "a partial resync")
            wait_equal(p, r, what="after the partial resync")
        assert stats(p) == (1, 3, 0), "no full sync after the first"
        assert "partial resynchronization" in r.log()
    finally:
        relay.close()


def test_a_promoted_replica_continues_the_other(servers):
    p, r1, r2 = servers(), servers(), servers()
    write_some(p, "a")
    follow(r1, p.port)
    follow(r2, p.port)
    write_some(p, "b")
    wait_equal(p, r1, r2)
    old = info(p.client())["master_replid"]
    offset = info(p.client())["master_repl_offset"]
    p.stop()
    c1 = r1.client()
    assert c1.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
    i = info(c1)
    assert i["role"] == "master" and i["master_replid2"] == old
    assert i["master_repl_offset"] == offset and i["second_repl_offset"] == offset + 1
    assert stats(r1) == (0, 0, 0)
    c1.set("after:promotion", "1")
    follow(r2, r1.port)
    wait_for(lambda: stats(r1)[1] == 1, "a partial resync with the promoted replica")
    write_some(r1, "c", 50)
    wait_equal(r1, r2, what="after the failover")
    assert stats(r1) == (0, 1, 0), "no full sync"
    assert info(r2.client())["master_replid"] == info(c1)["master_replid"]


def test_a_sync_cut_before_its_image_loaded_is_not_continued(servers):
    """A replica whose full sync is cut in the middle of the image holds
    only part of the primary's data: when it reconnects it must sync in
    full again, not continue the stream from the image's offset (which
    the primary's backlog still holds) over half a keyspace."""
    p, r = servers(), servers()
    relay = Relay(p.port)
    try:
        cp = p.client()
        cp.config_set("repl-diskless-sync", "no")
        big = b"x" * 100_000
        pipe = cp.pipeline(transaction=False)
        for i in range(500):
            pipe.set(f"big:{i}", big)
        pipe.execute()
        cr = r.client()
        assert cr.execute_command("REPLICAOF", "127.0.0.1", relay.port) == b"OK"
        wait_for(lambda: info(cr).get("master_sync_read_bytes", 0) > 0, "the image to arrive", 60)
        relay.cut()
        wait_for(lambda: info(cr).get("master_link_status") == "up", "the link up again")
        wait_equal(p, r, what="the replica whose sync was cut")
        full, partial, _ = stats(p)
        assert (full, partial) == (2, 0), f"a second full sync, no partial one: {stats(p)}"
    finally:
        relay.close()


def test_redis_replica_of_strata_and_strata_replica_of_redis_resync_partially(servers):
    p = servers()
    relay = Relay(p.port)
    redis_replica = RedisServer("--replicaof", "127.0.0.1", str(relay.port)).start()
    redis_primary = RedisServer().start()
    try:
        rr = redis_replica.client()
        write_some(p, "a")
        wait_for(lambda: info(rr).get("master_link_status") == "up", "the Redis replica's link")
        wait_equal(p, redis_replica)
        relay.cut()
        write_some(p, "b", 50)
        wait_for(lambda: stats(p)[1] == 1, "the Redis replica's partial resync")
        wait_equal(p, redis_replica, what="the Redis replica after the cut")
        assert stats(p)[0] == 1

        s = servers()
        write_some(redis_primary, "r")
        follow(s, redis_primary.port)
        wait_equal(redis_primary, s)
        rp = redis_primary.client()
        rp.execute_command("CLIENT", "KILL", "TYPE", "replica")
        write_some(redis_primary, "r2", 50)
        wait_for(lambda: stats(redis_primary)[1] == 1, "the strata replica's partial resync")
        wait_equal(redis_primary, s, what="the strata replica after the kill")
        assert stats(redis_primary)[0] == 1
    finally:
        redis_replica.stop()
        redis_primary.stop()
        relay.close()


class Writer:
    """Pipelined writes on a thread until stopped."""

    def __init__(self, server):
        self.c = server.client()
        self.stop_flag = False
        self.n = 0
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop_flag:
            p = self.c.pipeline(transaction=False)
            for i in range(100):
                p.set(f"w:{self.n % 5000}", "x" * 50)
                p.incr("w:count")
                self.n += 1
            p.execute()

    def stop(self):
        self.stop_flag = True
        self.t.join(timeout=60)


def seed_large(server, n=60000):
    c = server.client()
    for start in range(0, n, 5000):
        p = c.pipeline(transaction=False)
        for i in range(start, start + 5000):
            p.set(f"big:{i}", "v" * 100)
        p.execute()


@pytest.mark.parametrize("diskless", ["yes", "no"])
@pytest.mark.parametrize("kind", ["strata", "redis"])
def test_a_full_sync_completes_under_writes_past_the_backlog(servers, kind, diskless):
    p = servers()
    c = p.client()
    c.config_set("repl-backlog-size", "16kb")
    c.config_set("repl-diskless-sync", diskless)
    c.config_set("repl-diskless-sync-delay", "0")
    assert c.config_get("repl-backlog-size") == {"repl-backlog-size": "16384"}
    seed_large(p)
    writer = Writer(p)
    replica = None
    try:
        time.sleep(0.2)
        start = info(c)["master_repl_offset"]
        if kind == "redis":
            replica = RedisServer("--replicaof", "127.0.0.1", str(p.port)).start()
        else:
            replica = Server().start()
            replica.client().execute_command("REPLICAOF", "127.0.0.1", p.port)
        rc = replica.client()
        wait_for(lambda: info(rc).get("master_link_status") == "up", "the sync", 120)
        during = info(c)["master_repl_offset"] - start
        time.sleep(0.5)
    finally:
        writer.stop()
    try:
        assert during > 16 * 1024, f"only {during} bytes written during the sync"
        wait_equal(p, replica, what=f"{kind} replica, diskless {diskless}")
        assert stats(p)[0] == 1, "the sync did not start over"
        assert info(c)["repl_backlog_size"] == 16384
    finally:
        replica.stop()


def test_min_replicas_to_write(servers):
    p, r = servers(), servers()
    c = p.client()
    c.set("k", "1")
    c.config_set("min-replicas-to-write", "1")
    assert c.config_get("min-slaves-to-write") == {"min-slaves-to-write": "1"}
    assert info(c)["min_slaves_good_slaves"] == 0
    with pytest.raises(redis.exceptions.ResponseError, match="NOREPLICAS"):
        c.set("k", "2")
    with pytest.raises(redis.exceptions.ResponseError, match="NOREPLICAS"):
        c.eval("return redis.call('set', 'k', '3')", 0)
    tx = c.pipeline(transaction=True)
    tx.set("k", "4")
    with pytest.raises(redis.exceptions.ResponseError):
        tx.execute()
    assert c.get("k") == b"1", "reads pass"
    follow(r, p.port)
    wait_for(lambda: info(c)["min_slaves_good_slaves"] == 1, "a good replica")
    assert c.set("k", "5")
    assert c.eval("return redis.call('set', 'k', '6')", 0) == b"OK"
    r.stop()
    wait_for(lambda: info(c)["connected_slaves"] == 0, "the replica gone")
    with pytest.raises(redis.exceptions.ResponseError, match="NOREPLICAS"):
        c.set("k", "7")
    c.config_set("min-replicas-to-write", "0")
    assert c.set("k", "8")


def test_replica_serve_stale_data_no(servers):
    p, r = servers(), servers()
    p.client().set("k", "v")
    rc = r.client()
    rc.config_set("replica-serve-stale-data", "no")
    follow(r, p.port)
    wait_for(lambda: rc.get("k") == b"v", "the key on the replica")
    p.stop()
    wait_for(lambda: info(rc)["master_link_status"] == "down", "the link down")
    # redis-py drops the MASTERDOWN code from the message: read it raw.
    with pytest.raises(redis.exceptions.ResponseError, match="Link with MASTER is down and replica-serve-stale-data"):
        rc.get("k")
    with socket.create_connection(("127.0.0.1", r.port)) as raw:
        raw.sendall(b"GET k\r\n")
        assert raw.recv(200).startswith(b"-MASTERDOWN Link with MASTER is down")
    # As Redis 7.0: PING has no `stale` flag, INFO, ROLE and CONFIG do.
    with pytest.raises(redis.exceptions.ResponseError, match="Link with MASTER is down"):
        rc.ping()
    assert info(rc)["role"] == "slave"
    assert rc.execute_command("ROLE")[0] == b"slave"
    assert rc.config_get("replica-serve-stale-data") == {"replica-serve-stale-data": "no"}
    rc.config_set("replica-serve-stale-data", "yes")
    assert rc.get("k") == b"v"
    rc.config_set("replica-serve-stale-data", "no")
    assert rc.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
    assert rc.get("k") == b"v", "a primary serves"


def test_psync_with_an_offset_that_is_no_number_is_refused(servers):
    p = servers()
    with socket.create_connection(("127.0.0.1", p.port), timeout=10) as s:
        s.sendall(b"PSYNC replicationid offset_str\r\n")
        assert s.recv(100) == b"-ERR value is not an integer or out of range\r\n"
    assert stats(p) == (0, 0, 0)


def test_repl_timeout_and_ping_period(servers):
    """An idle link stays up on the primary's pings (repl-ping-replica-period
    below the replica's repl-timeout); a primary that stops answering
    (SIGSTOP) is dropped after repl-timeout, and the link comes back when it
    resumes. Both settings are CONFIG SET at run time."""
    import signal

    p, r = servers(), servers()
    pc, rc = p.client(), r.client()
    pc.config_set("repl-ping-replica-period", "1")
    rc.config_set("repl-timeout", "3")
    assert pc.config_get("repl-ping-slave-period") == {"repl-ping-slave-period": "1"}
    with pytest.raises(redis.exceptions.ResponseError):
        rc.config_set("repl-timeout", "0")
    pc.set("k", "v")
    follow(r, p.port)
    wait_for(lambda: rc.get("k") == b"v", "the key on the replica")
    # Idle for twice the timeout: the pings keep the link up.
    deadline = time.time() + 6
    while time.time() < deadline:
        assert info(rc)["master_link_status"] == "up", "an idle link dropped despite the pings"
        time.sleep(0.5)
    os.kill(p.proc.pid, signal.SIGSTOP)
    try:
        stopped = time.time()
        wait_for(lambda: info(rc)["master_link_status"] == "down", "the link down after repl-timeout", timeout=30)
        # The last ping came up to a period (1 s) before the stop.
        waited = time.time() - stopped
        assert waited >= 1.5, f"dropped after {waited:.1f} s, before repl-timeout"
        assert "no data from the primary for 3 seconds" in r.log()
    finally:
        os.kill(p.proc.pid, signal.SIGCONT)
    wait_for(lambda: info(rc)["master_link_status"] == "up", "the link up again")
    pc.set("k", "w")
    wait_for(lambda: rc.get("k") == b"w", "a write after the link came back")


@pytest.mark.parametrize("mode", ["disabled", "swapdb", "on-empty-db"])
def test_repl_diskless_load_keeps_the_old_data_when_a_sync_is_cut(servers, mode):
    """A replica holding one primary's data is pointed at another whose
    image transfer is cut half way and never resumes: with
    repl-diskless-load disabled (the default) or swapdb the image went to
    a file first, so the replica still serves the old data, whole; so it
    does with on-empty-db, which loads from the socket only into an empty
    keyspace. The spool file is removed."""
    old, new, r = servers(), servers(), servers()
    relay = Relay(new.port)
    try:
        write_some(old, "old", n=500)
        cr = r.client()
        assert cr.config_get("repl-diskless-load") == {"repl-diskless-load": "disabled"}
        cr.config_set("repl-diskless-load", mode)
        follow(r, old.port)
        wait_equal(old, r, what="the replica of the first primary")
        want = dump(old)
        cn = new.client()
        cn.config_set("repl-diskless-sync", "no")
        big = b"y" * 100_000
        pipe = cn.pipeline(transaction=False)
        for i in range(500):
            pipe.set(f"big:{i}", big)
        pipe.execute()
        assert cr.execute_command("REPLICAOF", "127.0.0.1", relay.port) == b"OK"
        wait_for(lambda: info(cr).get("master_sync_read_bytes", 0) > 0, "the image to arrive", 60)
        relay.close()
        wait_for(lambda: info(cr).get("master_sync_in_progress") == 0, "the cut sync to end", 60)
        assert dump(r) == want, "the old data, whole, after the cut transfer"
        spools = [f for f in os.listdir(os.path.join(r.dir, "data")) if f.startswith("temp-repl-")]
        assert spools == []
    finally:
        relay.close()


def test_repl_diskless_load_on_empty_db_loads_from_the_socket(servers):
    p, r = servers(), servers()
    write_some(p, "p", n=300)
    cr = r.client()
    cr.config_set("repl-diskless-load", "on-empty-db")
    follow(r, p.port)
    wait_equal(p, r, what="the replica loading straight from the socket")


def test_client_kill_cuts_replication_links_and_they_resume_partially(servers):
    """CLIENT KILL TYPE master on a replica, the old `ip:port` form naming
    its primary, and CLIENT KILL TYPE replica on the primary each cut the
    link; the replica reconnects and continues from the backlog (partial
    resyncs, no second full sync). TYPE normal leaves the links alone."""
    p, r = servers(), servers()
    cp, cr = p.client(), r.client()
    follow(r, p.port)
    write_some(p, "a", n=50)
    wait_equal(p, r, what="the replica before the kills")
    assert cr.execute_command("CLIENT", "KILL", "TYPE", "normal") == 0
    assert cp.execute_command("CLIENT", "KILL", "TYPE", "normal") == 0
    resumed = lambda n: stats(p)[1] >= n and info(cp)["connected_slaves"] == 1
    assert cr.execute_command("CLIENT", "KILL", "TYPE", "master") == 1
    write_some(p, "b", n=50)
    wait_for(lambda: resumed(1), "a partial resync after CLIENT KILL TYPE master")
    wait_equal(p, r, what="the replica after CLIENT KILL TYPE master")
    assert cr.execute_command("CLIENT", "KILL", f"127.0.0.1:{p.port}") == b"OK"
    wait_for(lambda: resumed(2), "a partial resync after CLIENT KILL ip:port")
    assert cp.execute_command("CLIENT", "KILL", "TYPE", "replica") == 1
    write_some(p, "c", n=50)
    wait_for(lambda: resumed(3), "a partial resync after CLIENT KILL TYPE replica")
    wait_equal(p, r, what="the replica after CLIENT KILL TYPE replica")
    full, partial, _ = stats(p)
    assert full == 1 and partial == 3, stats(p)


def test_repl_backlog_ttl_frees_the_backlog_and_changes_the_id(servers):
    """With no replica attached for repl-backlog-ttl seconds a primary
    frees its backlog and takes a new replication id, so the replica that
    comes back syncs in full; a replica keeps its own backlog."""
    p, r = servers(), servers()
    cp, cr = p.client(), r.client()
    follow(r, p.port)
    write_some(p, "a", n=50)
    wait_equal(p, r, what="the replica")
    replid = info(cp)["master_replid"]
    cp.config_set("repl-backlog-ttl", "1")
    cr.config_set("repl-backlog-ttl", "1")
    cr.execute_command("REPLICAOF", "NO", "ONE")
    wait_for(lambda: info(cp)["connected_slaves"] == 0, "the replica to leave")
    wait_for(lambda: info(cp)["repl_backlog_active"] == 0, "the backlog to be freed", 10)
    assert info(cp)["master_replid"] != replid
    assert info(cr)["repl_backlog_active"] == 1, "a promoted replica counts the ttl from its promotion"
    follow(r, p.port)
    wait_equal(p, r, what="the replica that came back")
    full, partial, err = stats(p)
    assert full == 2 and partial == 0, stats(p)


def test_output_buffer_soft_limit_drops_a_replica_that_stays_behind(servers):
    """client-output-buffer-limit replica 0 256kb 1: a replica whose spool
    stays over 256 KB for more than a second (here: SIGSTOPped under
    writes) is dropped, and syncs in full once it runs again."""
    import signal
    p, r = servers(), servers()
    cp = p.client()
    follow(r, p.port)
    cp.config_set("client-output-buffer-limit", "replica 0 256kb 1")
    r.proc.send_signal(signal.SIGSTOP)
    try:
        big = b"z" * 65536
        deadline = time.monotonic() + 4
        i = 0
        while time.monotonic() < deadline and info(cp)["connected_slaves"] == 1:
            pipe = cp.pipeline(transaction=False)
            for _ in range(32):
                pipe.set(f"soft:{i % 500}", big)
                i += 1
            pipe.execute()
            time.sleep(0.05)
        wait_for(lambda: info(cp)["connected_slaves"] == 0, "the replica to be dropped", 15)
    finally:
        r.proc.send_signal(signal.SIGCONT)
    assert "soft limit" in p.log()
    wait_equal(p, r, what="the dropped replica")
    full, _, _ = stats(p)
    assert full == 2, stats(p)
