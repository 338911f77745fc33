#!/usr/bin/env python3
"""Writes what redis-server 7.0 answers to COMMAND INFO and COMMAND DOCS for
every command (and subcommand) as JSON: the fixture the command-table test
compares strata-server's answers with.

    python3 scripts/dev/redis-command-fixture.py [PORT] > crates/strata-server/tests/fixtures/redis-7.0-commands.json

PORT is a running redis-server 7.0 (default: one is started on a free port).
Replies are RESP3 trees in JSON: a bulk string is a JSON string, a simple
string {"+": text}, an integer a number, an array a list, a map
{"%": [[key, value], ...]}, a set {"~": [...]}, null null.
"""
import json
import socket
import subprocess
import sys
import tempfile
import time


def read_reply(f):
    line = f.readline()
    if not line:
        raise EOFError
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return {"+": rest.decode()}
    if kind == b"-":
        return {"error": rest.decode()}
    if kind == b":":
        return int(rest)
    if kind == b"=":
        return f.read(int(rest) + 2)[4:-2].decode()
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)[:-2]
        return data.decode()
    if kind == b"_":
        return None
    if kind in (b"*", b"~"):
        n = int(rest)
        if n < 0:
            return None
        items = [read_reply(f) for _ in range(n)]
        return items if kind == b"*" else {"~": items}
    if kind == b"%":
        return {"%": [[read_reply(f), read_reply(f)] for _ in range(int(rest))]}
    raise ValueError(line)


def command(sock, f, *args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a.encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    sock.sendall(out)
    return read_reply(f)


def main():
    proc = None
    if len(sys.argv) > 1:
        port = int(sys.argv[1])
    else:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        d = tempfile.mkdtemp()
        proc = subprocess.Popen(["redis-server", "--port", str(port), "--save", "", "--dir", d],
                                stdout=subprocess.DEVNULL)
        time.sleep(0.5)
    try:
        sock = socket.create_connection(("127.0.0.1", port))
        f = sock.makefile("rb")
        command(sock, f, "HELLO", "3")
        version = command(sock, f, "INFO", "server")
        version = next(l.split(":")[1] for l in version.splitlines() if l.startswith("redis_version:"))
        names = sorted(command(sock, f, "COMMAND", "LIST"))
        info, docs = {}, {}
        for name in names:
            [entry] = command(sock, f, "COMMAND", "INFO", name)
            info[name] = entry
            reply = command(sock, f, "COMMAND", "DOCS", name)["%"]
            docs[name] = reply[0][1] if reply else None
        json.dump({"redis_version": version, "count": command(sock, f, "COMMAND", "COUNT"),
                   "info": info, "docs": docs}, sys.stdout, indent=1, sort_keys=True)
        sys.stdout.write("\n")
    finally:
        if proc:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
