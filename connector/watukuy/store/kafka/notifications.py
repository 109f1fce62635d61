"""What the Kafka thread is given (records, commit requests) and what it tells the store.

The thread calls the store's ``notify`` with one of :data:`Notification` on its own thread;
the store hops to its event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from watukuy.core.commands import Command
from watukuy.store.base import PageRun
from watukuy.store.kafka.lease import Lease
from watukuy.store.kafka.restore import RestoredKeys

__all__ = [
    "Assigned",
    "CommandReceived",
    "CommitRequest",
    "Crashed",
    "Notification",
    "Record",
    "Restored",
    "Revoked",
    "Transacted",
]


class Record(NamedTuple):
    """One record of a transaction. A named tuple, not a frozen dataclass: a transaction
    makes two a changed item (its event and its snapshot entry), and a frozen dataclass's
    ``__init__`` sets each field through ``object.__setattr__`` (1.35 µs a record, 0.4 as a
    named tuple)."""

    topic: str
    key: bytes
    value: bytes | None
    kafka_partition: int | None = None  # None: the murmur2 partitioner places it by key
    headers: Sequence[tuple[str, bytes]] = ()


@dataclass(slots=True)
class CommitRequest:
    records: list[Record]
    leases: dict[int, int]  # Kafka partition -> generation the writer restored under
    done: Callable[[BaseException | None], None]
    runs: Sequence[tuple[str, PageRun]] = ()  # its pages in flight: key -> place in its run


@dataclass(frozen=True, slots=True)
class Restored:
    lease: Lease
    keys: RestoredKeys
    records: int = 0  # read from the co-partitioned topics
    seconds: float = 0.0  # from the start of the restore to its end
    from_disk: int = 0  # records the local state store gave before the topics were read
    served_until: float | None = None
    """The previous owner made every poll due before it (``None``: it did not say)."""


@dataclass(frozen=True, slots=True)
class Assigned:
    kafka_partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Transacted:
    """A transaction of commit requests ended: committed, or aborted with ``error``."""

    records: int
    seconds: float
    error: BaseException | None = None


@dataclass(frozen=True, slots=True)
class Revoked:
    kafka_partitions: tuple[int, ...]
    lost: bool


@dataclass(frozen=True, slots=True)
class CommandReceived:
    kafka_partition: int
    command: Command
    record_key: bytes  # where it waits: tombstoned by the commit that applies it


@dataclass(frozen=True, slots=True)
class Crashed:
    error: BaseException


Notification = Restored | Revoked | CommandReceived | Crashed | Assigned | Transacted
Notify = Callable[[Notification], None]
