"""--requirepass, --maxclients, --timeout and request-size limits."""
import socket
import time

import pytest
import redis

from conftest import Server


def raw(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    return s


def recv_line(s):
    data = b""
    while not data.endswith(b"\r\n"):
        chunk = s.recv(1)
        if not chunk:
            break
        data += chunk
    return data


@pytest.fixture(scope="module")
def secured():
    s = Server("--requirepass", "s3cret", "--maxclients", "20", "--timeout", "2").start()
    yield s
    s.stop()


def test_noauth_until_auth(secured):
    c = secured.client(protocol=2)
    with pytest.raises(redis.AuthenticationError):
        c.get("k")
    s = raw(secured.port)
    s.sendall(b"GET k\r\n")
    assert recv_line(s) == b"-NOAUTH Authentication required.\r\n"
    s.sendall(b"AUTH wrong\r\n")
    assert recv_line(s).startswith(b"-WRONGPASS")
    s.sendall(b"HELLO 3\r\n")
    assert recv_line(s).startswith(b"-NOAUTH HELLO must be called with the client already authenticated")
    s.sendall(b"AUTH s3cret\r\nSET k v\r\nGET k\r\n")
    assert recv_line(s) == b"+OK\r\n"
    assert recv_line(s) == b"+OK\r\n"
    assert recv_line(s) == b"$1\r\n"
    s.close()


def test_auth_clients_resp2_and_resp3(secured):
    for proto in (2, 3):
        c = secured.client(protocol=proto, password="s3cret")
        assert c.set("a", proto) and c.get("a") == str(proto).encode()
        c.close()
        c = secured.client(protocol=proto, username="default", password="s3cret")
        assert c.ping()
        c.close()
    with pytest.raises(redis.AuthenticationError):
        secured.client(protocol=3, password="nope").ping()


def test_auth_without_password_configured(server):
    c = server.client()
    with pytest.raises((redis.ResponseError, redis.AuthenticationError), match="without any password configured"):
        c.execute_command("AUTH", "x")
    c.close()


def test_quit_closes(server):
    s = raw(server.port)
    s.sendall(b"QUIT\r\n")
    assert recv_line(s) == b"+OK\r\n"
    assert s.recv(10) == b""
    s.close()


def test_maxclients(secured):
    held = []
    try:
        for _ in range(20):
            held.append(raw(secured.port))
        # Make sure every held connection has been accepted.
        for s in held:
            s.sendall(b"PING\r\n")
            assert recv_line(s).startswith(b"-NOAUTH")
        extra = raw(secured.port)
        assert recv_line(extra) == b"-ERR max number of clients reached\r\n"
        extra.close()
    finally:
        for s in held:
            s.close()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        s = raw(secured.port)
        s.sendall(b"PING\r\n")
        line = recv_line(s)
        s.close()
        if line.startswith(b"-NOAUTH"):
            break
        time.sleep(0.1)
    assert line.startswith(b"-NOAUTH")


def test_idle_timeout_closes(secured):
    s = raw(secured.port)
    s.settimeout(30)
    assert s.recv(10) == b""  # closed by the server after --timeout 2
    s.close()


def test_idle_timeout_closes_a_client_that_stopped_reading(secured):
    # Pending replies do not keep a client alive: one that neither sends
    # nor reads is closed after --timeout too (Redis counts writes that
    # make progress as activity, and so does this server).
    c = secured.client(password="s3cret")
    c.set("tbig", b"v" * (1 << 20))
    c.close()
    s = raw(secured.port)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(b"AUTH s3cret\r\n" + b"GET tbig\r\n" * 64)
    time.sleep(6)  # --timeout 2, checked each second
    s.settimeout(30)
    got = b""
    while True:
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        got += chunk
    assert len(got) < 64 << 20  # closed before all 64 MiB of replies were sent
    s.close()


def test_bulk_length_limit():
    srv = Server("--proto-max-bulk-len", "1mb").start()
    try:
        s = raw(srv.port)
        s.sendall(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2000000\r\n")
        assert recv_line(s) == b"-ERR Protocol error: invalid bulk length\r\n"
        assert s.recv(10) == b""
        s.close()
        c = srv.client()
        assert c.set("k", b"x" * 1000) and c.ping()
        c.close()
    finally:
        srv.stop()


def test_config_file_and_hello_setname(tmp_path):
    conf = tmp_path / "strata.conf"
    conf.write_text("# redis.conf syntax\nrequirepass \"from file\"\nmaxclients 50\n")
    srv = Server("--config", str(conf)).start()
    try:
        c = srv.client(protocol=3, password="from file")
        assert c.config_get("maxclients") in ({"maxclients": "50"}, {b"maxclients": b"50"})
        raw = c.connection_pool.get_connection()
        try:
            raw.send_command("HELLO", "3", "AUTH", "default", "from file", "SETNAME", "named")
            hello = raw.read_response()
            assert hello[b"proto"] == 3
            raw.send_command("CLIENT", "GETNAME")
            assert raw.read_response() == b"named"
        finally:
            c.connection_pool.release(raw)
        c.close()
    finally:
        srv.stop()
