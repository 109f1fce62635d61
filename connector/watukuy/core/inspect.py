"""What ``inspect()`` reports for one active partition: cheap enough for every /healthz."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from watukuy.core.events import utc
from watukuy.core.state import ParkedItem, PartitionState


@dataclass(frozen=True, slots=True)
class PollerInspect:
    poller: str
    partition: str
    paused: bool
    circuit: str
    interval: float
    next_due: datetime | None
    lag: float | None
    parked: dict[str, int]
    owner: str | None = None
    sequence: int = 0
    throttled_until: datetime | None = None
    backfill: bool = False
    reconcile: bool = False
    replaying: bool = False
    last_error: str | None = None
    lanes: dict[str, object] = field(default_factory=dict)


def inspect_state(
    state: PartitionState,
    parked: Mapping[str, ParkedItem],
    now: float,
    due: float | None,
    owner: str | None = None,
) -> PollerInspect:
    counts = {"invalid": 0, "poison": 0}
    for item in parked.values():
        counts[item.kind] = counts.get(item.kind, 0) + 1
    throttled = state.schedule.throttle_until
    return PollerInspect(
        poller=state.poller,
        partition=state.partition,
        paused=state.paused is not None,
        circuit=state.circuit.state.value,
        interval=state.schedule.interval,
        next_due=None if due is None else utc(due),
        lag=None if state.last_success is None else max(0.0, now - state.last_success),
        parked=counts,
        owner=owner,
        sequence=state.sequence,
        throttled_until=utc(throttled) if throttled > now else None,
        backfill=state.backfill.active,
        reconcile=state.reconcile.active,
        replaying=state.live.replaying,
        last_error=state.last_error,
    )
