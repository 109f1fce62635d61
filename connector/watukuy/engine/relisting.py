"""The listings of the pollers' partitions that are due (:meth:`Roster.listings_due`).

A poller's tenant listing is I/O like a poll (a vendor's API, a database). ``run()`` and
``tick()`` await the listings due in their loop, between the moves of ownership they follow.
Stop 52 ran each listing after the first in a task of its own, so that a slow listing kept no
key's polls waiting; a listing under way then overlapped a takeover, and a failover's
survivor did not hold the child keys it had just restored (CI, stop 53). Until listings and
moves of ownership are made safe to overlap, they do not.
"""

from __future__ import annotations

from watukuy.engine.roster import Roster

__all__ = ["list_due"]


async def list_due(roster: Roster) -> None:
    """List every poller due, one after the other; a poller removed or redefined meanwhile is
    skipped (a new definition lists itself)."""
    for name, poller in roster.listings_due():
        if roster.definitions().get(name) is poller:
            await roster.refresh(name, force=False)
