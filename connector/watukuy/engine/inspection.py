"""What :meth:`Engine.inspect` shows of a held key, and a mark that moves whenever that may.

A runner's status round looks at every held key each second. Rebuilding the same inspections
of 10,000 idle keys took 40% of the runner's CPU (a py-spy profile, stop 33), so the round
inspects only the keys whose mark moved (and those whose status is due to be written again).
An inspection is built from the key's state (a new object at every commit, its parked items
with it), its due time, phase, connector target and backfill run's counts, and the time: of
the time it shows only the lag (which a status compares only as there or not) and whether a
throttle still holds, which the mark carries.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import asdict, replace

from watukuy.core.inspect import PollerInspect, inspect_state
from watukuy.core.lifecycle import KeyPhase
from watukuy.engine.keys import KeyRuntime
from watukuy.engine.progress import LaneProgress
from watukuy.engine.roster import Roster

__all__ = ["inspection", "mark"]


def inspection(
    runtime: KeyRuntime, roster: Roster, progress: LaneProgress, owner: str | None, now: float
) -> PollerInspect:
    key = runtime.key
    run = progress.backfill(key)
    entry = inspect_state(
        runtime.state,
        runtime.parked,
        now,
        roster.due.at(key),
        owner,
        backfill_run=None if run is None else asdict(run),
        waiting_newer=runtime.phase is KeyPhase.WAITING_NEWER,
    )
    if not roster.target(runtime.poller.name).polls:
        entry = replace(entry, paused=True)  # its connector is paused
    return entry


def mark(runtime: KeyRuntime, roster: Roster, progress: LaneProgress, now: float) -> Hashable:
    """Equal (the same objects, mostly) for as long as :func:`inspection` of the key gives
    the same but for its lag."""
    key = runtime.key
    state = runtime.state
    run = progress.backfill(key)
    return (
        state,
        roster.due.at(key),
        runtime.phase,
        roster.target(runtime.poller.name),
        None if run is None else (run.pages, run.items),
        state.schedule.throttle_until > now,
    )
