"""The local state store: what this runner read and wrote of the co-partitioned topics (state,
items, parked), on disk (RocksDB, through ``rocksdict``), with the offsets it reflects.

The topics stay the source of truth; this is a cache that can always be rebuilt from them.
Per Kafka partition it holds each record key's last value and, per topic, an offset: every
committed record of that topic-partition below the offset is in the store. So a restore
starts from what the store holds and reads each topic only from its stored offset to the end.

What may go in, and why it can never be ahead of Kafka or inconsistent with it:

- records read (read_committed) by the restore or the tail, with the offset after the last
  one read, in one write batch: a prefix of the topic, exactly;
- records of this runner's own transactions, once Kafka has committed them, with the offset
  after the last record of each topic-partition (its delivery report). The runner is the
  only writer of its partitions' items and parked records (others are fenced), so every
  committed record below that offset is already in the store.

A record is never written before its transaction committed. The store may hold a record
beyond its offset (a transaction committed, its offset not reported): harmless, because a
restore re-reads everything from the offset on, in order, and the last value of each key wins.
A write batch is atomic in RocksDB (its WAL), and a process killed at any point (SIGKILL)
leaves the batches written before it: the OS has them. Nothing is synced; a machine that
loses its page cache may lose the last batches, never half of one (point-in-time recovery).

A store is wiped, with one log line saying why, when it cannot be opened (corrupt), when it
was written for other topics (another cluster, another prefix: the topics' ids differ), and
per partition when it is older than the topics keep tombstones (``delete.retention.ms``: a
key deleted since may have left no trace to read) or its offsets do not fit the topic (below
its start or past its end: the topic was truncated or recreated).

All calls come from the Kafka thread; the CLI (``watukuy-source state``) opens a store of a
runner that is stopped. The records the thread reads are written by a thread of the store's own
(:mod:`.local_writes`); every other call first waits for those handed to it.
"""

from __future__ import annotations

import json
import logging
import shutil
import struct
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import rocksdict

from watukuy.core.errors import ConfigError, Retriable
from watukuy.store.kafka.local_writes import BatchWriter, Staged
from watukuy.store.kafka.topics import TopicLayout

__all__ = ["LocalIdentity", "LocalState", "Put", "Staged", "StoreInfo", "state_path"]

log = logging.getLogger("watukuy.local")

FORMAT = 1  # of the layout below; another one is wiped
WRITE_BUFFER = 16 * 1024 * 1024  # bytes of one memtable (see _open_db)
_META = b"\x00meta"
# Per Kafka partition (4 bytes, big-endian, so a partition's keys sort together):
_OFFSET = b"o"  # + partition + kind -> the next offset to read (8 bytes)
_WRITTEN = b"w"  # + partition -> when it was last written (ms since the epoch, 8 bytes)
_RECORD = b"r"  # + partition + kind + record key -> value (state: its timestamp, then value)
_KINDS = (b"s", b"i", b"p")  # state, items, parked
_STATE = _KINDS[0]
_I64 = struct.Struct(">q")
_PARTITION = struct.Struct(">I")

Put = tuple[str, bytes, bytes | None, int]
"""A record to keep: topic, record key, value (``None``: a tombstone), Kafka timestamp (ms)."""


def state_path(state_dir: str | Path, prefix: str, runner_id: str) -> Path:
    """Where a runner keeps its store: one directory per topic prefix and runner id, so that
    several runners (or deployments) can share ``runner.state.dir``."""
    return Path(state_dir) / prefix / runner_id


@dataclass(frozen=True, slots=True)
class LocalIdentity:
    """What the store was written for: the topics, by their ids (a topic recreated, or one
    of another cluster, has another id), and how many partitions they have."""

    prefix: str
    topic_ids: tuple[str, str, str]  # state, items, parked
    partitions: int

    def encode(self) -> bytes:
        return json.dumps({"format": FORMAT, **asdict(self)}, sort_keys=True).encode()

    def differs(self, stored: bytes) -> str | None:
        """Why a store written for ``stored`` is not one for this identity (``None``: it is)."""
        try:
            found: dict[str, Any] = json.loads(stored)
        except ValueError:
            return "its identity record cannot be read"
        if found.get("format") != FORMAT:
            return f"it has format {found.get('format')}, this release writes {FORMAT}"
        if found.get("prefix") != self.prefix:
            return f"it was written for topic prefix {found.get('prefix')!r}"
        if tuple(found.get("topic_ids", ())) != self.topic_ids:
            return "it was written for other topics (another cluster, or topics recreated)"
        if found.get("partitions") != self.partitions:
            return f"it was written for {found.get('partitions')} partitions"
        return None


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    kafka_partition: int
    offsets: dict[str, int]  # topic -> next offset to read
    records: int
    written_ms: int
    by_topic: dict[str, int]  # topic -> records (the state topic's: keys, and commands)


@dataclass(frozen=True, slots=True)
class StoreInfo:
    path: str
    bytes_on_disk: int
    partitions: list[PartitionInfo]


class LocalState:
    """One runner's store. Open it with :meth:`open`; a failed write disables it (the runner
    goes on from the topics alone, and a restart rebuilds it)."""

    def __init__(self, path: Path, db: rocksdict.Rdict, layout: TopicLayout) -> None:
        self.path = path
        self._db: rocksdict.Rdict | None = db
        self.failed = False  # a write failed: the store is closed, its content unknown
        self._kind = dict(zip((layout.state, layout.items, layout.parked), _KINDS, strict=True))
        self._topic = {kind: topic for topic, kind in self._kind.items()}
        self._state_topic = layout.state
        self._writer: BatchWriter | None = None  # started by the first write handed over

    # -- opening ------------------------------------------------------------------------------

    @classmethod
    def open(cls, path: Path, layout: TopicLayout, identity: LocalIdentity) -> LocalState:
        """The store at ``path``, wiped first if it is corrupt or written for other topics.

        ``ConfigError`` if another process has it open (two runners with one ``runner.id``
        and ``runner.state.dir``)."""
        path.mkdir(parents=True, exist_ok=True)
        try:
            db = _open_db(path)
        except Exception as exc:  # rocksdict raises plain exceptions
            _refuse_if_locked(exc, str(path))
            _wipe_dir(path, f"it cannot be opened ({exc})")
            db = _reopened(path)
        stored = db.get(_META)
        reason = None if stored is None else identity.differs(stored)
        if reason is not None:
            db.close()
            _wipe_dir(path, reason)
            db = _reopened(path)
        if reason is not None or stored is None:
            db.put(_META, identity.encode())
        return cls(path, db, layout)

    @classmethod
    def for_wipe(cls, path: Path, layout: TopicLayout, shown: str) -> LocalState | None:
        """A stopped runner's store opened read-write, holding its lock as a runner does
        (``watukuy-source state wipe``); ``None``: it cannot be opened (corrupt).

        ``ConfigError`` while a runner has it open (``shown``: its path, as messages show it)."""
        try:
            return cls(path, _open_db(path), layout)
        except Exception as exc:  # rocksdict raises plain exceptions
            _refuse_if_locked(exc, shown, ": stop that runner first, then wipe")
            return None

    @classmethod
    def inspect(cls, path: Path, layout: TopicLayout) -> LocalState:
        """A stopped runner's store, read-only (``watukuy-source state info``)."""
        options = rocksdict.Options(raw_mode=True)
        db = rocksdict.Rdict(str(path), options, access_type=rocksdict.AccessType.read_only())
        return cls(path, db, layout)

    def close(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.stop()
        db, self._db = self._db, None
        if db is None:
            return
        try:
            db.close()
        except Exception as exc:  # its directory deleted under it: nothing left to keep
            log.warning("closing the local state store at %s: %s", self.path, exc)

    @property
    def usable(self) -> bool:
        return self._db is not None

    # -- restoring ----------------------------------------------------------------------------

    def resume(
        self,
        kafka_partition: int,
        bounds: Mapping[str, tuple[int, int]],
        *,
        now_ms: int,
        max_age_ms: int,
        states_only: bool = False,
    ) -> tuple[dict[str, int], list[Put]] | None:
        """Where a restore of ``kafka_partition`` starts, per topic, and what the store holds of
        it; ``None``: from the beginning (nothing stored, or the partition wiped, logged).

        ``bounds``: each topic's log start and end offset now. ``states_only``: give the state
        records (states and commands) alone; the others are read per key (:meth:`owned`)."""
        self.drain()
        db = self._db
        if db is None:
            return None
        offsets = self._offsets(db, kafka_partition)
        if len(offsets) < len(_KINDS):
            if offsets:
                self.wipe(kafka_partition, "its offsets are incomplete")
            return None
        written = db.get(_WRITTEN + _PARTITION.pack(kafka_partition))
        age = now_ms - (_I64.unpack(written)[0] if written else 0)
        if age > max_age_ms:
            self.wipe(
                kafka_partition,
                f"it is {age / 1000:.0f}s old, older than the topics keep deletions "
                f"(delete.retention.ms {max_age_ms / 1000:.0f}s)",
            )
            return None
        for topic, (start, end) in bounds.items():
            offset = offsets.get(topic, 0)
            if not start <= offset <= end:
                self.wipe(
                    kafka_partition,
                    f"its offset {offset} of {topic} is outside the topic's {start}..{end} "
                    "(truncated or recreated)",
                )
                return None
        return offsets, self._records(db, kafka_partition, states_only)

    def _offsets(self, db: rocksdict.Rdict, kafka_partition: int) -> dict[str, int]:
        lo = _OFFSET + _PARTITION.pack(kafka_partition)
        return {
            self._topic[key[-1:]]: _I64.unpack(value)[0]
            for key, value in _scan(db, lo, _next(lo))
            if key[-1:] in self._topic
        }

    def _records(self, db: rocksdict.Rdict, kafka_partition: int, states_only: bool) -> list[Put]:
        lo = _RECORD + _PARTITION.pack(kafka_partition)
        start = len(lo) + 1
        out: list[Put] = []
        state = _STATE
        if states_only:
            lo += state
        for key, value in _scan(db, lo, _next(lo)):
            kind = key[start - 1 : start]
            if kind == state:
                (stamp,) = _I64.unpack_from(value)
                out.append((self._topic[kind], key[start:], value[8:], stamp))
            else:
                out.append((self._topic[kind], key[start:], value, 0))
        return out

    def owned(self, kafka_partition: int, topic: str, owner: bytes) -> dict[bytes, bytes]:
        """The item or parked records (``topic``) of one key (``owner``: the owner part of
        their record keys), by record key. Called from the event loop, beside the thread's
        writes (RocksDB reads and writes concurrently).

        ``Retriable`` once the store has failed: its partitions are then restored again from
        the topics (see :class:`~watukuy.store.kafka.disk.DiskCopy`)."""
        db = self._db
        lo = _RECORD + _PARTITION.pack(kafka_partition) + self._kind[topic]
        start = len(lo)
        lo += owner + b"/"
        try:
            if db is None:
                raise rocksdict.DbClosedError("closed")
            return {key[start:]: value for key, value in _scan(db, lo, _next(lo))}
        except Exception as exc:  # closed by a failure on the thread, or failing itself
            raise Retriable(f"the local state store at {self.path} failed: {exc}") from exc

    def values(
        self, kafka_partition: int, topic: str, record_keys: Sequence[bytes]
    ) -> list[bytes | None]:
        """The values of these item or parked records (``topic``), in their order; ``None``
        for one the store does not have. Like :meth:`owned`: from the event loop, and
        ``Retriable`` once the store has failed."""
        db = self._db
        at = _RECORD + _PARTITION.pack(kafka_partition) + self._kind[topic]
        try:
            if db is None:
                raise rocksdict.DbClosedError("closed")
            found: list[bytes | None] = db.get([at + key for key in record_keys]) or []
            return found
        except Exception as exc:  # closed by a failure on the thread, or failing itself
            raise Retriable(f"the local state store at {self.path} failed: {exc}") from exc

    # -- writing ------------------------------------------------------------------------------

    def staged(self, kafka_partition: int) -> Staged:
        """An empty write batch of ``kafka_partition``'s records, for :meth:`write_staged`."""
        part = _PARTITION.pack(kafka_partition)
        prefixes = {topic: _RECORD + part + kind for topic, kind in self._kind.items()}
        return Staged(kafka_partition, prefixes, self._state_topic)

    def write(
        self,
        kafka_partition: int,
        puts: Iterable[Put],
        offsets: Mapping[str, int],
        *,
        now_ms: int,
    ) -> None:
        """Keep ``puts`` (committed records, in offset order) and move the offsets, at once,
        now (after what was handed to the writer)."""
        self.drain()
        db = self._db
        if db is None:
            return
        staged = self.staged(kafka_partition)
        for topic, key, value, stamp in puts:
            staged.put(topic, key, value, stamp)
        staged.offsets.update(offsets)
        self._write(db, self._sealed(staged, now_ms))

    def write_staged(self, staged: Staged, *, now_ms: int) -> None:
        """Keep ``staged`` (records read, with the offsets after them), at once: handed to the
        store's writer thread, written after what was handed before."""
        db = self._db
        if db is None:
            return
        writer = self._writer
        if writer is None:
            self._writer = writer = BatchWriter(db, f"watukuy-local-{self.path.name}")
        elif writer.error is not None:  # failed meanwhile: closed now, the thread told
            self.drain()
            return
        writer.hand(self._sealed(staged, now_ms))

    def drain(self) -> None:
        """Wait until what was handed to the writer thread is written; a failed write then
        closes the store, as one made here does."""
        writer = self._writer
        if writer is None:
            return
        error = writer.drain()
        if error is not None:
            self._failed(error)

    def _sealed(self, staged: Staged, now_ms: int) -> rocksdict.WriteBatch:
        part = _PARTITION.pack(staged.kafka_partition)
        batch = staged.batch
        for topic, offset in staged.offsets.items():
            batch.put(_OFFSET + part + self._kind[topic], _I64.pack(offset))
        batch.put(_WRITTEN + part, _I64.pack(now_ms))
        return batch

    def wipe(self, kafka_partition: int, why: str | None = None) -> None:
        """Forget everything of ``kafka_partition``; ``why`` is logged."""
        self.drain()
        db = self._db
        if db is None:
            return
        if why is not None:
            log.warning(
                "local state of partition %d at %s wiped: %s; it is rebuilt from the topics",
                kafka_partition,
                self.path,
                why,
            )
        part = _PARTITION.pack(kafka_partition)
        batch = rocksdict.WriteBatch(raw_mode=True)
        for tag in (_OFFSET, _WRITTEN, _RECORD):
            batch.delete_range(tag + part, _next(tag + part))
        self._write(db, batch)

    def _write(self, db: rocksdict.Rdict, batch: rocksdict.WriteBatch) -> None:
        try:
            db.write(batch)
        except Exception as exc:  # a full disk, a volume gone: any of them
            self._failed(exc)

    def _failed(self, exc: Exception) -> None:
        log.error(
            "the local state store at %s failed (%s): its partitions are restored again "
            "from the topics and the runner goes on without it; a restart opens it again "
            "(see the runbook 'The local state store')",
            self.path,
            exc,
        )
        self.failed = True
        self.close()

    # -- looking at it ------------------------------------------------------------------------

    def bytes_on_disk(self) -> int:
        """What its files take (any thread: it only walks the directory)."""
        return _size(self.path)

    def info(self) -> StoreInfo:
        self.drain()
        db = self._db
        if db is None:
            return StoreInfo(str(self.path), _size(self.path), [])
        partitions: dict[int, dict[str, int]] = {}
        for key, value in _scan(db, _OFFSET, _next(_OFFSET)):
            (kafka_partition,) = _PARTITION.unpack_from(key, 1)
            topic = self._topic.get(key[5:6])
            if topic is not None:
                partitions.setdefault(kafka_partition, {})[topic] = _I64.unpack(value)[0]
        out = []
        for kafka_partition, offsets in sorted(partitions.items()):
            lo = _RECORD + _PARTITION.pack(kafka_partition)
            written = db.get(_WRITTEN + _PARTITION.pack(kafka_partition))
            counts = dict.fromkeys(self._kind, 0)
            for key in _scan(db, lo, _next(lo), values=False):
                counts[self._topic[key[len(lo) : len(lo) + 1]]] += 1
            out.append(
                PartitionInfo(
                    kafka_partition,
                    offsets,
                    sum(counts.values()),
                    _I64.unpack(written)[0] if written else 0,
                    counts,
                )
            )
        return StoreInfo(str(self.path), _size(self.path), out)


def _open_db(path: Path) -> rocksdict.Rdict:
    options = rocksdict.Options(raw_mode=True)
    options.create_if_missing(True)
    options.set_compression_type(rocksdict.DBCompressionType.lz4())
    # A memtable of 16 MB, not RocksDB's 64: a restore's keys come in no order (a tenant's
    # identities), and inserting them into a skiplist that outgrows the CPU's caches cost
    # about 3 µs a record at 64 MB, 1.5 at 16 (issue 42); smaller buffers also hold less.
    # Level 0 is compacted at 16 files, as much data as RocksDB's 4 files of 64 MB: at 4 small
    # files a cold restore's random keys had the whole next level rewritten every 64 MB.
    options.set_write_buffer_size(WRITE_BUFFER)
    options.set_level_zero_file_num_compaction_trigger(256 * 1024 * 1024 // WRITE_BUFFER)
    # A write batch either survives a crash whole or not at all, and nothing after a torn one.
    options.set_wal_recovery_mode(rocksdict.DBRecoveryMode.point_in_time())
    return rocksdict.Rdict(str(path), options)


def _refuse_if_locked(exc: Exception, shown: str, then: str = "") -> None:
    """``ConfigError`` if ``exc`` says another process holds the store's lock."""
    if "lock" in str(exc).lower():
        raise ConfigError(
            f"the local state store {shown} is open in another process (a runner with the "
            f"same runner.id and runner.state.dir){then}",
            "runner.state.dir",
        ) from exc


def _reopened(path: Path) -> rocksdict.Rdict:
    """A store made again after a wipe; ``ConfigError`` if even that fails (a full disk)."""
    try:
        return _open_db(path)
    except Exception as exc:  # rocksdict raises plain exceptions
        raise ConfigError(
            f"cannot create the local state store at {path}: {exc} (a full disk? free space, "
            "or unset runner.state.dir to keep state in memory)",
            "runner.state.dir",
        ) from exc


def _wipe_dir(path: Path, why: str) -> None:
    log.warning("local state store at %s wiped: %s; it is rebuilt from the topics", path, why)
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True, exist_ok=True)


def _next(prefix: bytes) -> bytes:
    """The first key after every key that starts with ``prefix``."""
    stripped = prefix.rstrip(b"\xff")  # never empty: every prefix starts with a letter
    return stripped[:-1] + bytes([stripped[-1] + 1])


def _scan(db: rocksdict.Rdict, lo: bytes, hi: bytes, *, values: bool = True) -> Iterator[Any]:
    # A generator, so ``bounds`` lives as long as the iteration: rocksdict does not keep the
    # read options alive, and an iterator outliving them reads past its bound.
    bounds = rocksdict.ReadOptions()
    bounds.set_iterate_upper_bound(hi)
    if values:
        yield from db.items(from_key=lo, read_opt=bounds)
    else:
        yield from db.keys(from_key=lo, read_opt=bounds)


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0
