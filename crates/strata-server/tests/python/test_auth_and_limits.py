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
    # Closed by the server before all 64 MiB of replies were sent (reading
    # what the kernel still holds through a 4 KiB window would take minutes).
    addr = "addr=127.0.0.1:%d " % s.getsockname()[1]
    c = secured.client(password="s3cret")
    assert addr not in c.execute_command("CLIENT", "LIST").decode()
    c.close()
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


def read_reply_or_close(s):
    """The next line, or b'' once the server closed the connection."""
    try:
        return recv_line(s)
    except ConnectionResetError:
        return b""


def test_unauthenticated_request_limits(secured):
    # As Redis: before AUTH, at most 10 arguments of at most 16 KiB each,
    # and the connection is closed after the error.
    for req, err in ((b"*11\r\n", b"unauthenticated multibulk length"),
                     (b"*1\r\n$100000000\r\n", b"unauthenticated bulk length")):
        s = raw(secured.port)
        s.sendall(req)
        assert recv_line(s) == b"-ERR Protocol error: " + err + b"\r\n"
        assert read_reply_or_close(s) == b""
        s.close()
    # AUTH first, in the same write: the next request is parsed under the
    # authenticated limits.
    s = raw(secured.port)
    mset = b"*13\r\n$4\r\nMSET\r\n" + b"".join(b"$5\r\nkey:%d\r\n$1\r\nv\r\n" % i for i in range(6))
    s.sendall(b"*2\r\n$4\r\nAUTH\r\n$6\r\ns3cret\r\n" + mset + b"*2\r\n$3\r\nGET\r\n$5\r\nkey:5\r\n")
    assert recv_line(s) == b"+OK\r\n"
    assert recv_line(s) == b"+OK\r\n"
    assert recv_line(s) == b"$1\r\n"
    s.close()


def test_unauthenticated_output_is_limited(secured):
    # A client without the password that never reads its -NOAUTH replies
    # is closed once about 17 KiB of them wait (Redis's limit).
    s = raw(secured.port)
    s.settimeout(10)
    sent = 0
    with pytest.raises(OSError):
        for _ in range(200_000):
            s.sendall(b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$1\r\n5\r\n")
            sent += 1
    assert sent < 200_000
    s.close()
    # The server goes on serving others.
    c = secured.client(password="s3cret")
    assert c.ping()
    c.close()


def test_config_set_requirepass():
    s = Server().start()
    try:
        admin = s.client()
        admin.config_set("requirepass", "abc\x00def")
        # Clients already connected stay authenticated, as in Redis.
        assert admin.set("k", "v")
        assert admin.execute_command("CONFIG", "GET", "requirepass") == [b"requirepass", b"abc\x00def"]
        fresh = raw(s.port)
        fresh.sendall(b"GET k\r\n")
        assert recv_line(fresh) == b"-NOAUTH Authentication required.\r\n"
        fresh.sendall(b"*2\r\n$4\r\nAUTH\r\n$3\r\nabc\r\n")
        assert recv_line(fresh).startswith(b"-WRONGPASS")
        fresh.sendall(b"*2\r\n$4\r\nAUTH\r\n$7\r\nabc\x00def\r\n")
        assert recv_line(fresh) == b"+OK\r\n"
        fresh.close()
        # An empty password turns authentication off for every client.
        waiting = raw(s.port)
        admin.config_set("requirepass", "")
        waiting.sendall(b"GET k\r\n")
        assert recv_line(waiting) == b"$1\r\n"
        waiting.close()
        admin.close()
    finally:
        s.stop()


def write_conf(tmp_path, text):
    p = tmp_path / "redis.conf"
    p.write_text(text)
    return str(p)


def test_redis_conf_is_accepted(tmp_path):
    # A redis.conf as Redis's own test harness writes it: settings with no
    # meaning here are listed and ignored, tuning parameters and keyspace
    # events take effect.
    conf = write_conf(tmp_path, """
always-show-logo yes
notify-keyspace-events KEA
daemonize no
pidfile /var/run/redis.pid
loglevel verbose
logfile ''
save 900 1
dbfilename dump.rdb
appendonly no
appendfsync everysec
activerehashing yes
latency-monitor-threshold 1
hash-max-ziplist-entries 64
enable-debug-command yes
requirepass conf-pw
acllog-max-len 128
hll-sparse-max-bytes 3000
lazyfree-lazy-eviction no
oom-score-adj-values 0 200 800
replica-lazy-flush no
maxmemory 0mb
lua-time-limit 100
busy-reply-threshold 200
""")
    s = Server("--config", conf).start()
    try:
        c = s.client(password="conf-pw")
        assert c.config_get("notify-keyspace-events") == {"notify-keyspace-events": "AKE"}
        assert c.config_get("hash-max-listpack-entries") == {"hash-max-listpack-entries": "64"}
        assert c.config_get("latency-monitor-threshold") == {"latency-monitor-threshold": "1"}
        assert c.config_get("loglevel") == {"loglevel": "verbose"}
        # In file order: the last of two names of one setting wins.
        assert c.config_get("lua-time-limit") == {"lua-time-limit": "200"}
        c.close()
        log = s.log()
        assert "PID: " in log and "Ready to accept connections" in log
        assert "ignoring Redis settings that do not apply here: always-show-logo, daemonize" in log
    finally:
        s.stop()


@pytest.mark.parametrize("line,why", [
    ("daemonize yes", "not supported"),
    ("replicaof 127.0.0.1", "replicaof takes a host and a port"),
    ("replicaof 127.0.0.1 notaport", "replicaof: bad port notaport"),
    ("no-such-setting 1", "unknown configuration setting 'no-such-setting'"),
    ("hash-max-listpack-entries lots", "hash-max-listpack-entries"),
    ("notify-keyspace-events Q", "notify-keyspace-events"),
    ("requirepass", "'requirepass' takes one value"),
    ("requirepass a b", "'requirepass' takes one value"),
    ("maxmemory 1gb", "not supported"),
    ("protected-mode maybe", "protected-mode must be yes or no"),
])
def test_redis_conf_refusals(tmp_path, line, why):
    conf = write_conf(tmp_path, line + "\n")
    s = Server("--config", conf).spawn()
    try:
        assert s.proc.wait(timeout=30) != 0
        assert why in s.log()
    finally:
        s.stop()


def test_save_is_the_memory_stores_snapshot_period(tmp_path):
    conf = write_conf(tmp_path, "save 900 1 300 10\n")
    s = Server("--storage", "memory", "--config", conf).start()
    try:
        c = s.client()
        assert c.config_get("snapshot-seconds") == {"snapshot-seconds": "300"}
        c.close()
        assert "ignoring Redis settings" not in s.log()
    finally:
        s.stop()


def test_reset_and_duplicate_config_set(secured):
    s = raw(secured.port)
    s.sendall(b"RESET\r\n")
    assert recv_line(s) == b"+RESET\r\n"  # allowed before AUTH, as in Redis
    s.close()
    c = secured.client(password="s3cret")
    for name in ("requirepass", "notify-keyspace-events", "protected-mode"):
        with pytest.raises(redis.ResponseError, match="duplicate parameter"):
            c.execute_command("CONFIG", "SET", name, "KEA", name, "KEA")
    assert c.config_get("requirepass") == {"requirepass": "s3cret"}
    c.close()


def non_loopback_address():
    """An address of this machine other than loopback, or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        try:
            u.connect(("10.255.255.255", 1))
            ip = u.getsockname()[0]
        except OSError:
            return None
    return None if ip.startswith("127.") else ip


def test_protected_mode():
    ip = non_loopback_address()
    if ip is None:
        pytest.skip("this machine has no address but loopback")
    s = Server("--bind", "0.0.0.0").start()
    try:
        def hello_from_outside():
            with socket.create_connection((ip, s.port), timeout=10) as o:
                o.sendall(b"PING\r\n")
                return recv_line(o)
        assert hello_from_outside().startswith(b"-DENIED strata-server is running in protected mode")
        c = s.client()  # loopback is served
        c.config_set("requirepass", "pw")
        assert hello_from_outside() == b"-NOAUTH Authentication required.\r\n"
        c.config_set("requirepass", "")
        c.config_set("protected-mode", "no")
        assert hello_from_outside() == b"+PONG\r\n"
        c.close()
    finally:
        s.stop()
