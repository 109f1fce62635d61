"""The listings of the pollers' partitions that are due (:meth:`Roster.listings_due`).

A poller's tenant listing is I/O like a poll (a vendor's API, a database). ``run()`` awaits
the listings due as it starts (the keys to poll come from them) and starts every later one
in a task of its own: awaited in its loop, a listing that took seconds, or its timeout, kept
every key's polls from starting meanwhile. ``tick()`` awaits them all.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from watukuy.core.poller import Poller
from watukuy.engine.roster import Roster

__all__ = ["Relisting"]


class Relisting:
    """The listings due, awaited or under way in tasks (one at most per poller)."""

    def __init__(self, roster: Roster, listed: Callable[[], None] = lambda: None) -> None:
        """``listed``: told as each listing in a task ends (the keys it brought are due)."""
        self._roster = roster
        self._listed = listed
        self._under_way: dict[str, asyncio.Task[None]] = {}

    async def list_due(self) -> None:
        """List every poller due, one after the other."""
        for name, poller in self._roster.listings_due():
            await self._list(name, poller)

    def start_due(self, group: asyncio.TaskGroup) -> None:
        """List the pollers due in tasks of ``group``, those not being listed already."""
        for name, poller in self._roster.listings_due():
            if name not in self._under_way:
                self._under_way[name] = group.create_task(self._list_apart(name, poller))

    def cancel(self) -> None:
        """A stopping ``run()`` does not wait for them: the next start lists again."""
        for task in self._under_way.values():
            task.cancel()

    async def _list(self, name: str, poller: Poller) -> None:
        # Unless removed or redefined meanwhile: a new definition lists itself.
        if self._roster.definitions().get(name) is poller:
            await self._roster.refresh(name, force=False)

    async def _list_apart(self, name: str, poller: Poller) -> None:
        try:
            await self._list(name, poller)
        finally:
            del self._under_way[name]
            self._listed()
