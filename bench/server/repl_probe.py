#!/usr/bin/env python3
"""Measuring probes of bench/server/repl.sh (standard library only, so the
benchmark needs no pip): a small RESP client and one subcommand per thing
the shell script waits for or measures. Each prints or writes JSON.

usage: repl_probe.py wait-link REPLICA [--timeout S]
       repl_probe.py catchup PRIMARY REPLICA [--timeout S]
       repl_probe.py lag PRIMARY REPLICA --stop FILE --out JSON [--interval S] [--ready FILE]
       repl_probe.py latency PORT (--stop FILE | --seconds S) --out JSON [--rate OPS]
       repl_probe.py load PORT --keys K [--value-size B]
       repl_probe.py compare PRIMARY REPLICA
       repl_probe.py fullsync-watch PRIMARY REPLICA --pid PID --cgroup DIR --out JSON
(ports on 127.0.0.1)"""
import argparse
import json
import os
import random
import socket
import sys
import threading
import time


class ReplyError(Exception):
    """An error reply (`-ERR ...`) of the server."""


class Conn:
    """One RESP2 connection; `call` sends a command and returns its reply
    (bytes, int, list or None), raising ReplyError on an error reply."""

    def __init__(self, port, host="127.0.0.1", timeout=30.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()

    def close(self):
        self.sock.close()

    def send(self, *commands):
        self.sock.sendall(b"".join(encode(c) for c in commands))

    def call(self, *args):
        self.send(args)
        return self.reply()

    def _fill(self):
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("connection closed by the server")
        self.buf += chunk

    def _line(self):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line = bytes(self.buf[:i])
                del self.buf[:i + 2]
                return line
            self._fill()

    def reply(self):
        """Reads one reply; an error reply is raised after it is consumed."""
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest
        if kind == b"-":
            raise ReplyError(rest.decode(errors="replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self._fill()
            data = bytes(self.buf[:n])
            del self.buf[:n + 2]
            return data
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise ConnectionError(f"unexpected reply line {line[:40]!r}")


def encode(args):
    """One command as a RESP array of bulk strings."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


def info_fields(text):
    """INFO's `field:value` lines as a dict of strings."""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    fields = {}
    for line in text.splitlines():
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            fields[k] = v.strip()
    return fields


def repl_info(conn):
    return info_fields(conn.call("INFO", "replication"))


def replica_offset(fields):
    """A replica's processed offset (Redis and strata-server: slave_repl_offset)."""
    return int(fields.get("slave_repl_offset", "-1"))


def caught_up(fields, target):
    """Whether a replica's INFO shows it has applied the stream up to
    target. The link must be up too: during a full sync strata-server
    already shows the image's offset while the image is still loading."""
    return fields.get("master_link_status") == "up" and replica_offset(fields) >= target


def percentile(xs, p):
    """The p-th percentile (0..100) of xs by nearest rank, or None if empty."""
    xs = sorted(xs)
    if not xs:
        return None
    k = max(0, min(len(xs) - 1, -(-len(xs) * p // 100) - 1))
    return xs[int(k)]


def summary(xs):
    """count, p50, p99, p99.9 and max of xs."""
    return {"count": len(xs), "p50": percentile(xs, 50), "p99": percentile(xs, 99),
            "p999": percentile(xs, 99.9), "max": max(xs) if xs else None}


def probe_lags_ms(acked, seen):
    """Replication lag of each probe write, in ms: from the primary's reply
    (acked[seq]) to the first poll of the replica that showed seq or a later
    one (seen[seq]); 0 when the replica showed it before the reply arrived.
    Returns (lags, sequence numbers the replica never showed)."""
    lags, missing = [], []
    for seq, t_ack in sorted(acked.items()):
        if seq in seen:
            lags.append(max(0.0, (seen[seq] - t_ack) * 1000))
        else:
            missing.append(seq)
    return lags, missing


def longest_gap_ms(times, start, end):
    """The longest time in ms without a completed operation, given the
    completion times of operations in [start, end]."""
    gap, prev = 0.0, start
    for t in sorted(times) + [end]:
        gap = max(gap, t - prev)
        prev = t
    return gap * 1000


def should_stop(args, started):
    if args.stop and os.path.exists(args.stop):
        return True
    return bool(args.seconds) and time.monotonic() - started >= args.seconds


def cmd_wait_link(args):
    """Waits for master_link_status:up on the replica; prints the seconds."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < args.timeout:
        try:
            c = Conn(args.replica)
            try:
                while time.monotonic() - t0 < args.timeout:
                    if repl_info(c).get("master_link_status") == "up":
                        print(json.dumps({"seconds": round(time.monotonic() - t0, 3)}))
                        return 0
                    time.sleep(0.05)
            finally:
                c.close()
        except (OSError, ReplyError):
            time.sleep(0.1)
    print(f"replica on port {args.replica}: link not up after {args.timeout} s", file=sys.stderr)
    return 1


def cmd_catchup(args):
    """Reads the primary's offset now and waits until the replica has
    processed up to it: how long a replica trails the end of a write burst."""
    p, r = Conn(args.primary), Conn(args.replica)
    t0 = time.monotonic()
    target = int(repl_info(p).get("master_repl_offset", "0"))
    behind = max(0, target - replica_offset(repl_info(r)))
    while time.monotonic() - t0 < args.timeout:
        if caught_up(repl_info(r), target):
            print(json.dumps({"seconds": round(time.monotonic() - t0, 4), "bytes_behind": behind,
                              "target_offset": target}))
            return 0
        time.sleep(0.005)
    print(json.dumps({"seconds": None, "bytes_behind": behind, "target_offset": target,
                      "error": f"not caught up after {args.timeout} s"}))
    return 1


def cmd_lag(args):
    """Every interval, SETs a probe key to the next sequence number on the
    primary; a second thread polls the replica for it, a third samples
    master_repl_offset - slave_repl_offset every 100 ms, until the stop
    file appears (then up to 5 s more for the last write to show)."""
    acked, seen, byte_lag, errors = {}, {}, [], []
    done = threading.Event()
    key = "repl:lag:probe"
    last_seq = [0]

    def writer():
        c = Conn(args.primary)
        c.call("SET", key, 0)
        if args.ready:
            with open(args.ready, "w"):
                pass
        seq, nxt, started = 0, time.monotonic(), time.monotonic()
        while not should_stop(args, started):
            seq += 1
            try:
                c.call("SET", key, seq)
                acked[seq] = time.monotonic()
                last_seq[0] = seq
            except (OSError, ReplyError) as e:
                errors.append(f"primary: {e}")
                return
            nxt += args.interval
            time.sleep(max(0.0, nxt - time.monotonic()))

    def poller():
        c = Conn(args.replica)
        shown = 0
        while True:
            if done.is_set() and shown >= last_seq[0]:
                return
            try:
                v = c.call("GET", key)
            except (OSError, ReplyError) as e:
                errors.append(f"replica: {e}")
                return
            now = time.monotonic()
            v = int(v) if v is not None and v.isdigit() else 0
            for s in range(shown + 1, v + 1):
                seen[s] = now
            shown = max(shown, v)
            time.sleep(0.001)

    def sampler():
        p, r = Conn(args.primary), Conn(args.replica)
        while not done.is_set():
            try:
                po = int(repl_info(p).get("master_repl_offset", "0"))
                ro = replica_offset(repl_info(r))
            except (OSError, ReplyError) as e:
                errors.append(f"offsets: {e}")
                return
            byte_lag.append(max(0, po - ro))
            time.sleep(0.1)

    threads = [threading.Thread(target=f, daemon=True) for f in (poller, sampler)]
    for t in threads:
        t.start()
    writer()
    done.set()
    threads[0].join(5.0)
    threads[1].join(1.0)
    lags, missing = probe_lags_ms(acked, seen)
    res = {"probe_writes": len(acked), "missing": len(missing), "lag_ms": summary(lags),
           "byte_lag": summary(byte_lag), "errors": errors[:10]}
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps({"lag_p50_ms": res["lag_ms"]["p50"], "lag_p99_ms": res["lag_ms"]["p99"],
                      "lag_max_ms": res["lag_ms"]["max"], "byte_lag_p99": res["byte_lag"]["p99"],
                      "missing": len(missing), "errors": len(errors)}))
    return 1 if errors else 0


def cmd_latency(args):
    """A paced SET/GET load (rate operations per second, alternating) on
    one connection, timing each request; a failed connection is reopened
    and counted, so an outage shows as errors and a long gap."""
    lat, done_at, errors = [], [], []
    started = time.monotonic()
    c, i, nxt = None, 0, started
    value = b"v" * 100
    while not should_stop(args, started):
        t0 = time.monotonic()
        try:
            if c is None:
                c = Conn(args.port, timeout=60)
            k = f"repl:lat:{i % 10000}"
            if i % 2 == 0:
                c.call("SET", k, value)
            else:
                c.call("GET", k)
            t1 = time.monotonic()
            lat.append((t1 - t0) * 1000)
            done_at.append(t1)
        except (OSError, ReplyError) as e:
            errors.append(str(e))
            if c is not None:
                c.close()
            c = None
            time.sleep(0.05)
        i += 1
        nxt += 1.0 / args.rate
        time.sleep(max(0.0, nxt - time.monotonic()))
    end = time.monotonic()
    res = {"seconds": round(end - started, 3), "ops": len(lat), "errors": len(errors),
           "error_samples": errors[:5], "latency_ms": summary(lat),
           "longest_gap_ms": longest_gap_ms(done_at, started, end)}
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    return 0


def cmd_load(args):
    """SETs keys fs:0000000000.. with incompressible values of value-size
    bytes (at most 64 KiB), pipelined; prints the keys, bytes and seconds."""
    if not 0 < args.value_size <= 1 << 16:
        print("--value-size must be 1..65536", file=sys.stderr)
        return 2
    c = Conn(args.port, timeout=120)
    rnd = random.Random(1)
    pool = bytes(rnd.getrandbits(8) for _ in range(1 << 16)) * 2
    t0, errors, batch, done, failure = time.monotonic(), 0, 500, 0, None
    try:
        for start in range(0, args.keys, batch):
            n = min(batch, args.keys - start)
            cmds = []
            for k in range(start, start + n):
                off = (k * 7919) % (1 << 16)
                cmds.append(("SET", b"fs:%010d" % k, pool[off:off + args.value_size]))
            c.send(*cmds)
            for _ in range(n):
                try:
                    c.reply()
                except ReplyError:
                    errors += 1
            done += n
    except OSError as e:
        failure = f"after {done} keys: {e}"
    secs = time.monotonic() - t0
    res = {"keys": done, "bytes": done * args.value_size, "seconds": round(secs, 2), "errors": errors}
    if failure:
        res["error"] = failure
    print(json.dumps(res))
    return 1 if errors or failure else 0


def cmd_compare(args):
    """DBSIZE of both servers and 200 sampled fs: keys compared."""
    p, r = Conn(args.primary), Conn(args.replica)
    pn, rn = p.call("DBSIZE"), r.call("DBSIZE")
    mismatches, sampled = 0, 0
    for _ in range(200):
        k = p.call("RANDOMKEY")
        if k is None:
            break
        sampled += 1
        if p.call("GET", k) != r.call("GET", k):
            mismatches += 1
    print(json.dumps({"primary_dbsize": pn, "replica_dbsize": rn, "sampled": sampled,
                      "mismatches": mismatches}))
    return 0 if pn == rn and mismatches == 0 else 1


def read_int(path, default=None):
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return default


def oom_kills(cgroup):
    """The cgroup's OOM kills so far (memory.oom_control's oom_kill), or None."""
    try:
        with open(os.path.join(cgroup, "memory.oom_control")) as f:
            for line in f:
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def proc_status_kb(pid, field):
    """VmRSS, VmHWM, ... of a process in kB, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def cmd_fullsync_watch(args):
    """From the replica's start: samples the primary's RSS and its memory
    cgroup's usage every 100 ms, waits for the replica's link to come up
    (the image is loaded) and then for it to reach the primary's offset."""
    t0 = time.monotonic()
    samples, phase = [], {}
    cg = args.cgroup

    def sample():
        samples.append({"t": round(time.monotonic() - t0, 2),
                        "rss_kb": proc_status_kb(args.pid, "VmRSS"),
                        "cgroup_bytes": read_int(os.path.join(cg, "memory.usage_in_bytes"))})

    r, was_syncing = None, False
    while time.monotonic() - t0 < args.timeout:
        sample()
        if proc_status_kb(args.pid, "VmRSS") is None:
            phase["error"] = "the primary exited during the sync"
            break
        try:
            if r is None:
                r = Conn(args.replica)
            f = repl_info(r)
            syncing = f.get("master_sync_in_progress") == "1"
            if syncing and not was_syncing:
                # A sync that starts again means the primary dropped the
                # replica (e.g. behind its backlog) and it resynced.
                phase.setdefault("sync_started", round(time.monotonic() - t0, 3))
                phase["syncs_started"] = phase.get("syncs_started", 0) + 1
            was_syncing = syncing
            if f.get("master_link_status") == "up":
                phase["link_up"] = round(time.monotonic() - t0, 3)
                # A sync shorter than a sample was not seen; there was one.
                phase.setdefault("syncs_started", 1)
                break
        except (OSError, ReplyError):
            r = None
        time.sleep(0.1)
    else:
        phase["error"] = f"link not up after {args.timeout} s"
    if "link_up" in phase:
        try:
            target = int(repl_info(Conn(args.primary)).get("master_repl_offset", "0"))
            while time.monotonic() - t0 < args.timeout:
                sample()
                f = repl_info(r)
                if caught_up(f, target):
                    phase["caught_up"] = round(time.monotonic() - t0, 3)
                    break
                # The primary can still drop the replica while it catches up.
                syncing = f.get("master_sync_in_progress") == "1"
                if syncing and not was_syncing:
                    phase["syncs_started"] += 1
                was_syncing = syncing
                time.sleep(0.1)
            else:
                phase["error"] = f"not caught up {args.timeout} s after the replica started"
        except (OSError, ReplyError) as e:
            phase["error"] = f"catching up: {e}"
    res = dict(phase)
    res["peak_rss_kb_sampled"] = max((s["rss_kb"] or 0 for s in samples), default=None)
    res["vm_hwm_kb"] = proc_status_kb(args.pid, "VmHWM")
    res["cgroup_max_usage_bytes"] = read_int(os.path.join(cg, "memory.max_usage_in_bytes"))
    res["cgroup_limit_bytes"] = read_int(os.path.join(cg, "memory.limit_in_bytes"))
    res["cgroup_failcnt"] = read_int(os.path.join(cg, "memory.failcnt"))
    res["cgroup_oom_kills"] = oom_kills(cg)
    res["primary_alive"] = proc_status_kb(args.pid, "VmRSS") is not None
    res["samples"] = samples
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps({k: v for k, v in res.items() if k != "samples"}))
    return 0 if "caught_up" in res else 1


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("wait-link")
    s.add_argument("replica", type=int)
    s.add_argument("--timeout", type=float, default=60)
    s.set_defaults(fn=cmd_wait_link)
    s = sub.add_parser("catchup")
    s.add_argument("primary", type=int)
    s.add_argument("replica", type=int)
    s.add_argument("--timeout", type=float, default=300)
    s.set_defaults(fn=cmd_catchup)
    s = sub.add_parser("lag")
    s.add_argument("primary", type=int)
    s.add_argument("replica", type=int)
    s.add_argument("--stop")
    s.add_argument("--seconds", type=float, default=0)
    s.add_argument("--interval", type=float, default=0.01)
    s.add_argument("--ready", help="file created once the probe has started writing")
    s.add_argument("--out", required=True)
    s.set_defaults(fn=cmd_lag)
    s = sub.add_parser("latency")
    s.add_argument("port", type=int)
    s.add_argument("--stop")
    s.add_argument("--seconds", type=float, default=0)
    s.add_argument("--rate", type=float, default=1000)
    s.add_argument("--out", required=True)
    s.set_defaults(fn=cmd_latency)
    s = sub.add_parser("load")
    s.add_argument("port", type=int)
    s.add_argument("--keys", type=int, required=True)
    s.add_argument("--value-size", type=int, default=1000)
    s.set_defaults(fn=cmd_load)
    s = sub.add_parser("compare")
    s.add_argument("primary", type=int)
    s.add_argument("replica", type=int)
    s.set_defaults(fn=cmd_compare)
    s = sub.add_parser("fullsync-watch")
    s.add_argument("primary", type=int)
    s.add_argument("replica", type=int)
    s.add_argument("--pid", type=int, required=True)
    s.add_argument("--cgroup", required=True)
    s.add_argument("--timeout", type=float, default=3600)
    s.add_argument("--out", required=True)
    s.set_defaults(fn=cmd_fullsync_watch)
    args = ap.parse_args(argv)
    if getattr(args, "stop", None) is None and getattr(args, "seconds", 1) == 0:
        ap.error("give --stop FILE or --seconds S")
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
