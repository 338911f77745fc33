"""Partitions, range deletion and range partitions."""

import pytest

import stratakv
from conftest import SMALL


def test_partition_isolation(db):
    db[b"k"] = b"db"
    p = db.create_partition("users")
    q = db.partition_or_create("orders")
    assert p.name == "users" and not p.is_default
    assert "users" in repr(p)
    p[b"k"] = b"users"
    q.put(b"k", b"orders", sync=True)
    assert db[b"k"] == b"db" and p[b"k"] == b"users" and q.get(b"k") == b"orders"
    assert p.get(b"missing") is None and p.get(b"missing", b"d") == b"d"
    assert b"k" in p and b"missing" not in p
    with pytest.raises(KeyError):
        p[b"missing"]
    assert p.multi_get([b"k", b"missing"]) == [b"users", None]
    del p[b"k"]
    assert b"k" not in p and q[b"k"] == b"orders" and db[b"k"] == b"db"
    p.delete(b"never-there")
    # "default" is the DB's own keys.
    d = db.partition("default")
    assert d.is_default and d[b"k"] == b"db"
    d[b"k2"] = b"2"
    assert db[b"k2"] == b"2"
    with pytest.raises(TypeError):
        p.put("str", b"v")
    with pytest.raises(stratakv.InvalidArgument):
        db.partition("nope")
    with pytest.raises(stratakv.InvalidArgument):
        db.create_partition("users")
    with pytest.raises(stratakv.InvalidArgument):
        db.create_partition("")


def test_iteration_is_partition_relative(db):
    p = db.create_partition("p")
    db[b"a"] = b"db"
    for k in (b"b", b"a", b"c", b"ab"):
        p[k] = k.upper()
    assert list(p) == [(b"a", b"A"), (b"ab", b"AB"), (b"b", b"B"), (b"c", b"C")]
    assert list(p.keys()) == [b"a", b"ab", b"b", b"c"]
    assert list(p.values()) == [b"A", b"AB", b"B", b"C"]
    assert list(p.items()) == list(p)
    assert list(p.iterator(prefix=b"a", include_value=False)) == [b"a", b"ab"]
    assert list(p.iterator(start=b"ab", stop=b"c", include_value=False)) == [b"ab", b"b"]
    assert list(p.iterator(reverse=True, include_key=False)) == [b"C", b"B", b"AB", b"A"]
    # The DB's own keys do not show the partition's.
    assert list(db) == [(b"a", b"db")]
    p.flush()
    p.compact_range(b"a", b"b")
    p.compact_range()
    assert list(p.keys()) == [b"a", b"ab", b"b", b"c"]


def test_batch_spans_partitions(db):
    p = db.create_partition("p")
    q = db.create_partition("q")
    p[b"gone"] = b"x"
    with db.write_batch() as wb:
        wb.put(b"k", b"db")
        wb.put(b"k", b"p", partition=p)
        wb.put(b"k", b"q", q)
        wb.delete(b"gone", partition=p)
        assert p.get(b"k") is None
    assert (db[b"k"], p[b"k"], q[b"k"]) == (b"db", b"p", b"q")
    assert b"gone" not in p
    # An unbound batch, written with db.write.
    wb = stratakv.WriteBatch()
    wb.put(b"x", b"1", partition=q)
    wb.delete(b"k", partition=q)
    db.write(wb)
    assert q[b"x"] == b"1" and b"k" not in q
    # A batch relative to a partition.
    wb = stratakv.WriteBatch()
    wb.put(b"rel", b"1")
    wb.delete(b"k")
    p.write(wb)
    assert p[b"rel"] == b"1" and b"k" not in p and b"rel" not in db and db[b"k"] == b"db"
    # partition= updates and partition.write do not mix.
    wb = stratakv.WriteBatch()
    wb.put(b"a", b"1", partition=q)
    with pytest.raises(stratakv.InvalidArgument):
        p.write(wb)


def test_batch_rejects_partition_of_another_db(db, tmp_path):
    with stratakv.DB(str(tmp_path / "other"), **SMALL) as other:
        op = other.create_partition("p")
        with pytest.raises(stratakv.InvalidArgument):
            db.write_batch().put(b"k", b"v", partition=op)
        wb = stratakv.WriteBatch()
        wb.put(b"k", b"v", partition=op)
        with pytest.raises(stratakv.InvalidArgument):
            db.write(wb)


def test_drop_partition(db):
    p = db.create_partition("p")
    p[b"k"] = b"v"
    p.flush()
    p[b"k2"] = b"v2"
    db.drop_partition("p")
    assert db.list_partitions() == ["default"]
    for call in (lambda: p.get(b"k"), lambda: p.put(b"k", b"v"), lambda: list(p), lambda: p.clear()):
        with pytest.raises(stratakv.InvalidArgument):
            call()
    with pytest.raises(stratakv.InvalidArgument):
        db.drop_partition("p")
    again = db.create_partition("p")
    assert list(again) == [] and again.get(b"k") is None
    again[b"k"] = b"new"
    assert again[b"k"] == b"new"
    with pytest.raises(stratakv.InvalidArgument):
        p.get(b"k")


def test_clear_all_partitions(db):
    p = db.create_partition("p")
    q = db.create_partition("q")
    for k in (b"a", b"b"):
        db[k] = b"db"
        p[k] = b"p"
        q[k] = b"q"
    p.flush()
    snap = db.snapshot()
    db.clear_all_partitions()
    assert db.list_partitions() == ["default", "p", "q"]
    assert list(db) == [] and list(p) == [] and list(q) == []
    assert db.get(b"a") is None and p.get(b"b") is None
    assert snap.get(b"a") == b"db"
    p[b"c"] = b"after"
    assert list(p) == [(b"c", b"after")] and list(db) == []


def test_delete_range(db):
    p = db.create_partition("p")
    for k in (b"a", b"b", b"c", b"d"):
        db[k] = b"db"
        p[k] = b"p"
    db.delete_range(b"b", b"d")
    assert list(db.keys()) == [b"a", b"d"]
    assert list(p.keys()) == [b"a", b"b", b"c", b"d"]
    p.delete_range(b"a", b"c")
    assert list(p.keys()) == [b"c", b"d"]
    # Writes after the range deletion show.
    db[b"b"] = b"again"
    assert db[b"b"] == b"again"
    s = db.stats()
    assert s["range_deletes"] >= 2 and s["range_tombstones"] >= 1
    p.clear()
    assert list(p) == [] and list(db.keys()) == [b"a", b"b", b"d"]
    with pytest.raises(TypeError):
        db.delete_range("a", b"b")


def test_list_partitions_after_reopen(path):
    with stratakv.DB(path, **SMALL) as d:
        assert d.list_partitions() == ["default"]
        d.create_partition("b")[b"k"] = b"vb"
        d.create_partition("a")
        d.create_partition("gone")
        d.drop_partition("gone")
        s = d.stats()
        assert s["partitions"] == ["default", "a", "b"]
    with stratakv.DB(path, **SMALL) as d:
        assert d.list_partitions() == ["default", "a", "b"]
        assert d.partition("b")[b"k"] == b"vb"
        with pytest.raises(stratakv.InvalidArgument):
            d.partition("gone")


def test_partition_after_close(path):
    d = stratakv.DB(path, **SMALL)
    p = d.create_partition("p")
    it = p.iterator()
    d.close()
    with pytest.raises(stratakv.ClosedError):
        p.get(b"k")
    with pytest.raises(stratakv.ClosedError):
        next(it)
    assert "closed" in repr(p)
    # The directory is free again: the handle does not hold it.
    with stratakv.DB(path, **SMALL) as d2:
        assert d2.list_partitions() == ["default", "p"]


def test_range_partitions(path):
    with stratakv.DB(path, profile="sstable", partition_split_bytes=1 << 20, **SMALL) as d:
        rps = d.range_partitions()
        assert len(rps) == d.stats()["range_partitions"] >= 1
        start, end, size = rps[0]
        assert start == b"" and isinstance(size, int)
        assert rps[-1][1] is None
        for (_, e, _), (s, _, _) in zip(rps, rps[1:]):
            assert e == s
        for i in range(200):
            d[b"key%05d" % i] = b"v" * 100
        d.flush()
        d.compact_range()
        assert sum(r[2] for r in d.range_partitions()) > 0
        d.drop_range_partition(b"key00010")
        if len(d.range_partitions()) == 1:
            assert list(d) == []
        assert isinstance(d.stats()["range_dropped_files"], int)
    with pytest.raises(stratakv.InvalidArgument):
        stratakv.DB(path, partition_split_bytes=True, **SMALL)
