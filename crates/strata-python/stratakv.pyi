"""Type stubs of the stratakv extension module (StrataKV from Python)."""

import os
from types import TracebackType
from typing import Any, Iterable, Iterator as _Iter, Optional, Type, TypeVar, Union, overload

__version__: str
MAX_KEY_LEN: int
MAX_VALUE_LEN: int

# Keys and values: bytes, or a bytes-like bytearray or memoryview (copied).
# A str raises TypeError.
_Bytes = Union[bytes, bytearray, memoryview]
_T = TypeVar("_T")

class Error(Exception):
    """Base class of every error StrataKV raises; the message is the engine's."""

class IoError(Error):
    """A file-system call failed."""

class CorruptionError(Error):
    """Stored bytes failed a check (checksum, magic, bounds or ordering)."""

class InvalidArgument(Error):
    """An unknown option or profile, a bad option value, a key or value over the limits."""

class PmFull(Error):
    """The persistent-memory region has no room and none was freed in time."""

class DiskFull(Error):
    """The SSD has no room (ENOSPC)."""

class LockedError(Error):
    """Another process (or another open DB in this one) holds the database directory."""

class PoisonedError(Error):
    """An earlier write failure; the database refuses writes until it is reopened."""

class ClosedError(Error):
    """The database, or the snapshot or iterator used, is closed."""

class PmError(Error):
    """A persistent-memory region problem that is not corruption."""

class Iterator:
    """Entries of a key range as of the iterator's creation: (key, value)
    tuples, or keys or values alone, as `iterator(...)` asked."""

    def __iter__(self) -> Iterator: ...
    def __next__(self) -> Any: ...
    def close(self) -> None:
        """Releases the iterator early; further steps raise ClosedError."""
    def __enter__(self) -> Iterator: ...
    def __exit__(self, *exc: Any) -> bool: ...

class WriteBatch:
    """Puts and deletes applied all or nothing, also across a crash."""

    def __init__(self) -> None: ...
    def put(self, key: _Bytes, value: _Bytes, partition: Optional[Partition] = None) -> None:
        """Adds key = value, in `partition` if given (a batch may span partitions)."""
    def delete(self, key: _Bytes, partition: Optional[Partition] = None) -> None:
        """Adds a deletion of key, in `partition` if given."""
    def clear(self) -> None: ...
    def approximate_size(self) -> int: ...
    def write(self) -> None:
        """Writes the batch to the database that made it (db.write_batch())."""
    def __len__(self) -> int: ...
    def __enter__(self) -> WriteBatch: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]] = None,
        _exc: Optional[BaseException] = None,
        _tb: Optional[TracebackType] = None,
    ) -> bool: ...

class Snapshot:
    """A consistent read-only view of a database at one moment."""

    @property
    def sequence(self) -> int: ...
    @overload
    def get(self, key: _Bytes) -> Optional[bytes]: ...
    @overload
    def get(self, key: _Bytes, default: _T) -> Union[bytes, _T]: ...
    def __getitem__(self, key: _Bytes) -> bytes: ...
    def __contains__(self, key: _Bytes) -> bool: ...
    def multi_get(self, keys: Iterable[_Bytes]) -> list[Optional[bytes]]: ...
    def iterator(
        self,
        *,
        start: Optional[_Bytes] = None,
        stop: Optional[_Bytes] = None,
        prefix: Optional[_Bytes] = None,
        reverse: bool = False,
        include_key: bool = True,
        include_value: bool = True,
        include_start: bool = True,
        include_stop: bool = False,
    ) -> Iterator: ...
    def __iter__(self) -> _Iter[tuple[bytes, bytes]]: ...
    def keys(self) -> _Iter[bytes]: ...
    def values(self) -> _Iter[bytes]: ...
    def items(self) -> _Iter[tuple[bytes, bytes]]: ...
    def close(self) -> None: ...
    def __enter__(self) -> Snapshot: ...
    def __exit__(self, *exc: Any) -> bool: ...

class Partition:
    """A named key space of a database with the DB key/value API; keys are
    the partition's own (iterators yield them without a prefix). Raises
    InvalidArgument once dropped, ClosedError once its database is closed."""

    @property
    def name(self) -> str: ...
    @property
    def is_default(self) -> bool: ...
    @overload
    def get(self, key: _Bytes) -> Optional[bytes]: ...
    @overload
    def get(self, key: _Bytes, default: _T) -> Union[bytes, _T]: ...
    def put(self, key: _Bytes, value: _Bytes, *, sync: bool = False) -> None: ...
    def delete(self, key: _Bytes, *, sync: bool = False) -> None: ...
    def __getitem__(self, key: _Bytes) -> bytes: ...
    def __setitem__(self, key: _Bytes, value: _Bytes) -> None: ...
    def __delitem__(self, key: _Bytes) -> None: ...
    def __contains__(self, key: _Bytes) -> bool: ...
    def multi_get(self, keys: Iterable[_Bytes]) -> list[Optional[bytes]]: ...
    def write(self, batch: WriteBatch, *, sync: bool = False) -> None:
        """Applies a batch with its keys taken as this partition's."""
    def iterator(
        self,
        *,
        start: Optional[_Bytes] = None,
        stop: Optional[_Bytes] = None,
        prefix: Optional[_Bytes] = None,
        reverse: bool = False,
        include_key: bool = True,
        include_value: bool = True,
        include_start: bool = True,
        include_stop: bool = False,
    ) -> Iterator: ...
    def __iter__(self) -> _Iter[tuple[bytes, bytes]]: ...
    def keys(self) -> _Iter[bytes]: ...
    def values(self) -> _Iter[bytes]: ...
    def items(self) -> _Iter[tuple[bytes, bytes]]: ...
    def delete_range(self, start: _Bytes, stop: _Bytes) -> None: ...
    def clear(self) -> None: ...
    def flush(self) -> None: ...
    def compact_range(self, start: Optional[_Bytes] = None, stop: Optional[_Bytes] = None) -> None: ...

class DB:
    """A StrataKV database in the directory `path`.

    `profile` is "matrix" (default) or "sstable"; `pm_dir` is the directory
    of the PM region file; other keywords set engine options (pm_size,
    write_buffer_size, block_cache_bytes, bloom_bits_per_key, compression,
    create_if_missing, error_if_exists, pm_sync_interval_ms, ...).
    """

    def __init__(
        self,
        path: Union[str, "os.PathLike[str]"],
        *,
        profile: Optional[str] = None,
        pm_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
        create_if_missing: bool = ...,
        error_if_exists: bool = ...,
        pm_size: int = ...,
        pm_write_latency_ns: int = ...,
        write_buffer_size: int = ...,
        max_write_buffer_number: int = ...,
        block_cache_bytes: int = ...,
        bloom_bits_per_key: int = ...,
        compression: Optional[str] = ...,
        table_index: str = ...,
        use_direct_reads: bool = ...,
        pm_slot_bytes: int = ...,
        block_size: int = ...,
        block_restart_interval: int = ...,
        target_file_size: int = ...,
        l0_compaction_trigger: int = ...,
        l0_slowdown_writes_trigger: int = ...,
        l0_stop_writes_trigger: int = ...,
        max_bytes_for_level_base: int = ...,
        level_size_multiplier: int = ...,
        background_compactions: int = ...,
        background_nice: int = ...,
        pm_sync_interval_ms: int = ...,
        pm_full_timeout_ms: int = ...,
        disable_auto_compaction: bool = ...,
        matrix_bytes: int = ...,
        column_bytes: int = ...,
        rows_per_segment: int = ...,
        max_runs: int = ...,
        column_threads: int = ...,
        max_receiver_rows: int = ...,
        matrix_hash_index: bool = ...,
        prefix_length: int = ...,
        partition_split_bytes: int = ...,
    ) -> None: ...
    @property
    def path(self) -> str: ...
    @property
    def closed(self) -> bool: ...
    @overload
    def get(self, key: _Bytes) -> Optional[bytes]: ...
    @overload
    def get(self, key: _Bytes, default: _T) -> Union[bytes, _T]: ...
    def put(self, key: _Bytes, value: _Bytes, *, sync: bool = False) -> None: ...
    def delete(self, key: _Bytes, *, sync: bool = False) -> None: ...
    def __getitem__(self, key: _Bytes) -> bytes: ...
    def __setitem__(self, key: _Bytes, value: _Bytes) -> None: ...
    def __delitem__(self, key: _Bytes) -> None: ...
    def __contains__(self, key: _Bytes) -> bool: ...
    def multi_get(self, keys: Iterable[_Bytes]) -> list[Optional[bytes]]: ...
    def write_batch(self, *, sync: bool = False) -> WriteBatch: ...
    def write(self, batch: WriteBatch, *, sync: bool = False) -> None: ...
    def iterator(
        self,
        *,
        start: Optional[_Bytes] = None,
        stop: Optional[_Bytes] = None,
        prefix: Optional[_Bytes] = None,
        reverse: bool = False,
        include_key: bool = True,
        include_value: bool = True,
        include_start: bool = True,
        include_stop: bool = False,
    ) -> Iterator: ...
    def __iter__(self) -> _Iter[tuple[bytes, bytes]]: ...
    def keys(self) -> _Iter[bytes]: ...
    def values(self) -> _Iter[bytes]: ...
    def items(self) -> _Iter[tuple[bytes, bytes]]: ...
    def snapshot(self) -> Snapshot: ...
    def create_partition(self, name: str) -> Partition: ...
    def partition(self, name: str) -> Partition:
        """A handle on partition `name` ("default" is the DB's own keys)."""
    def partition_or_create(self, name: str) -> Partition: ...
    def drop_partition(self, name: str) -> None: ...
    def clear_all_partitions(self) -> None:
        """Removes every key of every partition (the DB's own included) at once; the partitions stay."""
    def list_partitions(self) -> list[str]:
        """The partition names, "default" first."""
    def delete_range(self, start: _Bytes, stop: _Bytes) -> None:
        """Removes the DB's own keys in [start, stop) with one range tombstone."""
    def range_partitions(self) -> list[tuple[bytes, Optional[bytes], int]]:
        """(start, end or None for the last, bytes of its tables), in key order."""
    def drop_range_partition(self, key: _Bytes) -> None: ...
    def flush(self) -> None: ...
    def sync(self) -> None: ...
    def compact_range(self, start: Optional[_Bytes] = None, stop: Optional[_Bytes] = None) -> None: ...
    def wait_for_compactions(self) -> None: ...
    def verify_checksums(self) -> int: ...
    def stats(self) -> dict[str, Any]: ...
    def close(self) -> None: ...
    def __enter__(self) -> DB: ...
    def __exit__(self, *exc: Any) -> bool: ...

