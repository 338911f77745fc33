"""Bad input, closed objects, a locked directory, the exception hierarchy."""

import subprocess
import sys
import textwrap

import pytest

import stratakv
from conftest import SMALL


def test_exception_hierarchy():
    for name in ("IoError", "CorruptionError", "InvalidArgument", "PmFull", "DiskFull",
                 "LockedError", "PoisonedError", "ClosedError", "PmError"):
        cls = getattr(stratakv, name)
        assert issubclass(cls, stratakv.Error), name
    assert issubclass(stratakv.Error, Exception)


@pytest.mark.parametrize("bad", ["str", 1, 1.5, None, [b"a"], object()])
def test_wrong_key_types(db, bad):
    with pytest.raises(TypeError):
        db.put(bad, b"v")
    with pytest.raises(TypeError):
        db.get(bad)
    with pytest.raises(TypeError):
        db[bad]
    with pytest.raises(TypeError):
        bad in db
    with pytest.raises(TypeError):
        db.delete(bad)
    with pytest.raises(TypeError):
        db.multi_get([b"ok", bad])
    with db.snapshot() as s:
        with pytest.raises(TypeError):
            s.get(bad)
    wb = db.write_batch()
    with pytest.raises(TypeError):
        wb.put(bad, b"v")
    with pytest.raises(TypeError):
        wb.delete(bad)


def test_str_is_not_encoded(db):
    with pytest.raises(TypeError, match="str"):
        db.put(b"k", "value")
    with pytest.raises(TypeError):
        db.iterator(start="a")
    with pytest.raises(TypeError):
        db.compact_range("a")
    assert list(db) == []


def test_huge_key(db):
    huge = b"x" * (stratakv.MAX_KEY_LEN + 1)
    with pytest.raises(stratakv.InvalidArgument):
        db.put(huge, b"v")
    with pytest.raises(stratakv.InvalidArgument):
        db.get(huge)
    with pytest.raises(stratakv.InvalidArgument):
        huge in db
    with pytest.raises(stratakv.InvalidArgument):
        db.multi_get([huge])
    with pytest.raises(stratakv.InvalidArgument):
        with db.write_batch() as wb:
            wb.put(b"fine", b"v")
            wb.put(huge, b"v")
    # The batch was refused as a whole.
    assert db.get(b"fine") is None
    # The largest key allowed works.
    top = b"y" * stratakv.MAX_KEY_LEN
    db.put(top, b"v")
    assert db[top] == b"v"


def test_unknown_profile_and_options(path):
    with pytest.raises(stratakv.InvalidArgument, match="profile"):
        stratakv.DB(path, profile="btree", **SMALL)
    with pytest.raises(stratakv.InvalidArgument, match="write_bufer_size"):
        stratakv.DB(path, write_bufer_size=1 << 20, **{k: v for k, v in SMALL.items() if k != "write_buffer_size"})
    with pytest.raises(stratakv.InvalidArgument):
        stratakv.DB(path, compression="zstd-ultra", **SMALL)
    with pytest.raises(stratakv.InvalidArgument):
        stratakv.DB(path, **{**SMALL, "pm_size": -1})
    with pytest.raises(stratakv.InvalidArgument):
        stratakv.DB(path, **{**SMALL, "pm_size": "big"})
    with pytest.raises(stratakv.InvalidArgument):
        stratakv.DB(path, **{**SMALL, "create_if_missing": 1})
    # Options the engine's validation refuses: a PM region too small.
    with pytest.raises(stratakv.InvalidArgument, match="pm_size"):
        stratakv.DB(path, pm_size=1 << 20)


def test_closed_db_everything_raises(path):
    d = stratakv.DB(path, **SMALL)
    d.put(b"a", b"1")
    it = d.iterator()
    it2 = d.iterator()
    assert next(it2) == (b"a", b"1")
    snap = d.snapshot()
    wb = d.write_batch()
    wb.put(b"b", b"2")
    d.close()
    for call in (
        lambda: d.get(b"a"),
        lambda: d[b"a"],
        lambda: b"a" in d,
        lambda: d.put(b"a", b"1"),
        lambda: d.delete(b"a"),
        lambda: d.multi_get([b"a"]),
        lambda: d.iterator(),
        lambda: list(d),
        lambda: d.snapshot(),
        lambda: d.flush(),
        lambda: d.compact_range(),
        lambda: d.stats(),
        lambda: wb.write(),
        lambda: next(it),
        lambda: next(it2),
        lambda: snap.get(b"a"),
        lambda: snap.iterator(),
    ):
        with pytest.raises(stratakv.ClosedError):
            call()
    # Closed objects released the directory: it opens again at once.
    with stratakv.DB(path, **SMALL) as again:
        assert again[b"a"] == b"1" and again.get(b"b") is None


def test_locked_by_same_process(db, path):
    with pytest.raises(stratakv.LockedError):
        stratakv.DB(path, **SMALL)


def test_locked_by_another_process(db, path):
    child = textwrap.dedent(
        f"""
        import stratakv, sys
        try:
            stratakv.DB({path!r}, **{SMALL!r})
        except stratakv.LockedError as e:
            print("LOCKED", e)
            sys.exit(0)
        print("OPENED")
        sys.exit(1)
        """
    )
    r = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "locked" in r.stdout
    # Our handle still works.
    db.put(b"k", b"v")
    assert db[b"k"] == b"v"


def test_iterator_outlives_db_object(path):
    d = stratakv.DB(path, **SMALL)
    d.put(b"a", b"1")
    it = d.iterator()
    del d  # the DB object goes; the iterator keeps the engine alive
    import gc

    gc.collect()
    assert list(it) == [(b"a", b"1")]
