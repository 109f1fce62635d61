"""``run()``'s listings of its pollers' partitions after the first, each in a task of its own.

A poller's tenant listing is I/O like a poll (a vendor's API, a database): awaited in
``run()``'s loop, one that took seconds, or its timeout, kept every key's polls from starting
meanwhile. The first listing at a start is still awaited: the keys to poll come from it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from watukuy.core.poller import Poller
from watukuy.engine.roster import Roster

__all__ = ["Relisting"]


class Relisting:
    """The listings under way in ``group``, one at most per poller."""

    def __init__(
        self, roster: Roster, group: asyncio.TaskGroup, listed: Callable[[], None]
    ) -> None:
        """``listed``: told as each listing ends (the keys it brought are due now)."""
        self._roster = roster
        self._group = group
        self._listed = listed
        self._under_way: dict[str, asyncio.Task[None]] = {}

    def start_due(self) -> None:
        """List the pollers due again, those not being listed already."""
        for name, poller in self._roster.listings_due():
            if name not in self._under_way:
                self._under_way[name] = self._group.create_task(self._list(name, poller))

    def cancel(self) -> None:
        """A stopping ``run()`` does not wait for them: the next start lists again."""
        for task in self._under_way.values():
            task.cancel()

    async def _list(self, name: str, poller: Poller) -> None:
        try:
            await self._roster.refresh_listed(name, poller)
        finally:
            del self._under_way[name]
            self._listed()
