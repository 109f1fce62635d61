"""The commit rule, once: what accepting a :class:`KeyCommit` does to a key's picture.

Every holder of a key's committed picture (the memory store, the Kafka store's cache, the
engine's :class:`~watukuy.engine.keys.KeyRuntime`) applies a commit through :func:`apply`,
and every store checks a batch with :func:`check_epochs` before anything of it is written.
Pure: no I/O, nothing but the dictionaries it is handed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from watukuy.core.errors import Fenced
from watukuy.core.state import ParkedItem, PartitionState, SnapshotEntry
from watukuy.store.base import KeyCommit, PageRun

__all__ = ["PageRuns", "apply", "check_epoch", "check_epochs"]


def check_epoch(entry: KeyCommit, stored: PartitionState | None) -> None:
    """``Fenced`` if ``entry`` is fenced and the store holds the key under another epoch.

    A key never stored has no epoch to hold against (its first commit); an unfenced entry
    (pausing a key removed from the listing) is not checked.
    """
    if entry.fenced and stored is not None and stored.epoch != entry.state.epoch:
        raise Fenced(f"{entry.key}: epoch {entry.state.epoch} is stale (store has {stored.epoch})")


def check_epochs(
    batch: Sequence[KeyCommit], stored: Callable[[str], PartitionState | None]
) -> None:
    """:func:`check_epoch` over a whole batch, before any of it is applied: all or nothing."""
    for entry in batch:
        check_epoch(entry, stored(entry.key))


def apply(
    entry: KeyCommit,
    snapshot: dict[str, SnapshotEntry],
    parked: dict[str, ParkedItem],
) -> PartitionState:
    """Apply ``entry``'s snapshot and parked changes in place; return the key's new state.

    Upserts before forgets and parks before unparks, as the records are written, so an
    identity both upserted and forgotten in one commit ends up forgotten.
    """
    snapshot.update(entry.upserts)
    for identity in entry.forget:
        snapshot.pop(identity, None)
    for item in entry.parked:
        parked[item.id] = item
    for parked_id in entry.unpark:
        parked.pop(parked_id, None)
    return entry.state


class PageRuns:
    """Which pages in flight a store may still commit: none that builds on a refused one.

    Each key's broken run is remembered by the serial of its first refused page; a page of
    that run at or after it is refused too. A new run (a page with no ``after``) starts clean:
    the engine starts one only once every page of the last run was answered.
    """

    def __init__(self) -> None:
        self._broken: dict[str, int] = {}

    def admits(self, key: str, run: PageRun | None) -> bool:
        if run is None:
            return True
        if run.after is None:
            self._broken.pop(key, None)
            return True
        broken = self._broken.get(key)
        return broken is None or run.after < broken

    def refused(self, key: str, run: PageRun | None) -> None:
        """The page ``run`` of ``key`` was refused or its transaction failed."""
        if run is not None:
            self._broken[key] = min(run.serial, self._broken.get(key, run.serial))
