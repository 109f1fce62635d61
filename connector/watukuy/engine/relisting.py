"""The listings of the pollers' partitions that are due (:meth:`Roster.listings_due`).

A poller's tenant listing is I/O like a poll (a vendor's API, a database). ``run()`` and
``tick()`` await the listings due in their loop, between the moves of ownership they follow.
Stop 52 ran each listing after the first in a task of its own, so that a slow listing kept no
key's polls waiting; when a failover test failed in CI, listings overlapping takeovers were
blamed and put back here (stop 53). The failure had another cause (what was said served, see
:meth:`~watukuy.engine.due_times.KeyTimes.writing`), so listings apart may come back.
"""

from __future__ import annotations

import asyncio

from watukuy.core.poller import Poller
from watukuy.engine.roster import Roster

__all__ = ["list_due"]


async def list_due(roster: Roster, stopping: asyncio.Event | None = None) -> None:
    """List every poller due, one after the other; a poller removed or redefined meanwhile is
    skipped (a new definition lists itself). ``stopping`` set first cuts the listings short:
    a vendor's tenant API that hung held a SIGTERM up to its timeout
    (``partitions.http.timeout``, 30 s). What was not listed is listed by the next start."""
    due = roster.listings_due()
    if not due:
        return  # most passes: no task made for them
    if stopping is None:
        await _list(roster, due)
        return
    listing = asyncio.ensure_future(_list(roster, due))
    stopped = asyncio.ensure_future(stopping.wait())
    try:
        await asyncio.wait({listing, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:  # neither outlives this call, whatever ends it
        listing.cancel()
        stopped.cancel()
        await asyncio.wait({listing, stopped})
    if not listing.cancelled():
        listing.result()  # its error, as when it was awaited here


async def _list(roster: Roster, due: list[tuple[str, Poller]]) -> None:
    for name, poller in due:
        if roster.definitions().get(name) is poller:
            await roster.refresh(name, force=False)
