"""Keys newly listed by one instance that another instance owns: who to tell, and when to
list again because of what another instance told.

Every instance of a group lists a poller's partitions on its own schedule
(``partitions_refresh``), and holds only the keys it owns. A tenant added at the source is
therefore held once its owner lists it, up to one interval later. When a user asks one
instance for the listing (``engine.partitions.list``, ``GET /connectors/{name}/partitions``),
that instance tells the owner of each key it has newly listed: it sends the key's owner a
``trigger`` command, and the owner, finding a command for a key its listing lacks, lists the
poller again at once (:func:`may_list_again`), holds the key and applies the command.

:class:`Arrivals` remembers, per poller, the keys the listing gained and whether their owner
was told, so a listing asked for again and again tells each new key once. A key is worth
telling while its owner may not have listed it yet: for one ``partitions_refresh`` after it
was first listed here (every instance lists at least that often), after which it is forgotten.

Only a listing asked for tells. Telling at every scheduled listing would send each new key
to its owner once from every other instance, each one more poll of it (a ``trigger``),
where the owner's own schedule brings it within the interval anyway.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

__all__ = ["LISTING_SPACING", "Arrival", "Arrivals", "may_list_again"]

LISTING_SPACING = 5.0
"""Seconds between two listings of a poller made because another instance named a key the
listing lacks: a burst of new keys (one command each) costs one listing."""


def may_list_again(listed_at: float | None, now: float, spacing: float = LISTING_SPACING) -> bool:
    """Whether a poller last listed at ``listed_at`` may be listed again now for a key another
    instance named (``None``: never listed)."""
    return listed_at is None or now - listed_at >= spacing


@dataclass(frozen=True, slots=True)
class Arrival:
    listed_at: float
    """When this instance's listing first had the key."""
    told: bool = False
    """Whether its owner was sent a command for it."""


@dataclass(frozen=True, slots=True)
class Arrivals:
    """The keys one poller's listing gained here lately (each value is a new one)."""

    keys: Mapping[str, Arrival] = field(default_factory=dict)

    def listed(
        self, added: Iterable[str], removed: Iterable[str], now: float, within: float
    ) -> Arrivals:
        """After a listing that gained ``added`` and lost ``removed``. A key that leaves and
        comes back is new again (its owner paused it when it left). Keys listed ``within``
        seconds ago or more are forgotten (see :meth:`tell`)."""
        keys = {k: a for k, a in self.keys.items() if now - a.listed_at < within}
        for key in removed:
            keys.pop(key, None)
        for key in added:
            keys[key] = Arrival(now)
        return Arrivals(keys)

    def tell(
        self, owned: Callable[[str], bool], now: float, within: float
    ) -> tuple[list[str], Arrivals]:
        """The keys whose owner to tell now, and what to remember after telling them.

        A key is told once, if another instance owns it now and it was first listed here
        less than ``within`` seconds ago (the poller's ``partitions_refresh``); older ones
        are forgotten, as their owner has listed them since.
        """
        kept: dict[str, Arrival] = {}
        tell: list[str] = []
        for key, arrival in self.keys.items():
            if now - arrival.listed_at >= within:
                continue
            if not arrival.told and not owned(key):
                tell.append(key)
                arrival = Arrival(arrival.listed_at, told=True)
            kept[key] = arrival
        return sorted(tell), Arrivals(kept)

    def untold(self, keys: Iterable[str]) -> Arrivals:
        """``keys`` could not be sent: tell them at the next chance."""
        again = {key: Arrival(self.keys[key].listed_at) for key in keys if key in self.keys}
        return Arrivals({**self.keys, **again})
