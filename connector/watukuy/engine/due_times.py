"""When each held key is next due, and how long a key is held back.

A key whose commit the store refused for now is held back until a given time: its next due
time, whatever the schedule says, is not earlier. The hold is spent by that next scheduling.
"""

from __future__ import annotations

from watukuy.core.due import DueQueue


class KeyTimes:
    def __init__(self) -> None:
        self._queue = DueQueue()
        self._held_until: dict[str, float] = {}
        self._unheld: dict[str, float] = {}  # key -> when it was due, where a hold moved it

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

    def earliest(self) -> float | None:
        """The earliest time a key on the queue was due, holds aside (``None``: none is)."""
        queued = self._queue.next_at()
        held = min(self._unheld.values(), default=None)
        if queued is None or held is None:
            return held if queued is None else queued
        return min(queued, held)

    def pop_due(self, now: float) -> list[str]:
        """The keys due by ``now``, earliest first; they leave the queue until rescheduled."""
        return self._queue.pop_due(now)

    def next_at(self) -> float | None:
        return self._queue.next_at()

    def at(self, key: str) -> float | None:
        return self._queue.at(key)
