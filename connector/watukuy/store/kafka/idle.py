"""Idle polls left unwritten, and what the Kafka store says of them with its transactions.

Writing the state of each idle poll (10,000 keys polled every 30 s and answered 304: 330 a
second) cost a runner 9% of a core in records, transactions and the local state store. A
commit that moves only its key's due time by whole intervals is taken into the view and not
written (:meth:`OwnedKeys.idle`); instead, each transaction's offsets say the time before
which the engine made every poll due (:mod:`.served`), and the next owner of a partition
moves its keys' stored due times on from it (:meth:`OwnedKeys.take_in`).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence

from watukuy.store.apply import PageRuns
from watukuy.store.base import KeyCommit
from watukuy.store.kafka.view import OwnedKeys

__all__ = ["IdlePolls"]

Say = Callable[[float, dict[int, int]], None]
"""Hands what was served, and the partitions it speaks for, to the Kafka thread."""


class IdlePolls:
    def __init__(self, view: OwnedKeys, runs: PageRuns, say: Say) -> None:
        self._view = view
        self._runs = runs
        self._say = say
        self._served: float | None = None  # what the engine last said was served, or less

    def held_back(self, batch: Sequence[KeyCommit]) -> bool:
        """Take ``batch`` in without writing it when every entry is an idle poll's: its
        key's due time moved on whole intervals, nothing else. ``Fenced`` as a write would
        be."""
        view = self._view
        if not batch or not all(view.idle(entry) for entry in batch):
            return False
        for entry in batch:
            view.hold_back(entry)
        for entry in batch:
            self._runs.admits(entry.key, entry.run)  # a run begun: nothing before it broke
        return True

    def served_until(self, until: float, pollers: Container[str]) -> None:
        """The engine made every poll due before ``until`` of the keys it holds; said for
        the partitions whose every key this instance reads, and no later than the due time
        of a restored key of ``pollers`` the engine does not hold yet."""
        unloaded = self._view.unloaded_due(pollers)
        if unloaded is not None:
            until = min(until, unloaded)
        self._served = until
        self._say(until, self._view.speaks_for())

    def written(self, batch: Sequence[KeyCommit]) -> None:
        """``batch`` is about to be written: a key in it due before what was last said served
        (a trigger since) lowers it to its due time from this write's transaction on, or a
        restore after it would move the key past the poll it asks for."""
        until = self._served
        if until is None or not batch:
            return
        due = min(entry.state.schedule.next_due for entry in batch)
        if due < until:
            self._served = due
            self._say(due, self._view.speaks_for())
