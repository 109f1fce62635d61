"""What the engine holds in memory for each active key."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from watukuy.core import lifecycle
from watukuy.core.lifecycle import KeyPhase
from watukuy.core.poller import Partition, Poller
from watukuy.core.state import ParkedItem, PartitionState, SnapshotEntry
from watukuy.store import apply as commit_rule
from watukuy.store.base import KeyCommit


class KeyLock:
    """An :class:`asyncio.Lock` that also says whether anyone waits for it: a key's backlog
    that could go on polling gives way to an operation waiting for the key, and so does a
    poll waiting for a budget's token (:meth:`giving_way`)."""

    __slots__ = ("_give_way", "_lock", "_waiting")

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._waiting = 0
        self._give_way: list[Callable[[], None]] = []  # the holder's waits that may end

    @contextmanager
    def giving_way(self, give_way: Callable[[], None]) -> Iterator[None]:
        """Around a wait of the holder's that may end early: ``give_way`` is called at once
        if someone waits for the lock, else as soon as someone does."""
        if self._waiting:
            give_way()
        self._give_way.append(give_way)
        try:
            yield
        finally:
            self._give_way.remove(give_way)

    async def __aenter__(self) -> None:
        self._waiting += 1
        for give_way in list(self._give_way):
            give_way()
        try:
            await self._lock.acquire()
        finally:
            self._waiting -= 1

    async def __aexit__(self, *exc: object) -> None:
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()

    @property
    def wanted(self) -> bool:
        """Someone waits for the lock."""
        return self._waiting > 0


@dataclass(eq=False, slots=True)
class KeyRuntime:
    """One active ``poller/partition``: its committed state and the live ``Partition``.

    Only committed values live here: a poll computes its next state aside and calls
    :meth:`applied` once the store has accepted it. ``lock`` serialises polls and operations
    on the key, so an operation never interleaves with a page. ``phase`` is where this
    instance stands with the key (:mod:`watukuy.core.lifecycle`); it moves only through
    :meth:`move`, which checks the transition table.
    """

    poller: Poller
    partition: Partition
    state: PartitionState
    snapshot: dict[str, SnapshotEntry] | None = None
    """``None``: not held in memory; :class:`~watukuy.engine.snapshots.Snapshots` loads it
    from the store when a page or an operation needs it, and lets it go past its budget."""
    parked: dict[str, ParkedItem] = field(default_factory=dict)
    lock: KeyLock = field(default_factory=KeyLock)
    phase: KeyPhase = KeyPhase.RESTORING
    polled: bool = False
    """Whether a poll of ``run()`` ended since the key was taken in (this hold): a start's or a
    takeover's first polls are the backlog the engine's watchers wait for."""
    key: str = field(init=False)
    """``poller/partition``, made once: a poll looks its key up several times."""
    woken_at: float | None = None
    """When the earliest webhook not yet served woke it (its wake command's ``issued_at``)."""

    def __post_init__(self) -> None:
        self.key = self.state.key

    @property
    def held(self) -> bool:
        """In memory, operable and allowed to commit (active or paused by the user)."""
        return self.phase in lifecycle.HELD

    def move(self, to: KeyPhase) -> None:
        """Go to ``to``; ``IllegalTransition`` if the lifecycle table has no such move."""
        self.phase = lifecycle.move(self.phase, to, self.key)

    def woke(self, at: float) -> None:
        """A webhook woke it at ``at``: timed until its next commit (the earliest counts)."""
        if self.woken_at is None or at < self.woken_at:
            self.woken_at = at

    def applied(self, commit: KeyCommit) -> None:
        """The store accepted ``commit``: take it in by the stores' own rule (a snapshot not
        held is the store's: loaded again, it has the commit)."""
        snapshot = {} if self.snapshot is None else self.snapshot
        self.state = commit_rule.apply(commit, snapshot, self.parked)

    @property
    def held_snapshot(self) -> dict[str, SnapshotEntry]:
        """The snapshot, which the caller made sure is held (``Snapshots.hold``)."""
        if self.snapshot is None:
            raise RuntimeError(f"{self.key}: its snapshot is used without being loaded")
        return self.snapshot
