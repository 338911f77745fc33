"""Fixtures for the strata-server integration tests.

The server binary comes from $STRATA_SERVER_BIN (scripts/test.d/20-server.sh
builds it). Every server listens on 127.0.0.1 only, on a free port, with its
data in a temporary directory.
"""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest
import redis

BIN = os.environ.get("STRATA_SERVER_BIN", "")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Process:
    """A server process on 127.0.0.1 writing its output to `log_path`: how
    the tests' servers (strata-server, redis-server, redis-sentinel) start,
    wait until they answer PING, show their log and stop."""

    name = "server"
    # The first bytes of a PING reply that mean the process serves.
    ready = (b"+PONG",)

    def launch(self, argv):
        """Starts `argv` without waiting for it to serve."""
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        return self

    def wait_ready(self, timeout):
        """Waits until the process answers PING on `port`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited early:\n" + self.log())
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(64).startswith(self.ready):
                        return self
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} did not start:\n" + self.log())

    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")[-4000:]
        except OSError:
            return ""

    def end(self, timeout=30):
        """SIGTERM, then SIGKILL if it has not exited within `timeout`."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=timeout)


class Server(Process):
    """A strata-server process on 127.0.0.1 with its own data directory."""

    name = "server"
    ready = (b"+PONG", b"-NOAUTH")

    def __init__(self, *args, dir=None, port=None):
        if not BIN or not os.path.exists(BIN):
            raise RuntimeError("set STRATA_SERVER_BIN to the strata-server binary")
        self.args = list(args)
        self.own_dir = dir is None
        self.dir = dir or tempfile.mkdtemp(prefix="strata-server-test-")
        self.port = port or free_port()
        self.proc = None
        self.log_path = os.path.join(self.dir, "server.log")

    def spawn(self):
        """Starts the process without waiting for it to serve."""
        return self.launch([BIN, "--port", str(self.port), "--dir", os.path.join(self.dir, "data"),
                            "--pm-size", "256mb", *self.args])

    def start(self, timeout=60.0):
        """Starts the process and waits until it answers PING."""
        return self.spawn().wait_ready(timeout)

    def client(self, protocol=2, **kw):
        kw.setdefault("socket_timeout", 60)
        return redis.Redis(host="127.0.0.1", port=self.port, protocol=protocol, **kw)

    def kill9(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)

    def terminate(self, timeout=60):
        """SIGTERM and wait; returns the exit code."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            return self.proc.wait(timeout=timeout)
        return self.proc.returncode if self.proc else None

    def stop(self):
        try:
            self.terminate()
        except subprocess.TimeoutExpired:
            self.kill9()
        if self.own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)


class RedisServer(Process):
    """A real redis-server (7.0 from Debian) on 127.0.0.1 and a free port with
    its data in a temporary directory, for tests that compare strata-server
    with it or make them talk to each other; `args` are extra settings."""

    name = "redis-server"

    def __init__(self, *args):
        self.exe = shutil.which("redis-server") or (
            "/usr/bin/redis-server" if os.path.exists("/usr/bin/redis-server") else None)
        if not self.exe:
            raise RuntimeError("redis-server is not installed (scripts/test.d/20-server.sh installs it)")
        self.args = list(args)
        self.dir = tempfile.mkdtemp(prefix="strata-test-redis-")
        self.port = free_port()
        self.proc = None
        self.log_path = os.path.join(self.dir, "redis.log")

    def start(self, timeout=30.0):
        """Starts the process and waits until it answers PING."""
        self.launch([self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                     "--appendonly", "no", "--enable-debug-command", "yes", "--dir", self.dir, *self.args])
        return self.wait_ready(timeout)

    def client(self, protocol=2, **kw):
        kw.setdefault("socket_timeout", 60)
        return redis.Redis(host="127.0.0.1", port=self.port, protocol=protocol, **kw)

    def stop(self):
        self.end()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def server():
    s = Server().start()
    yield s
    s.stop()


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def r(request, server):
    c = server.client(protocol=request.param)
    c.flushall()
    yield c
    c.close()


def wait_for(cond, what, timeout=60.0):
    """Polls `cond` every 50 ms until it is true; fails naming `what` after
    `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")
