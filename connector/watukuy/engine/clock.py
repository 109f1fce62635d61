"""The engine's only source of time. Tests pass a :class:`FakeClock`."""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch (wall time: it is persisted and compared across restarts)."""

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class FakeClock:
    """Time that moves only when told to, or when someone sleeps on it.

    ``sleep`` jumps the clock forward instead of waiting, so retries and backoffs run
    instantly yet in the order their deadlines say.
    """

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds

    async def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._now += seconds
        await asyncio.sleep(0)
