"""What ``inspect()`` reports for one active partition: cheap enough for every /healthz.

A key that waits for a newer release (``waiting_newer``: its stored state was written by a
newer release, which this one cannot read) is reported too, as owned here, with its
``last_error`` saying why; but this instance neither polls nor writes it, and the rest of its
entry is a fresh key's, not what is stored. Its status is UNASSIGNED
(:func:`watukuy.control.keystatus.key_status`), and metrics do not count it as a held key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

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
    waiting_newer: bool = False
    """Owned here but not run: its stored state is a newer release's (see the module's text)."""


def lane_views(
    state: PartitionState, backfill_run: Mapping[str, Any] | None = None
) -> dict[str, object]:
    """Each lane as ``inspect()`` shows it (JSON values only).

    ``live``: its cursor and whether it replays. ``backfill``: whether it runs, its cursor and
    end (``until``), and with ``backfill_run`` (the engine's count of the run on this
    instance) ``pages``, ``items`` and ``start``, from which a status works out how far it is.
    ``reconcile``: whether a pass runs, its cursor, its scan number and when the next is due.
    """
    backfill: dict[str, object] = {
        "active": state.backfill.active,
        "cursor": state.backfill.cursor,
        "until": state.backfill.until,
    }
    if state.backfill.active and backfill_run is not None:
        backfill.update(backfill_run)
    due = state.reconcile_due
    return {
        "live": {"cursor": state.live.cursor, "replaying": state.live.replaying},
        "backfill": backfill,
        "reconcile": {
            "active": state.reconcile.active,
            "cursor": state.reconcile.cursor,
            "scan": state.reconcile.scan,
            "due": None if due is None else utc(due).isoformat(),
        },
    }


def inspect_state(
    state: PartitionState,
    parked: Mapping[str, ParkedItem],
    now: float,
    due: float | None,
    owner: str | None = None,
    backfill_run: Mapping[str, Any] | None = None,
    *,
    waiting_newer: bool = False,
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
        lanes=lane_views(state, backfill_run),
        waiting_newer=waiting_newer,
    )
