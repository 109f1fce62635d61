"""The store's interfaces: what the engine needs from wherever state lives.

Each caller sees only the seam it uses: :class:`KeyStates` (the keys' committed state),
:class:`Ownership` (which keys this instance may write), :class:`Commands` (operations for
another instance's keys), :class:`EventFeeds` (committed events, for handlers and subscribers)
and :class:`Lifecycle`. :class:`Store` is their union, what the engine is built with. They
carry keys, values and ids: how an implementation lays them out (the Kafka store's record
keys) stays inside it.

The one rule every implementation keeps: a :class:`KeyCommit` (a poll's page, or an
operation) is committed whole or not at all — events, the key's new state, snapshot changes,
parked records, the commands it applies and the commands it sends together. A batch of
commits is one atomic unit too, which is what lets the Kafka store put several keys' pages
in one transaction.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from watukuy.core.commands import Command
from watukuy.core.errors import NewerRelease
from watukuy.core.events import Event
from watukuy.core.poller import Poller
from watukuy.core.state import ParkedItem, PartitionState, SnapshotEntry

# Where the engine meets them, beside the interfaces that carry them.
__all__ = [
    "Command",
    "Commands",
    "EventFeed",
    "EventFeeds",
    "KeyCommit",
    "KeyStates",
    "Lifecycle",
    "NewerRelease",
    "Ownership",
    "PageRun",
    "Store",
    "StoredKey",
]


@dataclass(frozen=True, slots=True)
class PageRun:
    """Where a poll's page stands in its run of pages sent before the ones before them were
    answered (pages in flight): ``serial`` numbers it within the run, ``after`` names the page
    it builds on, ``None`` for the first, which builds on the key's committed state.

    A store commits a key's pages in the order they were sent, and refuses (``Retriable``) a
    page whose ``after`` was refused or failed: it was decided against a state that never came
    to be, so committing it would skip the failed page's items.
    """

    serial: int
    after: int | None = None


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
    commands: Sequence[str] = ()  # ids of the commands this commit applies (gone with it)
    sends: Sequence[Command] = ()
    """Commands for other keys' owners, written with this commit or not at all: a parent
    stream's page creates or pauses its child keys (:mod:`watukuy.core.children`)."""
    run: PageRun | None = None
    """A page sent while earlier pages of its key were in flight; ``None``: any other commit."""

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

    def listen(self) -> None:
        """A handler or subscriber wants these events: start reading them (idempotent). A
        feed that reads from elsewhere (the Kafka store's) reads nothing before this."""

    def done(self, event: Event) -> None:
        """``event`` was handled (or parked): the feed may move past it. Every event taken
        from the feed is handed back once, so a feed that commits positions can."""

    async def dead_letter(self, item: ParkedItem) -> bool:
        """A poison event that could not be parked here (another instance holds its key): put
        it where an operator finds it. ``False``: this feed has no such place."""

    async def aclose(self) -> None: ...


class Lifecycle(Protocol):
    def bind(self, pollers: Mapping[str, Poller]) -> None:
        """Learn the pollers before ``start`` (event topics, schemas)."""

    async def add_poller(self, poller: Poller) -> None:
        """Learn a poller added (or redefined) at run time: before ``start`` like ``bind``;
        once started, make what it needs exist (its events and DLQ topics, its schema)."""

    async def start(self) -> None: ...

    async def close(self) -> None: ...


class KeyStates(Protocol):
    """The committed state of the keys this instance owns."""

    async def load(self, poller: str, partition: str, *, snapshot: bool = True) -> StoredKey | None:
        """The key's committed state, or ``None`` if it was never stored (or was removed).

        ``snapshot=False``: its state and parked items only (its ``snapshot`` is empty): a key
        is activated so, and loads its snapshot when a page needs it."""

    def entries(
        self, poller: str, partition: str, identities: Iterable[str]
    ) -> dict[str, SnapshotEntry]:
        """The key's committed snapshot entries of ``identities`` (those it has): what a page
        compares its items with, without loading the whole snapshot.

        Answered from this instance's own copy (memory, or the local state store on disk),
        never over a network, so it does not await: nothing the key commits can land between
        the read and the decision taken with it. ``Fenced`` if the key is not owned here,
        ``NewerRelease`` if one of the entries was written by a newer release."""

    async def commit(self, batch: Sequence[KeyCommit]) -> None:
        """Commit every entry of ``batch`` atomically, or raise and commit nothing.

        A store may leave unwritten an entry that changes nothing but what idle polls move
        (:func:`~watukuy.core.state.only_rescheduled`: the key's due time whole intervals
        later, its last success): it is committed all the same for this instance, and
        whoever restores the key next moves its due time on from what :meth:`served_until`
        last said (:func:`~watukuy.core.schedule.resumed`)."""

    def served_until(self, until: float) -> None:
        """Every poll due before ``until`` (seconds since the epoch) of every key this
        instance holds was made. A store that leaves idle polls unwritten keeps it with its
        commits, for whoever restores the keys next; one that writes every commit need not
        keep it. A running engine says it every few seconds."""

    def unpublishable(self, event: Event) -> str | None:
        """Why ``event`` could not be published (too large for its topic), or ``None``.

        Asked before the event takes a sequence number: one it refuses is parked instead, so
        the numbers stay gap-free."""

    async def remove(self, poller: str, partition: str, command: str | None = None) -> None:
        """Delete every record of the key: state, snapshot, parked, validators, sequence.

        ``command`` is the id of a remove command, gone with the key."""

    async def partitions(self, poller: str) -> list[str]:
        """Keys of ``poller`` that have stored state."""

    def states_of(self, poller: str, *, waiting: bool = True) -> list[PartitionState]:
        """The committed state of every key of ``poller`` this instance owns and has stored;
        ``waiting=False`` may leave out on_change children waiting for a trigger
        (:func:`~watukuy.core.onchange.sleeps`) that the engine does not hold: a store may
        keep those undecoded (the Kafka store does; the memory store returns them all)."""


class Ownership(Protocol):
    def owns(self, poller: str, partition: str) -> bool:
        """Whether this instance may poll and commit the key now."""

    def watch(self, changed: Callable[[], None]) -> None:
        """Call ``changed`` (on the event loop) whenever ownership or pending commands change."""


class Commands(Protocol):
    """Operations addressed to a key's owner, wherever it runs."""

    def take_commands(self) -> list[Command]:
        """Commands received for owned keys since the last call. Each stays pending (handed
        over again after a restart or a move) until a commit names its id in
        :attr:`KeyCommit.commands`, or a ``remove`` in ``command``."""

    async def send_command(self, command: Command) -> None:
        """Hand an operation to the key's owner (another instance)."""


class EventFeeds(Protocol):
    def events(self, poller: str) -> EventFeed:
        """Events of ``poller`` committed from the moment this returns, in commit order."""


class Store(Lifecycle, KeyStates, Ownership, Commands, EventFeeds, Protocol):
    """Every seam at once: what the engine is built with."""
