"""Failover of strata-servers by Redis Sentinel (redis-sentinel 7.0 from
Debian): a strata primary with two strata replicas, three sentinels; the
primary is killed with SIGKILL, a replica must be promoted, keep every write
acknowledged with WAIT 1, take writes through redis-py's Sentinel client, and
the old primary, restarted, must come back as a replica of the new one."""
import os
import shutil
import tempfile
import time

import pytest
import redis
import redis.sentinel

from conftest import Process, Server, free_port

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


def test_sentinel_failover():
    primary = Server().start()
    replicas = [Server("--replicaof", f"127.0.0.1 {primary.port}").start() for _ in range(2)]
    sentinels = []
    try:
        for r in replicas:
            wait_for("replica link up", lambda r=r: r.client().info("replication").get(
                "master_link_status") == "up", 15)
        sentinels = [Sentinel(primary.port).start() for _ in range(3)]
        # Every sentinel knows both replicas and the two other sentinels.
        for s in sentinels:
            wait_for("sentinel discovery", lambda s=s: len(s.client().execute_command(
                "SENTINEL", "replicas", "m")) == 2 and len(s.client().execute_command(
                    "SENTINEL", "sentinels", "m")) == 2, 15)

        p = primary.client()
        acked = []
        for i in range(200):
            p.set(f"acked:{i}", i)
            if p.execute_command("WAIT", 1, 1000) >= 1:
                acked.append(i)
        assert len(acked) == 200
        unacked = 2000
        pipe = p.pipeline(transaction=False)
        for i in range(unacked):
            pipe.set(f"unacked:{i}", i)
        pipe.execute()

        primary.kill9()
        killed_at = time.monotonic()
        new_addr = wait_for("promotion", lambda: (lambda a: a if a[1] != primary.port else None)(
            sentinels[0].master_addr()), DOWN_AFTER_MS / 1000 + 5 + 5)
        took = time.monotonic() - killed_at
        assert took <= DOWN_AFTER_MS / 1000 + 5, (took, sentinels[0].log())
        new = next(r for r in replicas if r.port == new_addr[1])
        other = next(r for r in replicas if r.port != new_addr[1])
        nc = new.client(decode_responses=True)
        wait_for("promoted role", lambda: nc.execute_command("ROLE")[0] == "master", 5)

        # Every write acknowledged by WAIT 1 is on the new primary.
        missing = [i for i in acked if nc.get(f"acked:{i}") != str(i)]
        assert not missing, missing[:10]
        lost = sum(1 for i in range(unacked) if nc.get(f"unacked:{i}") is None)
        print(f"\nfailover after {took:.2f}s; writes without WAIT lost: {lost} of {unacked}")

        # redis-py's Sentinel client finds and writes to the new primary.
        sc = redis.sentinel.Sentinel([("127.0.0.1", s.port) for s in sentinels], socket_timeout=2)
        master = sc.master_for("m", socket_timeout=2)
        master.set("after-failover", "yes")
        assert nc.get("after-failover") == "yes"

        # The other replica is reconfigured to follow the new primary.
        oc = other.client(decode_responses=True)
        wait_for("other replica follows new primary", lambda: (lambda r: r[0] == "slave" and
                 int(r[2]) == new.port and r[3] == "connected")(oc.execute_command("ROLE")), 15)
        wait_for("write reaches other replica", lambda: oc.get("after-failover") == "yes", 10)

        # The old primary, restarted on its port and directory, is made a
        # replica of the new one by Sentinel.
        primary.start()
        old = primary.client(decode_responses=True)
        wait_for("old primary becomes a replica", lambda: (lambda r: r[0] == "slave" and
                 int(r[2]) == new.port and r[3] == "connected")(old.execute_command("ROLE")), 20)
        wait_for("old primary has the new write", lambda: old.get("after-failover") == "yes", 10)
    finally:
        for s in sentinels:
            s.stop()
        for srv in [primary, *replicas]:
            srv.stop()
