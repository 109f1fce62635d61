"""Turns to fetch: ``runner.max.concurrency`` polls fetch at once on an instance.

A poll takes a turn before it asks the vendor and gives it back once its lane's last page is
sent to the store, not once that page is committed: waiting for a commit costs no vendor
request and no CPU, and the pages waiting are bounded on their own
(``runner.max.pages.in.flight``). Holding the turn through the commit let 256 keys' first
polls wait out a transaction each while the rest of 10,000 waited for them (issue 42: every
key's first poll came 5.9 s after the start, 5.3 s with 1,024 turns).
"""

from __future__ import annotations

import asyncio

__all__ = ["Turn", "Turns"]


class Turns:
    """The instance's turns."""

    def __init__(self, size: int) -> None:
        self._free = asyncio.Semaphore(size)

    def turn(self) -> Turn:
        return Turn(self)

    async def take_one(self) -> None:
        await self._free.acquire()

    def give_one_back(self) -> None:
        self._free.release()


class Turn:
    """One poll's turn: taken before each lane fetches, given back as its last page is sent
    (and, whatever happens, when the poll ends)."""

    __slots__ = ("_held", "_turns")

    def __init__(self, turns: Turns) -> None:
        self._turns = turns
        self._held = False

    @property
    def held(self) -> bool:
        return self._held

    async def take(self) -> None:
        if not self._held:
            await self._turns.take_one()
            self._held = True

    def give_back(self) -> None:
        if self._held:
            self._held = False
            self._turns.give_one_back()
