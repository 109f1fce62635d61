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

    def schedule(self, key: str, at: float | None) -> None:
        """Due at ``at`` (not before a hold), or off the queue with ``None``."""
        held = self._held_until.pop(key, None)
        if held is not None and at is not None:
            at = max(at, held)
        self._queue.schedule(key, at)

    def hold(self, key: str, until: float) -> None:
        """Keep ``key`` from polling before ``until``, from its next scheduling on."""
        self._held_until[key] = until

    def discard(self, key: str) -> None:
        """Forget ``key``: it left this instance."""
        self._queue.discard(key)
        self._held_until.pop(key, None)

    def pop_due(self, now: float) -> list[str]:
        """The keys due by ``now``, earliest first; they leave the queue until rescheduled."""
        return self._queue.pop_due(now)

    def next_at(self) -> float | None:
        return self._queue.next_at()

    def at(self, key: str) -> float | None:
        return self._queue.at(key)
