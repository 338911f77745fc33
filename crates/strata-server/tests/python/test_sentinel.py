"""Failover of strata-servers by Redis Sentinel (redis-sentinel 7.0 from
Debian) under a write load: a strata primary with two strata replicas
(`--durability sync`), three sentinels, and a writer thread going through
redis-py's Sentinel client, half of its writes followed by WAIT 1. The
primary is stopped (SIGKILL, or SIGSTOP then SIGCONT): a replica must be
promoted within down-after-milliseconds + 5 s, hold every write WAIT
acknowledged, take the writer's writes, and the old primary (restarted on
its data directory, or woken) must come back as a replica of the new one
with the same contents. Writes acknowledged without WAIT that were lost are
counted and printed, not asserted (Redis loses them too)."""
import os
import shutil
import signal
import tempfile
import threading
import time

import pytest
import redis
import redis.backoff
import redis.retry
import redis.sentinel

from conftest import Process, Server, free_port
from test_replication_interop import caught_up, differences, dump

SENTINEL = shutil.which("redis-sentinel") or (
    "/usr/bin/redis-sentinel" if os.path.exists("/usr/bin/redis-sentinel") else None)
DOWN_AFTER_MS = 1000

pytestmark = pytest.mark.skipif(
    SENTINEL is None, reason="redis-sentinel is not installed (scripts/test.d/20-server.sh installs it)")


class Sentinel(Process):
    """A redis-sentinel process on 127.0.0.1 monitoring master `m`."""

    name = "redis-sentinel"

    def __init__(self, primary_port, quorum=2):
        self.dir = tempfile.mkdtemp(prefix="strata-test-sentinel-")
        self.port = free_port()
        self.conf = os.path.join(self.dir, "sentinel.conf")
        with open(self.conf, "w") as f:
            f.write(f"port {self.port}\nbind 127.0.0.1\ndaemonize no\ndir {self.dir}\n"
                    f"sentinel monitor m 127.0.0.1 {primary_port} {quorum}\n"
                    f"sentinel down-after-milliseconds m {DOWN_AFTER_MS}\n"
                    "sentinel failover-timeout m 5000\n")
        self.log_path = os.path.join(self.dir, "sentinel.log")
        self.proc = None

    def start(self, timeout=10.0):
        return self.launch([SENTINEL, self.conf]).wait_ready(timeout)

    def client(self):
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=2, decode_responses=True)

    def master_addr(self):
        host, port = self.client().execute_command("SENTINEL", "get-master-addr-by-name", "m")
        return host, int(port)

    def stop(self):
        self.end(timeout=5)
        shutil.rmtree(self.dir, ignore_errors=True)


def wait_for(what, check, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except (redis.RedisError, OSError):
            pass
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


class Writer(threading.Thread):
    """Writes `SET k:<n> <n>` for n = 1, 2, ... through redis-py's Sentinel
    client until stopped, every even n followed by `WAIT 1 <ms>` on the same
    connection; on an error it reconnects (the client asks the sentinels for
    the primary again) and goes on with the next n. Records which writes
    were acknowledged, with WAIT (it returned >= 1) and without."""

    WAIT_MS = 1000

    def __init__(self, sentinels):
        super().__init__(daemon=True)
        self.sentinel = redis.sentinel.Sentinel([("127.0.0.1", s.port) for s in sentinels], socket_timeout=0.5)
        # No retries inside redis-py: a failed write is simply not acknowledged.
        self.master = self.sentinel.master_for("m", socket_timeout=1.0, socket_connect_timeout=0.5,
                                               retry=redis.retry.Retry(redis.backoff.NoBackoff(), 0))
        self.stop_flag = threading.Event()
        self.lock = threading.Lock()
        self.acked_wait = []  # n acknowledged by WAIT 1
        self.acked = []  # n acknowledged without WAIT
        self.unconfirmed = 0  # writes followed by WAIT that returned 0
        self.errors = 0
        self.last_ack = 0.0  # time.monotonic() of the last acknowledgement

    def run(self):
        n = 0
        while not self.stop_flag.is_set():
            n += 1
            wait = n % 2 == 0
            try:
                p = self.master.pipeline(transaction=False)
                p.set(f"k:{n}", n)
                if wait:
                    p.execute_command("WAIT", 1, self.WAIT_MS)
                res = p.execute()
            except redis.RedisError:
                with self.lock:
                    self.errors += 1
                time.sleep(0.05)
                continue
            with self.lock:
                if res[0] is not True:
                    self.errors += 1
                elif not wait:
                    self.acked.append(n)
                elif res[1] >= 1:
                    self.acked_wait.append(n)
                else:
                    self.unconfirmed += 1
                self.last_ack = time.monotonic()

    def acks(self):
        with self.lock:
            return len(self.acked_wait) + len(self.acked)

    def stop(self):
        self.stop_flag.set()
        self.join(timeout=10)
        assert not self.is_alive(), "the writer did not stop"
        self.master.connection_pool.disconnect()


def missing_on(server, ns):
    """The n of `ns` whose key `k:<n>` does not hold n on `server`."""
    c = server.client(decode_responses=True)
    out = []
    for i in range(0, len(ns), 1000):
        chunk = ns[i:i + 1000]
        vals = c.mget([f"k:{n}" for n in chunk])
        out += [n for n, v in zip(chunk, vals) if v != str(n)]
    c.close()
    return out


def role(server):
    c = redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=0.5, decode_responses=True)
    try:
        return c.execute_command("ROLE")
    finally:
        c.close()


def follows(server, primary):
    r = role(server)
    return r[0] == "slave" and int(r[2]) == primary.port and r[3] == "connected"


def sentinel_events(sentinels):
    """The sentinels' notable events (down, votes, failover steps), for a
    failure's message."""
    out = []
    for i, s in enumerate(sentinels):
        lines = [ln for ln in s.log().splitlines() if " # " in ln]
        out.append(f"--- sentinel {i} (port {s.port}):\n" + "\n".join(lines[-40:]))
    return "\n".join(out)


def start_rig():
    """A strata primary, two strata replicas following it, three sentinels
    that know all of them and each other."""
    primary = Server("--durability", "sync").start()
    replicas = [Server("--durability", "sync", "--replicaof", f"127.0.0.1 {primary.port}").start() for _ in range(2)]
    sentinels = []
    try:
        for r in replicas:
            wait_for("replica link up", lambda r=r: r.client().info("replication").get(
                "master_link_status") == "up", 15)
        sentinels = [Sentinel(primary.port).start() for _ in range(3)]
        for s in sentinels:
            wait_for("sentinel discovery", lambda s=s: len(s.client().execute_command(
                "SENTINEL", "replicas", "m")) == 2 and len(s.client().execute_command(
                    "SENTINEL", "sentinels", "m")) == 2, 15)
    except BaseException:
        stop_rig(primary, replicas, sentinels)
        raise
    return primary, replicas, sentinels


def stop_rig(primary, replicas, sentinels):
    for s in sentinels:
        s.stop()
    if primary.proc and primary.proc.poll() is None:
        primary.proc.send_signal(signal.SIGCONT)
    for srv in [primary, *replicas]:
        srv.stop()


def failover_under_writes(stop_primary, bring_back, what):
    """The common course of the failover tests: writes before, during and
    after the failover; `stop_primary(primary)` stops it, `bring_back`
    (primary) makes it run again after the failover."""
    primary, replicas, sentinels = start_rig()
    writer = None
    try:
        started = time.monotonic()
        writer = Writer(sentinels)
        writer.start()
        wait_for("writes before the failover", lambda: writer.acks() >= 300 and len(writer.acked_wait) >= 100, 15)
        assert primary.client().info("replication")["connected_slaves"] == 2
        acked_before = writer.acks()

        stop_primary(primary)
        stopped_at = time.monotonic()
        promoted = wait_for("a replica promoted", lambda: next(
            (r for r in replicas if role(r)[0] == "master"), None), DOWN_AFTER_MS / 1000 + 15)
        took = time.monotonic() - stopped_at
        new_addr = wait_for("the sentinels name the new primary", lambda: (lambda a: a if a[1] != primary.port
                            else None)(sentinels[0].master_addr()), 10)
        assert new_addr[1] == promoted.port
        new = promoted
        servers = [primary, *replicas]

        def current():
            # The primary the sentinels name now: on a stalled machine a
            # second failover may follow the first (a primary that answers
            # no PING for down-after-milliseconds is down).
            port = sentinels[0].master_addr()[1]
            return next(srv for srv in servers if srv.port == port)

        def settled():
            # The primary, once every other server follows it.
            m = current()
            return m if all(follows(srv, m) for srv in servers if srv is not m) else None
        print(f"\n{what}: a replica was promoted {took:.2f}s after the primary stopped "
              f"(down-after-milliseconds {DOWN_AFTER_MS})")
        assert took <= DOWN_AFTER_MS / 1000 + 5, f"promoted after {took:.2f}s\n{sentinel_events(sentinels)}"

        # The writer goes on through the Sentinel client, on the new primary.
        promoted_at = time.monotonic()
        acks_at_promotion = writer.acks()
        wait_for("the writer writing again", lambda: writer.acks() >= acks_at_promotion + 100
                 and writer.last_ack > promoted_at, 15)
        with writer.lock:
            latest = (writer.acked + writer.acked_wait)[-1]
        assert not missing_on(current(), [latest]), "the writer's latest write is on the new primary"

        # The other replica and the old primary follow the new primary.
        bring_back(primary)
        try:
            final = wait_for("the old primary and the other replica follow the new one", settled, 25)
        except AssertionError:
            raise AssertionError(f"the servers do not all follow the new primary (port {new.port}): ROLE "
                                 f"{[role(srv) for srv in servers]}\n--- the old primary's log:\n"
                                 f"{primary.log()[-2500:]}\n{sentinel_events(sentinels)}") from None
        writer.stop()
        final = settled() or final
        if final is not new:
            print(f"{what}: a second failover, to port {final.port}\n{sentinel_events(sentinels)}")
        new = final

        # Every write acknowledged by WAIT 1 is on the new primary; those
        # acknowledged without WAIT may have been lost with the old primary.
        missing = missing_on(new, writer.acked_wait)
        lost = missing_on(new, writer.acked)
        print(f"{what}: {acked_before} writes acknowledged before the stop, {writer.acks()} in all "
              f"({len(writer.acked_wait)} with WAIT, {len(writer.acked)} without, {writer.unconfirmed} "
              f"WAIT timeouts, {writer.errors} errors); acknowledged without WAIT and lost: {len(lost)} "
              f"{lost[:10]}")
        assert not missing, f"{len(missing)} writes acknowledged by WAIT 1 are missing: {missing[:10]}"

        # Both replicas converge to the new primary's contents.
        others = [srv for srv in servers if srv is not new]
        for r in others:
            wait_for(f"replica on port {r.port} caught up", lambda r=r: caught_up(new, r), 20)
        want = dump(new)
        for r in others:
            wait_for(f"replica on port {r.port} caught up", lambda r=r: caught_up(new, r), 20)
            got = dump(r)
            m, extra, differ = differences(want, got)
            assert not m and not extra and not differ, (
                f"replica on port {r.port} ({'old primary' if r is primary else 'other replica'}): "
                f"{len(want)} keys on the new primary, {len(got)} here; missing {m}, extra {extra}, "
                f"differ {differ}")
        print(f"{what}: done in {time.monotonic() - started:.1f}s")
    finally:
        if writer is not None and writer.is_alive():
            writer.stop_flag.set()
            writer.join(timeout=10)
        stop_rig(primary, replicas, sentinels)


def test_failover_after_sigkill_under_writes():
    # Restarted on its port and data directory after the failover.
    failover_under_writes(lambda p: p.kill9(), lambda p: p.start(), "SIGKILL")


def test_failover_after_sigstop_under_writes():
    # Frozen (its clients' connections stay open, unanswered), then woken
    # after the failover: it must step down to a replica of the new one.
    def stop(p):
        p.proc.send_signal(signal.SIGSTOP)

    def wake(p):
        p.proc.send_signal(signal.SIGCONT)

    failover_under_writes(stop, wake, "SIGSTOP")
