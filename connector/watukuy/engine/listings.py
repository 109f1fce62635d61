"""The partitions each poller listed last, and what the listing gained since.

Every poller has one table; a poller added at run time gets an empty one (never listed yet),
and a removed poller's table goes with it.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import partial

from watukuy.core.arrivals import Arrivals
from watukuy.core.commands import Command
from watukuy.core.partitions import SINGLE, normalise
from watukuy.core.poller import Partition, Poller
from watukuy.store.base import Store

log = logging.getLogger("watukuy.partitions")


async def own_listing(poller: Poller) -> dict[str, Partition]:
    """What ``poller``'s ``partitions`` callable lists now (one partition, key ``''``,
    without one)."""
    if poller.partitions is None:
        return {SINGLE.key: SINGLE}
    returned = poller.partitions()
    if inspect.isawaitable(returned):
        returned = await returned
    return normalise(poller.name, returned)


@dataclass(slots=True)
class PartitionTable:
    """The partitions of one poller as last evaluated."""

    current: dict[str, Partition] = field(default_factory=dict)
    refreshed_at: float | None = None
    listed: bool = False
    """Whether a listing succeeded yet: the keys of the first one are not news to anybody."""
    arrivals: Arrivals = field(default_factory=Arrivals)
    """Keys the listing gained since, for telling their owners (:mod:`watukuy.core.arrivals`)."""
    asked_again: int = 0
    """How many times :meth:`list_again` was called: a listing that began before the last
    call read too early."""

    def list_again(self) -> None:
        """Due to be listed at once (its stored keys may have moved, its parent's tenants
        changed), even if a listing is under way now: that one may have read before."""
        self.refreshed_at = None
        self.asked_again += 1

    def listing_ended(self, now: float, began: int) -> None:
        """A listing begun when :attr:`asked_again` was ``began`` ended at ``now``: the table
        is listed as of then, unless it was asked to list again meanwhile (a takeover while a
        child stream's listing waited for the store: its restored keys would wait a whole
        refresh interval to be held)."""
        self.refreshed_at = now if self.asked_again == began else None


class Listings:
    def __init__(self, names: Iterable[str]) -> None:
        self._tables = {name: PartitionTable() for name in names}

    def table(self, name: str) -> PartitionTable | None:
        return self._tables.get(name)

    def of(self, name: str) -> PartitionTable:
        """The table of a poller known to exist (``KeyError`` otherwise)."""
        return self._tables[name]

    def names(self) -> list[str]:
        return list(self._tables)

    def start(self, name: str) -> PartitionTable:
        """A fresh table for ``name`` (added, or redefined: it lists itself again)."""
        table = self._tables[name] = PartitionTable()
        return table

    def forget(self, name: str) -> None:
        self._tables.pop(name, None)

    def is_listed(self, name: str, key: str) -> bool:
        table = self._tables.get(name)
        return table is not None and key in table.current

    def listed(self, name: str) -> list[str]:
        """The partition keys of ``name`` as last listed, in key order (``[]`` if none yet)."""
        table = self._tables.get(name)
        return [] if table is None else sorted(table.current)

    def partition(self, name: str, key: str) -> Partition | None:
        """The partition ``key`` of ``name`` as last listed."""
        table = self._tables.get(name)
        return None if table is None else table.current.get(key)

    def current(self) -> dict[str, dict[str, Partition]]:
        """Each poller's partitions as last listed, by key."""
        return {name: table.current for name, table in self._tables.items()}

    def refreshed(self) -> dict[str, float | None]:
        """When each poller was last listed (``None``: never)."""
        return {name: table.refreshed_at for name, table in self._tables.items()}

    def unlist(self, name: str, key: str) -> None:
        """Take ``key`` out of the last listing (removed: it comes back only if listed again)."""
        table = self._tables.get(name)
        if table is not None:
            table.current.pop(key, None)


async def tell_owners(table: PartitionTable, poller: Poller, store: Store, now: float) -> None:
    """Send the owner of each key this listing (or one shortly before) gained a
    ``trigger``: the owner lists the poller again on receiving it, holds the key, and
    polls it at once, rather than at its own next refresh. A new key polls at once
    anyway, so the trigger changes nothing else; and every release knows it."""
    owned = partial(store.owns, poller.name)
    keys, table.arrivals = table.arrivals.tell(owned, now, poller.partitions_refresh)
    if not keys:
        return
    commands = [Command.issue("trigger", poller.name, key, {}, now) for key in keys]
    sent = await asyncio.gather(*(store.send_command(c) for c in commands), return_exceptions=True)
    failed = {key for key, outcome in zip(keys, sent, strict=True) if outcome is not None}
    if failed:
        table.arrivals = table.arrivals.untold(failed)
        error = next(o for o in sent if o is not None)
        log.warning(
            "poller '%s': could not tell the owners of %d new partition(s) (they hold them "
            "at their next refresh; listing again retries): %s",
            poller.name,
            len(failed),
            error,
        )
    told = [key for key in keys if key not in failed]
    if told:
        log.info(
            "poller '%s': told the owners of %d new partition(s)%s",
            poller.name,
            len(told),
            sample(told),
        )


def sample(keys: Iterable[str], limit: int = 20) -> str:
    """``": a, b, c"`` for a log line, at most ``limit`` of ``keys`` and how many more."""
    names = sorted(keys)
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return f": {', '.join(names[:limit])}{more}" if names else ""
