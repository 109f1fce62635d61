"""The Store interface: what the engine needs from wherever state lives.

The one rule every implementation keeps: a :class:`KeyCommit` (a poll's page, or an
operation) is committed whole or not at all — events, the key's new state, snapshot changes
and parked records together. A batch of commits is one atomic unit too, which is what lets
the Kafka store put several keys' pages in one transaction.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from watukuy.core.events import Event
from watukuy.core.state import ParkedItem, PartitionState, SnapshotEntry


@dataclass(frozen=True, slots=True)
class KeyCommit:
    """Everything one step changes for one key.

    ``fenced`` commits carry the epoch the writer believes it holds; a store that finds
    another epoch rejects the whole batch with ``Fenced``. Unfenced writes (pausing a removed
    partition) skip the check.
    """

    state: PartitionState
    events: Sequence[Event] = ()
    upserts: dict[str, SnapshotEntry] = field(default_factory=dict)
    forget: Sequence[str] = ()
    parked: Sequence[ParkedItem] = ()
    unpark: Sequence[str] = ()
    fenced: bool = True

    @property
    def key(self) -> str:
        return self.state.key


@dataclass(slots=True)
class StoredKey:
    """A key as restored: its state, snapshot and parked items."""

    state: PartitionState
    snapshot: dict[str, SnapshotEntry]
    parked: dict[str, ParkedItem]


class EventFeed(Protocol):
    def __aiter__(self) -> AsyncIterator[Event]: ...

    async def __anext__(self) -> Event: ...

    def ready(self) -> list[Event]:
        """Events available now, without waiting."""

    async def aclose(self) -> None: ...


class Store(Protocol):
    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def load(self, poller: str, partition: str) -> StoredKey | None:
        """The key's committed state, or ``None`` if it was never stored (or was removed)."""

    async def commit(self, batch: Sequence[KeyCommit]) -> None:
        """Commit every entry of ``batch`` atomically, or raise and commit nothing."""

    async def remove(self, poller: str, partition: str) -> None:
        """Delete every record of the key: state, snapshot, parked, validators, sequence."""

    async def partitions(self, poller: str) -> list[str]:
        """Keys of ``poller`` that have stored state."""

    def events(self, poller: str) -> EventFeed:
        """Events of ``poller`` committed from the moment this returns, in commit order."""
