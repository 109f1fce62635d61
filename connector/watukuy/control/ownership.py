"""The liveness guard: every Kafka partition of ``<prefix>.state`` has a runner polling its keys.

Each runner looks, every third of a session timeout, at what the live runners' heartbeats say
they hold (restored or restoring; for itself, at what it holds now). A partition that no one
has held for longer than a session timeout (:class:`~watukuy.core.ownership.UnownedWatch`) is:

- counted in ``watukuy_unowned_partitions`` (every runner counts the same ones; an alert rule
  reads it) and logged as an ERROR;
- checked against the group coordinator's assignment: if the coordinator assigns it to *this*
  runner, this runner is the one that should hold it and does not. Its ``/health`` turns
  unhealthy, naming the partitions, and it joins the group again with a new consumer, at most
  once per session timeout; once it holds them, ``/health`` is healthy again;
- or, if the coordinator assigns it to no member of a stable group, the first member joins
  again (the same way), so that a rebalance assigns it; if it is still unowned
  :data:`ESCALATE` session timeouts after it was last held, every member joins again
  (:func:`~watukuy.core.ownership.remedy`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from typing import Protocol

from watukuy.core.observe import Observer
from watukuy.core.ownership import GroupView, OwnershipRound, UnownedWatch, remedy

__all__ = ["ESCALATE", "OwnershipGuard"]

ESCALATE = 4
"""Session timeouts a partition stays unowned before every member rejoins, not only the first:
the first's rejoin comes after one, and its rebalance within another."""

log = logging.getLogger("watukuy.control")


class Member(Protocol):
    """This runner in the group (the store's :class:`~watukuy.store.kafka.member.GroupMember`)."""

    def view(self) -> GroupView | None: ...

    def rejoin(self, rebalance: bool = False) -> None: ...


class OwnershipGuard:
    """``claimed``: the partitions the *other* live runners' heartbeats say they hold;
    ``held``: what this runner holds now (restored or restoring)."""

    def __init__(
        self,
        *,
        partitions: int,
        session_timeout: float,
        claimed: Callable[[], Iterable[int]],
        held: Callable[[], Iterable[int]],
        member: Member,
        observer: Observer,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._watch = UnownedWatch(partitions, grace=session_timeout)
        self._session_timeout = session_timeout
        self.every = session_timeout / 3
        self._claimed = claimed
        self._held = held
        self._member = member
        self._observer = observer
        self._clock = clock
        self._rejoined_at: float | None = None
        self._said: frozenset[int] = frozenset()
        self.adrift: str | None = None
        """Why this runner is unhealthy: partitions the group assigns it that it does not
        hold (``None``: it holds what it is given)."""

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.every)
            await self.check()

    async def check(self) -> OwnershipRound:
        """One look (see the module's text)."""
        held = set(self._held())
        seen = self._watch.observe({*self._claimed(), *held}, self._clock())
        self._observer.partitions_unowned(tuple(sorted(seen.unowned)))
        if seen.unowned != self._said:
            self._said = seen.unowned
            if seen.unowned:
                log.error(
                    "Kafka partition(s) %s of the state topic have been held by no live runner"
                    " for %.0fs: no one polls their keys",
                    sorted(seen.unowned),
                    seen.longest,
                )
        view = None
        if seen.unowned:
            view = await asyncio.to_thread(self._member.view)
            if view is None:  # the cluster did not answer: judge again next time
                return seen
        everyone = seen.longest > ESCALATE * self._session_timeout
        found = remedy(
            seen.unowned, held, view or GroupView(frozenset(), frozenset()), everyone=everyone
        )
        self.adrift = (
            None
            if not found.stuck
            else f"the group assigns Kafka partition(s) {list(found.stuck)} to this runner, which"
            f" has not held them for {seen.longest:.0f}s: rejoining the group"
        )
        if found.stuck:
            self._rejoin(self.adrift or "", rebalance=False)
        elif found.orphans:
            self._rejoin(
                f"the group assigns Kafka partition(s) {list(found.orphans)} to no member:"
                " rejoining the group as a dynamic member, so that a rebalance assigns them,",
                rebalance=True,
            )
        return seen

    def _rejoin(self, why: str, *, rebalance: bool) -> None:
        now = self._clock()
        if self._rejoined_at is not None and now - self._rejoined_at < self._session_timeout:
            return  # the last one is still taking effect
        self._rejoined_at = now
        log.error("%s with a new consumer", why)
        self._member.rejoin(rebalance)
