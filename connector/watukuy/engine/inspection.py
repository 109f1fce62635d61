"""What :meth:`Engine.inspect` shows of a held key, and a mark that moves whenever that may.

A runner's status round looks only at the keys touched since its last look
(:mod:`.changes`), and of those it inspects only the keys whose :func:`status_mark` moved
(and those whose status is due to be written again): rebuilding the same inspections of
10,000 idle keys every second took 40% of the runner's CPU (a py-spy profile, stop 33).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import asdict, replace

from watukuy.core.inspect import PollerInspect, inspect_state
from watukuy.core.lifecycle import KeyPhase
from watukuy.engine.keys import KeyRuntime
from watukuy.engine.progress import LaneProgress
from watukuy.engine.roster import Roster

__all__ = ["inspection", "status_mark"]


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


def status_mark(runtime: KeyRuntime, roster: Roster, progress: LaneProgress) -> Hashable:
    """Equal for as long as what a key's status shows of :func:`inspection` is: whether it is
    paused, its circuit, its last error, whether it ever succeeded, what it published and
    parked, its backfill run, its phase and its connector's target. Not its due time, interval
    or cursors, nor its lag beyond whether there is one: an idle poll moves those, and a
    status does not show them (its lag is refreshed by the periodic write)."""
    state = runtime.state
    backfill = state.backfill if state.backfill.active else None
    run = None if backfill is None else progress.backfill(runtime.key)
    return (
        state.paused,
        state.circuit.state,
        state.last_error,
        state.last_success is None,
        state.sequence,
        _parked_kinds(runtime),
        backfill,
        None if run is None else (run.pages, run.items),
        runtime.phase,
        roster.target(runtime.poller.name),
    )


def _parked_kinds(runtime: KeyRuntime) -> tuple[str, ...]:
    if not runtime.parked:
        return ()
    return tuple(sorted(item.kind for item in runtime.parked.values()))
