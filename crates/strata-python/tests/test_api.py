"""The Python API: reads, writes, batches, iterators, snapshots, stats, close."""

import pytest

import stratakv
from conftest import SMALL


def test_put_get_delete(db):
    assert db.get(b"a") is None
    assert db.get(b"a", b"dflt") == b"dflt"
    db.put(b"a", b"1")
    db.put(b"b", b"2", sync=True)
    assert db.get(b"a") == b"1"
    assert db.get(b"a", b"dflt") == b"1"
    db.delete(b"a")
    db.delete(b"never-there")
    db.delete(b"b", sync=True)
    assert db.get(b"a") is None and db.get(b"b") is None


def test_mapping_protocol(db):
    db[b"k"] = b"v"
    assert db[b"k"] == b"v"
    assert b"k" in db
    assert b"nope" not in db
    with pytest.raises(KeyError) as e:
        db[b"nope"]
    assert e.value.args[0] == b"nope"
    del db[b"k"]
    assert b"k" not in db
    # An empty value is a value, not an absence.
    db[b"empty"] = b""
    assert db[b"empty"] == b"" and b"empty" in db


def test_bytes_like_arguments(db):
    db.put(bytearray(b"ba"), memoryview(b"mv"))
    assert db[b"ba"] == b"mv"
    assert db.get(memoryview(b"ba")) == b"mv"
    assert bytearray(b"ba") in db
    assert isinstance(db[b"ba"], bytes)


def test_write_batch_context_manager(db):
    db.put(b"gone", b"x")
    with db.write_batch() as wb:
        wb.put(b"a", b"1")
        wb.put(b"b", b"2")
        wb.delete(b"gone")
        assert len(wb) == 3
        # Nothing is visible before the block ends.
        assert db.get(b"a") is None
    assert db[b"a"] == b"1" and db[b"b"] == b"2" and b"gone" not in db


def test_write_batch_discarded_on_exception(db):
    with pytest.raises(RuntimeError):
        with db.write_batch() as wb:
            wb.put(b"a", b"1")
            raise RuntimeError("boom")
    assert db.get(b"a") is None


def test_db_write_unbound_batch(db):
    wb = stratakv.WriteBatch()
    wb.put(b"x", b"1")
    wb.put(b"y", b"2")
    wb.delete(b"x")
    db.write(wb, sync=True)
    assert db.get(b"x") is None and db[b"y"] == b"2"
    wb.clear()
    assert len(wb) == 0
    with pytest.raises(stratakv.InvalidArgument):
        wb.write()  # not made by a database


def test_batch_order_last_wins(db):
    with db.write_batch() as wb:
        wb.put(b"k", b"1")
        wb.delete(b"k")
        wb.put(b"k", b"3")
    assert db[b"k"] == b"3"


def fill(db, n=300):
    with db.write_batch() as wb:
        for i in range(n):
            wb.put(b"k%04d" % i, b"v%d" % i)


def test_iteration_orders_and_bounds(db):
    fill(db)
    db.put(b"a", b"first")
    db.put(b"z", b"last")
    everything = list(db)
    assert [k for k, _ in everything] == sorted(k for k, _ in everything)
    assert len(everything) == 302
    assert everything[0] == (b"a", b"first") and everything[-1] == (b"z", b"last")
    assert list(db.keys()) == [k for k, _ in everything]
    assert list(db.values()) == [v for _, v in everything]
    assert list(db.items()) == everything
    # stop is exclusive, start inclusive (plyvel).
    got = list(db.iterator(start=b"k0010", stop=b"k0013", include_value=False))
    assert got == [b"k0010", b"k0011", b"k0012"]
    got = list(db.iterator(start=b"k0010", stop=b"k0013", include_start=False, include_stop=True, include_value=False))
    assert got == [b"k0011", b"k0012", b"k0013"]
    got = list(db.iterator(start=b"k0010", stop=b"k0013", reverse=True, include_value=False))
    assert got == [b"k0012", b"k0011", b"k0010"]
    assert list(db.iterator(start=b"k0298", include_key=False)) == [b"v298", b"v299", b"last"]
    assert list(db.iterator(stop=b"k0001")) == [(b"a", b"first"), (b"k0000", b"v0")]


def test_prefix_both_directions(db):
    fill(db)
    fwd = list(db.iterator(prefix=b"k01", include_value=False))
    assert fwd == [b"k01%02d" % i for i in range(100)]
    rev = list(db.iterator(prefix=b"k01", reverse=True, include_value=False))
    assert rev == fwd[::-1]
    assert list(db.iterator(prefix=b"nothing")) == []
    with pytest.raises(stratakv.InvalidArgument):
        db.iterator(prefix=b"k", start=b"k1")
    with pytest.raises(stratakv.InvalidArgument):
        db.iterator(include_key=False, include_value=False)


def test_iterator_reads_at_creation(db):
    fill(db, 50)
    it = db.iterator(include_value=False)
    first = next(it)
    db.put(b"k0049x", b"new")
    db.delete(b"k0020")
    rest = list(it)
    assert first == b"k0000"
    assert len(rest) == 49 and b"k0049x" not in rest and b"k0020" in rest


def test_iterator_hides_deletes_and_overwrites(db):
    fill(db, 20)
    for i in range(0, 20, 2):
        db.delete(b"k%04d" % i)
    db.put(b"k0001", b"over")
    got = dict(db)
    assert len(got) == 10 and got[b"k0001"] == b"over" and b"k0000" not in got


def test_multi_get(db):
    db.put(b"a", b"1")
    db.put(b"c", b"3")
    assert db.multi_get([b"a", b"b", b"c"]) == [b"1", None, b"3"]
    assert db.multi_get([]) == []
    assert db.multi_get(iter([bytearray(b"a")])) == [b"1"]


def test_snapshot(db):
    db.put(b"a", b"old")
    db.put(b"b", b"stays")
    with db.snapshot() as snap:
        db.put(b"a", b"new")
        db.put(b"c", b"later")
        db.delete(b"b")
        assert snap[b"a"] == b"old"
        assert snap.get(b"c") is None and snap.get(b"c", b"d") == b"d"
        assert b"b" in snap and b"c" not in snap
        with pytest.raises(KeyError):
            snap[b"c"]
        assert snap.multi_get([b"a", b"b", b"c"]) == [b"old", b"stays", None]
        assert list(snap) == [(b"a", b"old"), (b"b", b"stays")]
        assert list(snap.iterator(reverse=True, include_value=False)) == [b"b", b"a"]
        assert list(snap.keys()) == [b"a", b"b"]
        assert isinstance(snap.sequence, int)
        it = snap.iterator()
    # The snapshot is closed; an iterator made from it keeps its own hold.
    with pytest.raises(stratakv.ClosedError):
        snap.get(b"a")
    assert list(it) == [(b"a", b"old"), (b"b", b"stays")]
    assert db[b"a"] == b"new"


def test_snapshot_survives_flush_and_compaction(db):
    fill(db, 2000)
    snap = db.snapshot()
    for i in range(2000):
        db.put(b"k%04d" % i, b"rewritten")
    db.flush()
    db.compact_range()
    assert snap[b"k1234"] == b"v1234"
    assert sum(1 for _ in snap.iterator(include_value=False)) == 2000
    assert db[b"k1234"] == b"rewritten"
    snap.close()


def test_flush_compact_stats(db):
    fill(db, 5000)
    db.flush()
    db.compact_range(b"k0000", b"k9999")
    db.compact_range()
    db.wait_for_compactions()
    s = db.stats()
    assert isinstance(s, dict)
    assert s["l0"] == "matrix"
    assert s["writes"] >= 5000
    assert s["flushes"] >= 1
    assert sum(l["files"] for l in s["levels"]) >= 1
    assert s["poisoned"] is None
    assert db.verify_checksums() >= 5000
    db.sync()


def test_profile_sstable(path):
    with stratakv.DB(path, profile="sstable", **SMALL) as d:
        fill(d, 100)
        d.flush()
        assert d.stats()["l0"] == "sstable"
        assert d[b"k0042"] == b"v42"


def test_profile_pm_only(path):
    opts = dict(SMALL, pm_regions=2, listdb_lookup_cache_bytes=1 << 20)
    with stratakv.DB(path, profile="pm-only", **opts) as d:
        fill(d, 100)
        d.flush()
        del d[b"k0007"]
        d.compact_range()
        s = d.stats()
        assert s["l0"] == "pm-only"
        assert s["listdb_regions"] == 2
        assert d[b"k0042"] == b"v42"
        assert b"k0007" not in d
    with stratakv.DB(path, **opts) as d:
        assert d.stats()["l0"] == "pm-only"
        assert d[b"k0099"] == b"v99"


def test_learned_table_index(path):
    opts = dict(SMALL, table_index="learned", block_size=512)
    with stratakv.DB(path, profile="sstable", **opts) as d:
        fill(d, 3000)
        d.flush()
        d.compact_range()
        s = d.stats()
        assert s["learned_tables"] > 0 and s["binary_tables"] == 0
        assert s["table_index_only_bytes"] > 0
        assert s["read_batching"] in ("io_uring", "threads")
        assert d[b"k0042"] == b"v42"
        assert d.multi_get([b"k2999", b"nope", b"k0001"]) == [b"v2999", None, b"v1"]
        assert d.verify_checksums() >= 3000
    # Reopened with the binary index: old tables stay learned, new ones are binary.
    with stratakv.DB(path, **dict(SMALL, table_index="binary")) as d:
        d.put(b"k9999", b"new")
        d.flush()
        s = d.stats()
        assert s["learned_tables"] > 0 and s["binary_tables"] > 0
        assert d[b"k9999"] == b"new" and d[b"k2000"] == b"v2000"
    with pytest.raises(stratakv.InvalidArgument):
        stratakv.DB(path, table_index="btree", **SMALL)


def test_context_manager_closes_and_reopen(path):
    with stratakv.DB(path, **SMALL) as d:
        d.put(b"a", b"1")
        assert not d.closed
    assert d.closed
    with pytest.raises(stratakv.ClosedError):
        d.get(b"a")
    d.close()  # twice is harmless
    with stratakv.DB(path, **SMALL) as d2:
        assert d2[b"a"] == b"1"
        assert d2.path == path
        assert "open" in repr(d2)


def test_options(path, tmp_path):
    pm = tmp_path / "pmdir"
    pm.mkdir()
    d = stratakv.DB(
        path,
        pm_dir=str(pm),
        compression="lz4",
        bloom_bits_per_key=0,
        create_if_missing=True,
        pm_sync_interval_ms=0,
        prefix_length=2,
        disable_auto_compaction=True,
        **SMALL,
    )
    d.put(b"a", b"1")
    assert any(pm.iterdir())  # the PM region went to pm_dir
    d.close()
    with pytest.raises(stratakv.InvalidArgument):
        stratakv.DB(path, error_if_exists=True, pm_dir=str(pm), **SMALL)
    with pytest.raises(stratakv.Error):
        stratakv.DB(str(tmp_path / "missing"), create_if_missing=False, **SMALL)
    assert not (tmp_path / "missing" / "CURRENT").exists()


def test_a_one_key_database_with_the_default_4_gib_region_takes_under_64_mib(path):
    """The PM region's size is a ceiling: its file takes disk as extents are allocated."""
    import os

    with stratakv.DB(path) as d:
        d.put(b"a", b"b", sync=True)
        st = d.stats()
        assert st["pm_region_bytes"] == 4 << 30
        assert 0 < st["pm_allocated_bytes"] < 64 << 20
    used = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            used += os.lstat(os.path.join(root, f)).st_blocks * 512
    assert used < 64 << 20, f"a one-key database takes {used >> 20} MiB"
