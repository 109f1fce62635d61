"""Which keys are due: a heap with lazy invalidation.

Rescheduling a key pushes a new entry and remembers the key's current time; stale entries
are skipped when they surface. A pass over 10,000 idle keys therefore costs one heap peek,
not a scan.
"""

from __future__ import annotations

import heapq


class DueQueue:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, str]] = []
        self._at: dict[str, float] = {}
        self._pushes = 0

    def __len__(self) -> int:
        return len(self._at)

    def __contains__(self, key: object) -> bool:
        return key in self._at

    def schedule(self, key: str, at: float | None) -> None:
        """Due at ``at``; ``None`` takes the key off the queue (paused, probe in flight)."""
        if at is None:
            self._at.pop(key, None)
            return
        if self._at.get(key) == at:
            return
        self._at[key] = at
        self._pushes += 1
        heapq.heappush(self._heap, (at, self._pushes, key))
        if len(self._heap) > 4 * len(self._at) + 64:
            self._compact()

    def discard(self, key: str) -> None:
        self._at.pop(key, None)

    def at(self, key: str) -> float | None:
        return self._at.get(key)

    def next_at(self) -> float | None:
        """The earliest due time, or ``None`` when nothing is scheduled."""
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: float, limit: int | None = None) -> list[str]:
        """Keys due at ``now``, earliest first; they leave the queue until rescheduled."""
        out: list[str] = []
        while self._heap and (limit is None or len(out) < limit):
            self._drop_stale()
            if not self._heap or self._heap[0][0] > now:
                break
            _, _, key = heapq.heappop(self._heap)
            del self._at[key]
            out.append(key)
        return out

    def _drop_stale(self) -> None:
        while self._heap:
            at, _, key = self._heap[0]
            if self._at.get(key) == at:
                return
            heapq.heappop(self._heap)

    def _compact(self) -> None:
        live = {(at, key) for key, at in self._at.items()}
        self._heap = [entry for entry in self._heap if (entry[0], entry[2]) in live]
        heapq.heapify(self._heap)
