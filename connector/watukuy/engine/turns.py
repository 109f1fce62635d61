"""Turns to fetch: ``runner.max.concurrency`` polls fetch at once on an instance.

A poll takes a turn before it asks the vendor and gives it back once its lane's last page is
sent to the store, not once that page is committed: waiting for a commit costs no vendor
request and no CPU, and the pages waiting are bounded on their own
(``runner.max.pages.in.flight``). Holding the turn through the commit let 256 keys' first
polls wait out a transaction each while the rest of 10,000 waited for them (issue 42: every
key's first poll came 5.9 s after the start, 5.3 s with 1,024 turns).

A poll waiting for a budget's token sets its turn aside meanwhile (:meth:`Turn.set_aside`)
and takes one again once the token is its own: the wait costs no request and no CPU either,
and a tenant whose bucket is empty held a turn for each of its keys waiting, so that one with
more keys than the instance has turns kept every other tenant's polls waiting for its tokens
(an hour for a ``1/h`` quota).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, nullcontext

from watukuy.engine.fetching import GIVE_WAY
from watukuy.engine.keys import KeyLock

__all__ = ["Turn", "Turns", "waiting_for_token"]


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

    __slots__ = ("_aside", "_held", "_turns", "_waits")

    def __init__(self, turns: Turns) -> None:
        self._turns = turns
        self._held = False
        self._waits = 0  # the poll's requests waiting in set_aside() now
        self._aside = False  # given back by set_aside(), to be taken again after

    @property
    def held(self) -> bool:
        return self._held

    async def take(self) -> None:
        if not self._held:
            await self._turns.take_one()
            self._held = True

    def give_back(self) -> None:
        self._aside = False  # the poll is done with it: nothing to take again
        if self._held:
            self._held = False
            self._turns.give_one_back()

    @asynccontextmanager
    async def set_aside(self) -> AsyncIterator[None]:
        """Around a wait that needs no turn (a budget's token): the turn is given back as the
        first of the poll's waits begins and taken again as the last one ends, unless the
        poll gave it back itself meanwhile. A wait that raises takes nothing (a cancelled
        poll must not wait for a turn); the poll's next lane takes its turn as it always
        does."""
        self._waits += 1
        if self._held:
            self.give_back()
            self._aside = True  # after give_back(), which clears it
        try:
            yield
        finally:
            self._waits -= 1
        if self._waits == 0 and self._aside:
            self._aside = False
            await self.take()


@asynccontextmanager
async def waiting_for_token(lock: KeyLock, turn: Turn | None) -> AsyncIterator[None]:
    """Around a poll's wait for a budget's token, which needs nothing of the poll: its turn
    goes to another key meanwhile, and an operation waiting for the key (``lock``) ends the
    fetch, paced and due again, rather than wait for it (up to the fetch's timeout)."""
    give_way = GIVE_WAY.get(None)  # set by execute(), around every fetch
    with nullcontext() if give_way is None else lock.giving_way(give_way):
        if turn is None:
            yield
        else:
            async with turn.set_aside():
                yield
