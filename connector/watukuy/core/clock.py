"""The one source of time, injected wherever time is read or waited for.

One protocol serves the event loop and the Kafka thread alike:

- ``now()``: wall time, seconds since the epoch. It is persisted (due times, parked items) and
  compared across restarts and instances, so it must be wall time.
- ``monotonic()``: for how long something took or when to give up, within one process.
- ``sleep(seconds)``: blocks the calling thread (the Kafka thread's waits).
- ``await wait(seconds)``: waits on the event loop (the engine's waits: budgets, retries).

:class:`SystemClock` is the real one. :class:`FakeClock` (public: an embedding application's
tests use it too) moves only when told to or when something waits on it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

__all__ = ["SYSTEM_CLOCK", "Clock", "FakeClock", "SystemClock"]


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch (wall time: it is persisted and compared across restarts)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back, for durations within this process."""
        ...

    def sleep(self, seconds: float) -> None:
        """Block the calling thread for ``seconds``."""
        ...

    async def wait(self, seconds: float) -> None:
        """Wait ``seconds`` on the event loop."""
        ...


class SystemClock:
    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))

    async def wait(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


SYSTEM_CLOCK = SystemClock()


class FakeClock:
    """Time that moves only when told to, or when someone waits on it.

    ``wait`` and ``sleep`` jump the clock forward instead of waiting, so retries and backoffs
    run instantly yet in the order their deadlines say. Its monotonic time is its wall time.
    """

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def monotonic(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._now += seconds

    async def wait(self, seconds: float) -> None:
        self.sleep(seconds)
        await asyncio.sleep(0)
