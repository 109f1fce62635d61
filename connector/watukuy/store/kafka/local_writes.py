"""The local state store's writes of the records the Kafka thread reads: put in a write batch as
they come (:class:`Staged`), and written by a thread of their own (:class:`BatchWriter`).

Why a thread: RocksDB inserts a restore's records into its memtable at 2-3 µs each when their
keys come in no order (a tenant's identities), and its write lets go of the GIL. On the Kafka
thread, which also reads the topics, that was a third of a cold restore into the store (issue
42: 2.1 s of a 6.8 s restore of 505,002 records). On a thread of its own it overlaps the reads.

Order and visibility: batches are written one at a time, in the order they were handed over,
and whoever reads the store or writes it in any other way first waits until every batch handed
over is written (:meth:`BatchWriter.drain`, which :class:`~watukuy.store.kafka.local.LocalState`
calls), so the rules of :mod:`.local` hold as if each batch had been written when handed over.
A failed write is kept (:attr:`BatchWriter.error`), the batches after it are dropped, and the
next drain reports it: the store is then closed as after any failed write.
"""

from __future__ import annotations

import queue
import struct
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import rocksdict

__all__ = ["BatchWriter", "Staged"]

PENDING = 4  # batches handed over and not yet written, at most: the reader waits past that
_I64 = struct.Struct(">q")


class Staged:
    """One Kafka partition's records read since its last write, in a write batch (keys as
    :mod:`.local` lays them out), with the offset after the last one of each topic."""

    __slots__ = ("_prefixes", "_state", "batch", "kafka_partition", "offsets")

    def __init__(
        self, kafka_partition: int, prefixes: Mapping[str, bytes], state_topic: str
    ) -> None:
        """``prefixes``: each topic's prefix of the partition's record keys."""
        self.kafka_partition = kafka_partition
        self.batch = rocksdict.WriteBatch(raw_mode=True)
        self.offsets: dict[str, int] = {}
        self._prefixes = prefixes
        self._state = state_topic

    def put(self, topic: str, key: bytes, value: bytes | None, stamp: int) -> None:
        """A record (``None``: a tombstone); a state record keeps its Kafka timestamp."""
        record_key = self._prefixes[topic] + key
        if value is None:
            self.batch.delete(record_key)
        elif topic == self._state:
            self.batch.put(record_key, _I64.pack(stamp) + value)
        else:
            self.batch.put(record_key, value)

    def run(self, topic: str, messages: Sequence[Any]) -> None:
        """Consecutive records of one topic as fetched (``Message``\\ s), in offset order.

        One loop over the run, without a call per record but the batch's own: it is the
        per-record cost of a restore into the store."""
        prefix = self._prefixes[topic]
        put, delete = self.batch.put, self.batch.delete
        if topic == self._state:
            pack = _I64.pack
            for message in messages:
                key = message.key()
                if key is not None:
                    value = message.value()
                    if value is None:
                        delete(prefix + key)
                    else:
                        put(prefix + key, pack(message.timestamp()[1]) + value)
        else:
            for message in messages:
                key = message.key()
                if key is not None:
                    value = message.value()
                    if value is None:
                        delete(prefix + key)
                    else:
                        put(prefix + key, value)
        self.offsets[topic] = messages[-1].offset() + 1


class BatchWriter:
    """A thread that writes the batches handed to it, in order; owned by the store, which
    stops it (:meth:`stop`) before closing."""

    def __init__(self, db: rocksdict.Rdict, name: str) -> None:
        self._db = db
        self._pending: queue.Queue[rocksdict.WriteBatch | None] = queue.Queue(PENDING)
        self.error: Exception | None = None  # the first write that failed
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def hand(self, batch: rocksdict.WriteBatch) -> None:
        """Write ``batch`` after those handed before it (waits while ``PENDING`` are)."""
        if self.error is None:
            self._pending.put(batch)

    def drain(self) -> Exception | None:
        """Wait until every batch handed over is written (or dropped after a failure); the
        failure, if one did."""
        self._pending.join()
        return self.error

    def stop(self) -> None:
        """Write what was handed over, then end the thread."""
        self._pending.put(None)
        self._thread.join()

    def _run(self) -> None:
        while True:
            batch = self._pending.get()
            try:
                if batch is None:
                    return
                if self.error is None:
                    self._db.write(batch)
            except Exception as exc:  # a full disk, a volume gone: told at the next drain
                self.error = exc
            finally:
                self._pending.task_done()
