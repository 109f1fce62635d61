"""Leases: holding Kafka partition p of ``<prefix>.state`` is owning every key that hashes to p.

A lease is a frozen value with the generation it was granted in; every move between states is
checked against a transition table, so an unexpected callback order is a loud error rather than
a silently shared key. A revoked lease is never revived: a new assignment is a new lease with a
new generation, and anything stamped with the old one is dropped.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from watukuy.core.errors import IllegalTransition


class LeaseState(enum.Enum):
    RESTORING = "restoring"  # assigned; reading state/items/parked up to the fixed end offsets
    OWNED = "owned"  # restored: its keys are scheduled and may commit
    REVOKED = "revoked"  # given back or lost: nothing of this generation may commit


_LEGAL: dict[LeaseState, frozenset[LeaseState]] = {
    LeaseState.RESTORING: frozenset({LeaseState.OWNED, LeaseState.REVOKED}),
    LeaseState.OWNED: frozenset({LeaseState.REVOKED}),
    LeaseState.REVOKED: frozenset(),
}


@dataclass(frozen=True, slots=True)
class Lease:
    kafka_partition: int
    generation: int
    state: LeaseState = LeaseState.RESTORING

    def to(self, target: LeaseState) -> Lease:
        if target not in _LEGAL[self.state]:
            raise IllegalTransition(
                f"lease on Kafka partition {self.kafka_partition} (generation {self.generation}): "
                f"{self.state.value} -> {target.value} is not allowed"
            )
        return replace(self, state=target)

    @property
    def owned(self) -> bool:
        return self.state is LeaseState.OWNED


class Leases:
    """The leases this instance holds, with a generation counter that only grows."""

    def __init__(self) -> None:
        self._by_kafka_partition: dict[int, Lease] = {}
        self._generation = 0

    def grant(self, kafka_partition: int) -> Lease:
        self._generation += 1
        lease = Lease(kafka_partition, self._generation)
        self._by_kafka_partition[kafka_partition] = lease
        return lease

    def move(self, kafka_partition: int, target: LeaseState) -> Lease | None:
        lease = self._by_kafka_partition.get(kafka_partition)
        if lease is None:
            return None
        moved = lease.to(target)
        if target is LeaseState.REVOKED:
            del self._by_kafka_partition[kafka_partition]
        else:
            self._by_kafka_partition[kafka_partition] = moved
        return moved

    def get(self, kafka_partition: int) -> Lease | None:
        return self._by_kafka_partition.get(kafka_partition)

    def holds(self, kafka_partition: int, generation: int) -> bool:
        lease = self._by_kafka_partition.get(kafka_partition)
        return lease is not None and lease.owned and lease.generation == generation

    def owned(self) -> list[Lease]:
        return [lease for lease in self._by_kafka_partition.values() if lease.owned]

    def all(self) -> list[Lease]:
        return list(self._by_kafka_partition.values())
