"""The listings of the pollers' partitions that are due (:meth:`Roster.listings_due`).

A poller's tenant listing is I/O like a poll (a vendor's API, a database). ``run()`` and
``tick()`` await the listings due in their loop, between the moves of ownership they follow.
Stop 52 ran each listing after the first in a task of its own, so that a slow listing kept no
key's polls waiting; a listing under way then overlapped a takeover, and a failover's
survivor did not hold the child keys it had just restored (CI, stop 53). Until listings and
moves of ownership are made safe to overlap, they do not.
"""

from __future__ import annotations

from watukuy.core.poller import Poller
from watukuy.engine.roster import Roster

__all__ = ["Relisting"]


class Relisting:
    """The listings due, awaited one after the other."""

    def __init__(self, roster: Roster) -> None:
        self._roster = roster

    async def list_due(self) -> None:
        """List every poller due, one after the other."""
        for name, poller in self._roster.listings_due():
            await self._list(name, poller)

    async def _list(self, name: str, poller: Poller) -> None:
        # Unless removed or redefined meanwhile: a new definition lists itself.
        if self._roster.definitions().get(name) is poller:
            await self._roster.refresh(name, force=False)
