"""A key's pages in flight: sent to the store, not yet answered, and the picture they leave.

A key with a backlog fetches page n+1 while page n's transaction is open, and decides it
against the state, snapshot and parked items page n leaves: the key's *tentative* picture. The
:class:`~watukuy.engine.keys.KeyRuntime` keeps only what the store accepted; pages land in the
order they were sent, each moving the committed picture on. A page the store refuses ends the
run: the store refuses every page sent after it (:class:`~watukuy.store.apply.PageRuns`), the
tentative picture is dropped, and the key goes on later from what was committed, so nothing
is published twice and nothing is skipped.

Kafka Streams processes continuously and commits every ``commit.interval.ms``; this is the same
for one key's pages, bounded per key and per runner so memory stays bounded and one tenant's
backlog cannot take every commit.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TypeVar, overload

from watukuy.core.circuit import CircuitState
from watukuy.core.poll import Decision, Failure, Page, PollPlan
from watukuy.core.state import ParkedItem, PartitionState, SnapshotEntry
from watukuy.core.validation import positive_int
from watukuy.engine.keys import KeyRuntime
from watukuy.engine.turns import Turn
from watukuy.store.base import KeyCommit, PageRun

V = TypeVar("V")
T = TypeVar("T")
Answer = tuple[str, int | None, float]  # method, status (None: no answer), seconds


@dataclass(frozen=True, slots=True)
class PageLimits:
    """How many pages may wait for their commit: per key, and on the whole runner."""

    per_key: int = 16
    total: int = 1024

    def __post_init__(self) -> None:
        # Named as the Engine's arguments: the runner's config checked them where they entered.
        positive_int(self.per_key, "pages_in_flight", repr(self.per_key))
        positive_int(self.total, "pages_in_flight_total", repr(self.total))


@dataclass(frozen=True, slots=True)
class Fetched:
    """A page as the vendor answered it (or did not), with its HTTP responses."""

    outcome: Page | Failure
    responses: list[Answer]
    seconds: float  # the fetch took


@dataclass(frozen=True, slots=True)
class Ahead:
    """The next page, asked for while the one before it was decided."""

    step: PollPlan
    task: asyncio.Task[Fetched]


@dataclass(slots=True)
class SentPage:
    """One page sent to the store, with what is told about it once it lands."""

    commit: KeyCommit
    step: PollPlan
    outcome: Page | Failure
    decision: Decision
    fetched: float  # seconds the fetch took
    responses: list[Answer]
    circuit: CircuitState  # the key's circuit before the page began
    begun: PartitionState  # the state the page began from (a probe moves the circuit)
    answer: asyncio.Task[BaseException | None] | None = None


@dataclass(slots=True)
class InFlight:
    """The pages of one lane's run still waiting for the store, oldest first."""

    runtime: KeyRuntime
    turn: Turn | None = None
    """The poll's turn to fetch, given back once the lane's last page is sent."""
    pages: deque[SentPage] = field(default_factory=deque)
    broken: bool = False
    """A page was refused: the run stops, and the pages after it are refused too."""
    error: BaseException | None = None
    """What the store raised that is neither ``Fenced`` nor ``Retriable``: raised once the
    pages in flight are answered."""
    _serial: int = 0
    _snapshot: Overlay[SnapshotEntry] | None = None
    _parked: Overlay[ParkedItem] | None = None

    @property
    def state(self) -> PartitionState:
        """The state the next page begins from: the last page sent, else the committed one."""
        return self.pages[-1].commit.state if self.pages else self.runtime.state

    def snapshot(self) -> Mapping[str, SnapshotEntry]:
        """The tentative snapshot; a guard that refuses every look while the key's snapshot
        is not loaded (a page that needs it loads it first: see ``core.poll.lookups``)."""
        if self._snapshot is not None:
            return self._snapshot
        held = self.runtime.snapshot
        return NOT_LOADED if held is None else held

    def snapshot_over(self, found: Mapping[str, SnapshotEntry]) -> Mapping[str, SnapshotEntry]:
        """The tentative snapshot of a key whose snapshot is not held, as far as ``found`` (the
        committed entries a page reads) goes: the pages in flight's changes over them. Taken
        with no await between the read and the decision, so no page lands in between."""
        return found if self._snapshot is None else self._snapshot.over(found)

    def rebase(self) -> None:
        """The key's snapshot was loaded while pages were in flight: they apply over it."""
        if self._snapshot is not None:
            self._snapshot.base = self.runtime.held_snapshot

    def parked(self) -> Mapping[str, ParkedItem]:
        return self._parked if self._parked is not None else self.runtime.parked

    def last_page_sent(self) -> None:
        """Nothing more is fetched in this lane: its turn goes to another key while its
        pages wait for their commit."""
        if self.turn is not None:
            self.turn.give_back()

    def run_of(self) -> PageRun:
        """The next page's place in the run: after the last page in flight, if any."""
        self._serial += 1
        last = self.pages[-1].commit.run if self.pages else None
        return PageRun(self._serial, None if last is None else last.serial)

    def sent(self, page: SentPage) -> None:
        commit = page.commit
        self.pages.append(page)
        if not (commit.upserts or commit.forget or commit.parked or commit.unpark):
            return  # the picture it leaves is the one before it (an idle poll's page)
        # An overlay, not a copy: a tenant with a million entries and a backlog would copy
        # them whenever its pipeline drained and filled again.
        if self._snapshot is None or self._parked is None:
            held = self.runtime.snapshot
            self._snapshot = Overlay(NOT_LOADED if held is None else held)
            self._parked = Overlay(self.runtime.parked)
        serial = _serial_of(commit)
        self._snapshot.change(commit.upserts, commit.forget, serial)
        self._parked.change({item.id: item for item in commit.parked}, commit.unpark, serial)

    def land(self) -> SentPage:
        """The oldest page, now answered, out of the run. The caller takes a committed page
        into the key before anything awaits, so the committed picture has its changes."""
        page = self.pages.popleft()
        if not self.pages:  # everything sent is committed (or refused): nothing tentative
            self._snapshot = self._parked = None
        elif self._snapshot is not None and self._parked is not None:
            # A backlog's pipeline may never drain: the changes only this page made are
            # the committed picture's now, so the overlays stay as small as the pages left.
            commit, serial = page.commit, _serial_of(page.commit)
            self._snapshot.landed((*commit.upserts, *commit.forget), serial)
            self._parked.landed((*(item.id for item in commit.parked), *commit.unpark), serial)
        return page


def _serial_of(commit: KeyCommit) -> int:
    if commit.run is None:
        raise RuntimeError("a page in flight has no place in its run")
    return commit.run.serial


class _NotLoaded(Mapping[str, SnapshotEntry]):
    """A snapshot that is not loaded: any look at it is a bug, said loudly."""

    def __getitem__(self, name: str) -> SnapshotEntry:
        raise RuntimeError("a snapshot was read before it was loaded")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("a snapshot was read before it was loaded")

    def __len__(self) -> int:
        raise RuntimeError("a snapshot was read before it was loaded")


NOT_LOADED: Mapping[str, SnapshotEntry] = _NotLoaded()


class Overlay(Mapping[str, V]):
    """What ``base`` (a key's committed picture, which moves on as pages land) becomes with the
    pages in flight applied: their changes over it, in the order the commit rule applies them
    (upserts, then removals)."""

    def __init__(self, base: Mapping[str, V]) -> None:
        self.base = base
        self._changes: dict[str, V | None] = {}  # None: removed
        self._by: dict[str, int] = {}  # name -> the serial of the last page that changed it

    def over(self, base: Mapping[str, V]) -> Overlay[V]:
        """These changes over another base (they are shared, not copied)."""
        other = Overlay(base)
        other._changes, other._by = self._changes, self._by
        return other

    def change(self, upserts: Mapping[str, V], removed: Iterable[str], serial: int) -> None:
        changes, by = self._changes, self._by
        changes.update(upserts)  # not a loop in Python: a backlog's page changes 500 names
        by.update(dict.fromkeys(upserts, serial))
        for name in removed:  # iterated once: it may be any iterable
            changes[name], by[name] = None, serial

    @property
    def pending(self) -> int:
        """How many names the pages still in flight change."""
        return len(self._changes)

    def landed(self, names: Iterable[str], serial: int) -> None:
        """Page ``serial``, which changed ``names``, is in the base now: its changes leave,
        save those a later page in flight made again."""
        changes, by = self._changes, self._by
        for name in names:
            if by.get(name) == serial:
                del changes[name], by[name]

    def __getitem__(self, name: str) -> V:
        if name in self._changes:
            value = self._changes[name]
            if value is None:
                raise KeyError(name)
            return value
        return self.base[name]

    # ``Mapping``'s own ``get`` and ``in`` go through ``__getitem__`` and catch its KeyError:
    # detection asks ``get`` once per item of a page, and a backlog's items are mostly new,
    # so each raised and caught an exception (about 1.5 µs an event).
    @overload
    def get(self, name: str, /) -> V | None: ...

    @overload
    def get(self, name: str, /, default: V | T) -> V | T: ...

    def get(self, name: str, /, default: object = None) -> object:
        changes = self._changes
        if name in changes:
            value = changes[name]
            return default if value is None else value
        return self.base.get(name, default)

    def __contains__(self, name: object) -> bool:
        changes = self._changes
        if name in changes:
            return changes[name] is not None
        return name in self.base

    def __iter__(self) -> Iterator[str]:
        changes = self._changes
        yield from (name for name in self.base if name not in changes)
        yield from (name for name, value in changes.items() if value is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)
