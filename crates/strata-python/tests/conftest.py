"""Shared fixtures: small databases in temp directories that are removed."""

import pytest

import stratakv

# Each database gets a PM region file; 64 MiB keeps tests light. The
# write buffer must leave room for 16 PM slots (a slot is an eighth of it).
SMALL = dict(pm_size=64 << 20, write_buffer_size=1 << 20, block_cache_bytes=4 << 20, matrix_bytes=8 << 20)


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "db")


@pytest.fixture
def db(path):
    d = stratakv.DB(path, **SMALL)
    yield d
    d.close()
