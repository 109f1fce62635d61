"""When each held key is next due, and how long a key is held back.

A key whose commit the store refused for now is held back until a given time: its next due
time, whatever the schedule says, is not earlier. The hold is spent by that next scheduling.

What the engine says it served (:meth:`KeyTimes.served_until`) speaks for every key of the
Kafka partitions it owns, and whoever restores them next moves their stored due times on from
it; so it never passes the due time of a key on the queue, taken off it for a poll, or being
written by an operation or a command (:meth:`KeyTimes.writing`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from watukuy.core.due import DueQueue
from watukuy.core.schedule import ON_GRID


class KeyTimes:
    def __init__(self) -> None:
        self._queue = DueQueue()
        self._held_until: dict[str, float] = {}
        self._unheld: dict[str, float] = {}  # key -> when it was due, where a hold moved it
        self._writing: Counter[float] = Counter()  # due times of writes under way (how many)

    def schedule(self, key: str, at: float | None) -> None:
        """Due at ``at`` (not before a hold), or off the queue with ``None``."""
        held = self._held_until.pop(key, None)
        if held is not None and at is not None and held > at:
            self._unheld[key] = at
            at = held
        else:
            self._unheld.pop(key, None)
        self._queue.schedule(key, at)

    def hold(self, key: str, until: float) -> None:
        """Keep ``key`` from polling before ``until``, from its next scheduling on."""
        self._held_until[key] = until

    def discard(self, key: str) -> None:
        """Forget ``key``: it left this instance."""
        self._queue.discard(key)
        self._held_until.pop(key, None)
        self._unheld.pop(key, None)

    @contextmanager
    def writing(self, due: float) -> Iterator[None]:
        """A key is written due at ``due`` outside its poll (an operation, a command: a
        trigger, a child created by its parent) and is not on the queue at that time until
        the write is taken in. Meanwhile what is said served stays at or before ``due``: said
        while the write waited behind another transaction, it went out with the write's own
        offsets, and the key's next owner moved the poll the write asked for an interval
        on (a failover's child, created due at once, waited ten minutes)."""
        self._writing[due] += 1
        try:
            yield
        finally:
            self._writing[due] -= 1
            if not self._writing[due]:
                del self._writing[due]

    def served_until(self, polling: Iterable[float], now: float) -> float:
        """The time before which every poll due was made, ``polling`` being the due times of
        the keys taken off the queue for a poll that has not ended: the earliest of them, of
        the times on the queue (a key's time there is never before its state's due time,
        but where a hold moved it: then the time before the hold counts) and of the writes
        under way (:meth:`writing`); at most just past ``now`` (past the grid's tolerance,
        so that a poll made at ``now`` counts as made), so that a key written later (a
        trigger, by any writer) is not due before it."""
        until = now + 2 * ON_GRID
        queued = self._queue.next_at()
        if queued is not None and queued < until:
            until = queued
        for due in (*polling, *self._unheld.values(), *self._writing):
            if due < until:
                until = due
        return until

    def pop_due(self, now: float) -> list[str]:
        """The keys due by ``now``, earliest first; they leave the queue until rescheduled."""
        return self._queue.pop_due(now)

    def next_at(self) -> float | None:
        return self._queue.next_at()

    def at(self, key: str) -> float | None:
        return self._queue.at(key)
