"""Malformed and hostile input: every bad frame gets an error or closes
only its own connection; the server keeps serving others and never dies."""
import random
import socket
import time

import pytest

from conftest import Server


def connect(port):
    return socket.create_connection(("127.0.0.1", port), timeout=30)


def read_until_close(s, limit=1 << 20):
    data = b""
    while len(data) < limit:
        try:
            chunk = s.recv(65536)
        except (ConnectionResetError, socket.timeout):
            break
        if not chunk:
            break
        data += chunk
    return data


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


@pytest.fixture(scope="module")
def srv():
    s = Server().start()
    yield s
    assert s.proc.poll() is None, "server died:\n" + s.log()
    s.stop()


@pytest.fixture(scope="module")
def watcher(srv):
    c = srv.client()
    yield c
    c.close()


# Redis's tests/unit/protocol.tcl cases and a few more.
BAD_FRAMES = [
    (b"*3000000000\r\n", b"-ERR Protocol error: invalid multibulk length"),
    (b"*1\r\n$-10\r\n", b"-ERR Protocol error: invalid bulk length"),
    (b"*1\r\n$2000000000\r\n", b"-ERR Protocol error: invalid bulk length"),
    (b"*1\r\n$blabla\r\n", b"-ERR Protocol error: invalid bulk length"),
    (b"*1\r\nfoo\r\n", b"-ERR Protocol error: expected '$', got 'f'"),
    (b"*2\r\n$3\r\nGET\r\n$1\r\nkX\r\n", b"-ERR Protocol error: invalid bulk format"),
    (b"*abc\r\n", b"-ERR Protocol error: invalid multibulk length"),
    (b"set \"unbalanced\r\n", b"-ERR Protocol error: unbalanced quotes in request"),
    (b"a" * 70000, b"-ERR Protocol error: too big inline request"),
    (b"*1\r\n$" + b"9" * 70000, b"-ERR Protocol error: too big bulk count string"),
]


@pytest.mark.parametrize("frame,expect", BAD_FRAMES, ids=range(len(BAD_FRAMES)))
def test_bad_frame_closes_only_that_connection(srv, watcher, frame, expect):
    s = connect(srv.port)
    s.sendall(b"PING\r\n" + frame)
    data = read_until_close(s)
    s.close()
    assert data.startswith(b"+PONG\r\n" + expect), data[:200]
    assert watcher.ping()


def test_negative_multibulk_is_ignored(srv):
    s = connect(srv.port)
    s.sendall(b"*-10\r\n\r\nPING\r\n")
    assert s.recv(100) == b"+PONG\r\n"
    s.close()


def test_huge_declared_bulk_allocates_nothing_up_front(srv, watcher):
    before = rss_kib(srv.proc.pid)
    socks = []
    for _ in range(20):
        s = connect(srv.port)
        s.sendall(b"*2\r\n$3\r\nGET\r\n$536000000\r\nabc")
        socks.append(s)
    assert watcher.ping()
    after = rss_kib(srv.proc.pid)
    for s in socks:
        s.close()
    # 20 x 512 MB declared; growth must stay far below even one of them.
    assert after - before < 100 * 1024, (before, after)


def test_unknown_commands_never_close(srv):
    s = connect(srv.port)
    s.sendall(b"".join(b"NOPE%d x\r\n" % i for i in range(1000)) + b"PING\r\n")
    data = b""
    while not data.endswith(b"+PONG\r\n"):
        chunk = s.recv(65536)
        assert chunk, "connection closed"
        data += chunk
    assert data.count(b"-ERR unknown command") == 1000
    s.close()


def test_pipeline_split_at_every_byte(srv):
    cmds = b"*3\r\n$3\r\nSET\r\n$4\r\nsplt\r\n$5\r\nhello\r\n*2\r\n$3\r\nGET\r\n$4\r\nsplt\r\nPING\r\n"
    s = connect(srv.port)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for i in range(len(cmds)):
        s.sendall(cmds[i:i + 1])
        if i % 7 == 0:
            time.sleep(0.001)
    want = b"+OK\r\n$5\r\nhello\r\n+PONG\r\n"
    data = b""
    while len(data) < len(want):
        chunk = s.recv(100)
        assert chunk
        data += chunk
    assert data == want
    s.close()


def test_binary_garbage_and_mutated_pipelines(srv, watcher):
    rng = random.Random(6)
    valid = (b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n"
             b"*4\r\n$4\r\nHSET\r\n$1\r\nh\r\n$1\r\nf\r\n$1\r\nv\r\nPING\r\n*1\r\n$4\r\nINCR\r\n")
    for i in range(300):
        if i % 3 == 0:
            payload = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 2000)))
        else:
            b = bytearray(valid * rng.randint(1, 5))
            for _ in range(rng.randint(1, 8)):
                pos = rng.randrange(len(b))
                op = rng.randint(0, 2)
                if op == 0:
                    b[pos] = rng.getrandbits(8)
                elif op == 1:
                    del b[pos]
                else:
                    b.insert(pos, rng.choice(b"*$\r\n-0123456789"))
            payload = bytes(b)
        s = connect(srv.port)
        s.settimeout(0.5)
        try:
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
            read_until_close(s)
        except OSError:
            pass
        s.close()
    assert watcher.ping()
    assert watcher.set("after-fuzz", 1)


def test_ten_thousand_connections_opened_and_dropped(srv, watcher):
    total = 0
    for _ in range(20):
        batch = []
        for _ in range(500):
            batch.append(connect(srv.port))
        total += len(batch)
        # Half of them say something first.
        for j, s in enumerate(batch):
            if j % 2 == 0:
                s.sendall(b"PING\r\n")
        for s in batch:
            s.close()
    assert total == 10000
    assert watcher.ping()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if watcher.info("clients")["connected_clients"] <= 5:
            break
        time.sleep(0.1)
    assert watcher.info("clients")["connected_clients"] <= 5


def test_a_client_that_does_not_read_cannot_grow_the_server_without_end(srv, watcher):
    # 1024 pipelined GETs of a 256 KiB value from a client that never reads:
    # the server stops running its requests once about 8 MiB of replies wait,
    # instead of building all 256 MiB of them, and others are still served.
    watcher.set("big", b"v" * (256 << 10))
    before = rss_kib(srv.proc.pid)
    s = connect(srv.port)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n" * 1024)
    time.sleep(1.0)
    t = time.monotonic()
    assert watcher.ping()
    assert time.monotonic() - t < 2.0
    grown = rss_kib(srv.proc.pid) - before
    s.close()
    assert grown < 64 * 1024, f"server RSS grew by {grown} KiB"


def test_a_deep_pipeline_is_read_as_it_is_served(srv):
    # 300,000 pipelined INCRs (about 8 MB) sent while the replies are read:
    # the server reads more only when it has run what it holds, so its read
    # buffer stays small, and every reply arrives in order.
    n = 300_000
    s = connect(srv.port)
    req = b"*2\r\n$4\r\nINCR\r\n$4\r\ndeep\r\n" * n
    import threading
    sender = threading.Thread(target=s.sendall, args=(req,))
    before = rss_kib(srv.proc.pid)
    sender.start()
    got = b""
    peak = 0
    while got.count(b"\r\n") < n:
        chunk = s.recv(1 << 16)
        assert chunk, "connection closed"
        got += chunk
        peak = max(peak, rss_kib(srv.proc.pid) - before)
    sender.join()
    s.close()
    assert got.endswith(b":%d\r\n" % n)
    assert peak < 64 * 1024, f"server RSS grew by {peak} KiB"
