"""Sharding across three strata-server processes behind twemproxy
(Debian's nutcracker), all on 127.0.0.1: redis-benchmark and redis-py
(RESP2, no HELLO/CLIENT, which the proxy cannot pass) go through it."""
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import warnings

import pytest
import redis

from conftest import Server, free_port

NUTCRACKER = shutil.which("nutcracker") or "/usr/sbin/nutcracker"

CONF = """strata:
  listen: 127.0.0.1:{proxy}
  hash: fnv1a_64
  hash_tag: "{{}}"
  distribution: ketama
  auto_eject_hosts: false
  redis: true
  preconnect: true
  server_retry_timeout: 2000
  server_failure_limit: 3
  servers:
   - 127.0.0.1:{p1}:1 strata1
   - 127.0.0.1:{p2}:1 strata2
   - 127.0.0.1:{p3}:1 strata3
"""


def wait_port(port, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"port {port} did not open")


@pytest.fixture(scope="module")
def cluster():
    if not os.path.exists(NUTCRACKER):
        pytest.fail("nutcracker is not installed (scripts/test.d/20-server.sh installs it)")
    nodes = [Server().start() for _ in range(3)]
    tmp = tempfile.mkdtemp(prefix="strata-twem-")
    proxy, stats = free_port(), free_port()
    conf = os.path.join(tmp, "nutcracker.yml")
    with open(conf, "w") as f:
        f.write(CONF.format(proxy=proxy, p1=nodes[0].port, p2=nodes[1].port, p3=nodes[2].port))
    subprocess.run([NUTCRACKER, "-t", "-c", conf], check=True, capture_output=True)
    proc = subprocess.Popen([NUTCRACKER, "-c", conf, "-s", str(stats), "-a", "127.0.0.1",
                             "-o", os.path.join(tmp, "nutcracker.log")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(proxy)
    yield proxy, nodes
    proc.terminate()
    proc.wait(timeout=30)
    for n in nodes:
        n.stop()
    shutil.rmtree(tmp, ignore_errors=True)


def proxy_client(port):
    # twemproxy closes the connection on HELLO and CLIENT: RESP2, no lib info.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return redis.Redis(host="127.0.0.1", port=port, protocol=2, lib_name=None, lib_version=None,
                           socket_timeout=60)


def test_redis_benchmark_through_proxy(cluster):
    proxy, nodes = cluster
    for extra in ([], ["-P", "16"]):
        out = subprocess.run(
            ["redis-benchmark", "-h", "127.0.0.1", "-p", str(proxy), "-t", "set,get", "-n", "20000",
             "-r", "100000", "-c", "20", "-q", *extra],
            capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        rates = dict(re.findall(r"^(SET|GET): ([0-9.]+) requests per second", out.stdout, re.M))
        assert set(rates) == {"SET", "GET"}, out.stdout
        print("twemproxy redis-benchmark", " ".join(extra) or "-P 1", rates)
    sizes = [n.client().dbsize() for n in nodes]
    # Keys spread over all three shards.
    assert all(s > 0 for s in sizes), sizes


def test_data_through_proxy_lands_on_one_shard(cluster):
    proxy, nodes = cluster
    c = proxy_client(proxy)
    for i in range(300):
        c.set(f"user:{i}", i)
    assert c.get("user:7") == b"7"
    assert c.mget([f"user:{i}" for i in range(300)]) == [str(i).encode() for i in range(300)]
    c.mset({f"m:{i}": i for i in range(50)})
    assert c.delete(*[f"m:{i}" for i in range(50)]) == 50
    c.hset("h", mapping={"a": "1"})
    assert c.hgetall("h") == {b"a": b"1"}
    c.zadd("z", {"a": 1, "b": 2})
    assert c.zrangebyscore("z", "-inf", "+inf") == [b"a", b"b"]
    c.close()
    direct = [n.client() for n in nodes]
    for i in range(300):
        holders = sum(1 for d in direct if d.exists(f"user:{i}"))
        assert holders == 1, i
    # Hash tags co-locate keys.
    c = proxy_client(proxy)
    c.set("{grp}:a", 1)
    c.set("{grp}:b", 2)
    c.close()
    owners = [d for d in direct if d.exists("{grp}:a")]
    assert len(owners) == 1 and owners[0].exists("{grp}:b")


def test_what_twemproxy_cannot_pass(cluster):
    """The proxy speaks RESP2 only and closes the connection on HELLO,
    SCAN, MULTI, CLIENT, CONFIG, INFO: documented in the README."""
    proxy, _ = cluster
    for cmd in (b"HELLO 3\r\n", b"SCAN 0\r\n", b"MULTI\r\n"):
        s = socket.create_connection(("127.0.0.1", proxy), timeout=30)
        s.sendall(cmd)
        try:
            data = s.recv(100)
        except ConnectionResetError:
            data = b""
        s.close()
        assert data == b"", (cmd, data)
