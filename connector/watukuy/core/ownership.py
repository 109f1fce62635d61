"""Kafka partitions that no live runner holds: the liveness guard's rule (pure).

Holding Kafka partition p of ``<prefix>.state`` is owning every key that hashes to p, and only
its holder polls those keys. If the group's assignment and a runner's own idea of what it holds
ever drift apart (librdkafka once kept a partition assigned to a runner whose leases it had
revoked), p's tenants stop being polled and nothing else says so. Every runner reads the
others' heartbeats, which name what each holds (restoring or restored), so every runner can see
such a partition: :class:`UnownedWatch` keeps, per partition, since when no live runner claims
it, and calls it *unowned* once that lasts longer than ``grace`` (a session timeout: a rebalance
or a dead runner's departure moves a partition well within one).

What to do about one is :func:`remedy`'s, from the group coordinator's view
(:class:`GroupView`): the runner it is assigned to rejoins; and when it is assigned to no member
at all in a stable group (seen after runners crashed in a row: the group's leader kept
withholding them, rebalance after rebalance), the first member rejoins, so that a new rebalance
assigns them; and when that did not help, every member does, so that no member's stale
assignor state is left to decide.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["GroupView", "OwnershipRound", "Remedy", "UnownedWatch", "remedy"]


@dataclass(frozen=True, slots=True)
class OwnershipRound:
    """One look: the partitions unclaimed longer than the grace, and for how long the oldest
    of them has been (0.0 when there is none)."""

    unowned: frozenset[int]
    longest: float


class UnownedWatch:
    """``partitions``: how many Kafka partitions ``<prefix>.state`` has."""

    def __init__(self, partitions: int, grace: float) -> None:
        if partitions < 1:
            raise ValueError(f"partitions must be at least 1, got {partitions}")
        self._partitions = partitions
        self._grace = grace
        self._since: dict[int, float] = {}  # unclaimed partition -> first seen unclaimed

    def observe(self, claimed: Iterable[int], now: float) -> OwnershipRound:
        """Given every partition some live runner claims now, say which have been unclaimed
        for longer than the grace. A partition claimed again starts afresh."""
        held = set(claimed)
        since = self._since
        for kafka_partition in range(self._partitions):
            if kafka_partition in held:
                since.pop(kafka_partition, None)
            else:
                since.setdefault(kafka_partition, now)
        overdue = {p: now - t for p, t in since.items() if now - t > self._grace}
        return OwnershipRound(frozenset(overdue), max(overdue.values(), default=0.0))


@dataclass(frozen=True, slots=True)
class GroupView:
    """The coordinator's view of the group from one runner: the partitions it assigns this
    runner (``mine``) and any member (``given``), whether the group is stable (no rebalance
    under way), and whether this runner's member id sorts first among the members."""

    mine: frozenset[int]
    given: frozenset[int]
    stable: bool = True
    first: bool = False


@dataclass(frozen=True, slots=True)
class Remedy:
    """``stuck``: unowned partitions assigned here and not held (this runner is at fault);
    ``orphans``: unowned partitions assigned to no member of a stable group; ``rejoin``:
    whether this runner should join the group again for either."""

    stuck: tuple[int, ...] = ()
    orphans: tuple[int, ...] = ()

    @property
    def rejoin(self) -> bool:
        return bool(self.stuck or self.orphans)


def remedy(
    unowned: frozenset[int], held: Iterable[int], view: GroupView, *, everyone: bool = False
) -> Remedy:
    """What this runner does about ``unowned`` partitions, given what it ``held`` and the
    coordinator's ``view``. Only the first member acts on orphans, as one rebalance should be
    enough; with ``everyone`` (the first one's did not help), every member does."""
    stuck = tuple(sorted((unowned & view.mine) - set(held)))
    orphans: tuple[int, ...] = ()
    if view.stable and (view.first or everyone):
        orphans = tuple(sorted(unowned - view.given))
    return Remedy(stuck, orphans)
