"""A writer killed with SIGKILL mid-write loses no acknowledged write;
threads writing and reading at once; the acceptance script."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import stratakv
from conftest import SMALL

WRITER = textwrap.dedent(
    """
    import os, sys, stratakv
    path, opts, start = sys.argv[1], eval(sys.argv[2]), int(sys.argv[3])
    db = stratakv.DB(path, **opts)
    out = os.fdopen(1, "w", buffering=1)
    i = start
    while True:
        k = b"key%08d" % i
        if i % 3 == 0:
            with db.write_batch() as wb:
                wb.put(k, b"batch-%d" % i)
                wb.put(k + b"-twin", b"twin-%d" % i)
        else:
            db.put(k, b"value-%d" % i * 8)
        # Acknowledged: the put returned before this line is printed.
        out.write("%d\\n" % i)
        i += 1
    """
)


def expected(i):
    return b"batch-%d" % i if i % 3 == 0 else b"value-%d" % i * 8


def test_sigkill_loses_no_acknowledged_write(path):
    # Small memtables, so the kills land during flushes and compactions too.
    opts = dict(SMALL, write_buffer_size=256 << 10)
    start = 0
    for rnd in range(3):
        p = subprocess.Popen(
            [sys.executable, "-c", WRITER, path, repr(opts), str(start)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        # Drain the acknowledgements continuously, so the writer is never
        # blocked on a full pipe: the kill lands inside puts and batches.
        acked = []
        reader = threading.Thread(target=lambda: acked.extend(int(x) for x in p.stdout))
        reader.start()
        deadline = time.time() + 60
        while not acked and time.time() < deadline and p.poll() is None:
            time.sleep(0.01)
        time.sleep(0.2 + 0.3 * rnd)
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        reader.join(timeout=30)
        p.stdout.close()
        err = p.stderr.read().decode(errors="replace")
        p.stderr.close()
        assert len(acked) > 10, err
        with stratakv.DB(path, **opts) as db:
            for i in range(0, acked[-1] + 1):
                k = b"key%08d" % i
                assert db.get(k) == expected(i), (rnd, i)
                if i % 3 == 0:
                    assert db.get(k + b"-twin") == b"twin-%d" % i, (rnd, i)
            # A batch is all or nothing, also the one the kill cut.
            last = db.iterator(start=b"key%08d" % (acked[-1] + 1), stop=b"key~", include_value=False)
            for k in last:
                if not k.endswith(b"-twin") and int(k[3:11]) % 3 == 0:
                    assert k + b"-twin" in db
            start = acked[-1] + 1


def test_threads_write_and_read(db):
    n_threads, per = 4, 2000
    errors = []

    def writer(t):
        try:
            for i in range(per):
                db.put(b"t%d-%06d" % (t, i), b"v%d" % i)
                if i % 100 == 0:
                    with db.write_batch() as wb:
                        wb.put(b"b%d-%06d" % (t, i), b"x")
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    def reader(t):
        try:
            seen = 0
            while seen < per - 1:
                # Own thread's keys appear in order: once i is visible,
                # every earlier key of that writer is too.
                for i in range(seen, per):
                    if db.get(b"t%d-%06d" % (t, i)) is None:
                        break
                    seen = i
                assert all(db.get(b"t%d-%06d" % (t, j)) is not None for j in range(0, seen + 1, 97))
                sum(1 for _ in db.iterator(prefix=b"t%d-" % t, include_value=False))
        except Exception as e:  # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(n_threads)]
    threads += [threading.Thread(target=reader, args=(t,)) for t in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    assert not errors, errors
    got = db.multi_get([b"t%d-%06d" % (t, per - 1) for t in range(n_threads)])
    assert got == [b"v%d" % (per - 1)] * n_threads
    assert sum(1 for _ in db.iterator(prefix=b"t", include_value=False)) == n_threads * per


def test_gil_released_during_calls(db):
    # While one thread runs long engine calls (a flush and a compaction of
    # many keys), another thread keeps running Python code: it records
    # ticks inside the calls' time window. Were the GIL held, it could not.
    with db.write_batch() as wb:
        for i in range(100000):
            wb.put(b"g%06d" % i, b"x" * 50)
    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.0005)

    t = threading.Thread(target=ticker)
    t.start()
    time.sleep(0.01)
    t0 = time.perf_counter()
    db.flush()
    db.compact_range()
    t1 = time.perf_counter()
    stop.set()
    t.join()
    inside = [x for x in ticks if t0 < x < t1]
    assert len(inside) >= 3, (len(inside), t1 - t0)


def test_close_while_threads_iterate(path):
    d = stratakv.DB(path, **SMALL)
    with d.write_batch() as wb:
        for i in range(20000):
            wb.put(b"%06d" % i, b"v")
    outcomes = []

    def scan():
        try:
            while True:
                for _ in d.iterator():
                    pass
        except stratakv.ClosedError:
            outcomes.append("closed")
        except Exception as e:  # pragma: no cover
            outcomes.append(e)

    threads = [threading.Thread(target=scan) for _ in range(3)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    d.close()
    for t in threads:
        t.join(timeout=60)
    assert outcomes == ["closed"] * 3


def test_acceptance_100k(path):
    n = 100_000
    with stratakv.DB(path, **SMALL) as db:
        for s in range(0, n, 1000):
            with db.write_batch() as wb:
                for i in range(s, s + 1000):
                    wb.put(b"user:%06d" % i, b"value-%d" % i)
        with db.write_batch() as wb:
            for i in range(1000):
                wb.put(b"other:%04d" % i, b"o")
        fwd = list(db.iterator(prefix=b"user:"))
        assert len(fwd) == n
        assert fwd[0] == (b"user:000000", b"value-0") and fwd[-1] == (b"user:099999", b"value-99999")
        rev = list(db.iterator(prefix=b"user:", reverse=True, include_value=False))
        assert rev == [k for k, _ in reversed(fwd)]
        assert list(db.iterator(prefix=b"user:0500", include_value=False)) == [b"user:0500%02d" % i for i in range(100)]
        snap = db.snapshot()
        with db.write_batch() as wb:
            for i in range(0, n, 2):
                wb.delete(b"user:%06d" % i)
        assert sum(1 for _ in db.iterator(prefix=b"user:")) == n // 2
        assert sum(1 for _ in snap.iterator(prefix=b"user:")) == n
        assert snap[b"user:000000"] == b"value-0"
        snap.close()
    with stratakv.DB(path, **SMALL) as db:
        keys = list(db.iterator(prefix=b"user:", include_value=False))
        assert len(keys) == n // 2 and keys[0] == b"user:000001"
        assert db[b"user:099999"] == b"value-99999"
        assert b"user:000000" not in db
        assert sum(1 for _ in db.iterator(prefix=b"other:", reverse=True)) == 1000
