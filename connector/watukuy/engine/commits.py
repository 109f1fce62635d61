"""What committing one step of a key does: the store's answer, then the key taking it in.

Two halves, because a key's pages in flight (:mod:`.inflight`) are sent one after another and
taken in only as they land, in order; an operation does both at once (:meth:`Roster.commit`).
"""

from __future__ import annotations

import logging
from typing import Protocol

from watukuy.core.errors import Conflict, Fenced
from watukuy.core.lifecycle import KeyPhase, held_phase
from watukuy.engine.changes import Watchers
from watukuy.engine.keys import KeyRuntime
from watukuy.store.base import KeyCommit, Store

log = logging.getLogger("watukuy.partitions")


class Roster(Protocol):
    """What committing needs of the roster (:class:`watukuy.engine.roster.Roster`), which
    imports this module."""

    store: Store

    def drop(self, runtime: KeyRuntime, phase: KeyPhase, *, retry: bool = True) -> None: ...

    def still_holds(self, runtime: KeyRuntime) -> bool: ...

    changes: Watchers

    def reschedule(self, runtime: KeyRuntime) -> None: ...


async def send(roster: Roster, runtime: KeyRuntime, commit: KeyCommit) -> None:
    """Have the store commit ``commit``; a key another owner fenced off is let go here."""
    refuse_waiting(runtime)
    try:
        await roster.store.commit([commit])
    except Fenced:
        if runtime.held or runtime.phase is KeyPhase.RESTORING:
            log.warning("%s: fenced by another owner; letting the key go", runtime.key)
            roster.drop(runtime, KeyPhase.FENCED)
        raise


def refuse_waiting(runtime: KeyRuntime) -> None:
    """``Conflict`` for any write to a key that waits for a newer release."""
    if runtime.phase is KeyPhase.WAITING_NEWER:
        raise Conflict(f"{runtime.key} {runtime.state.last_error}")


def take_in(
    roster: Roster, runtime: KeyRuntime, commit: KeyCommit, *, reschedule: bool = True
) -> None:
    """The store committed ``commit``: the key's committed picture moves on with it.
    ``reschedule=False`` leaves the key's due time to its poll, which sets it as it ends."""
    runtime.applied(commit)
    if roster.still_holds(runtime):
        runtime.move(held_phase(runtime.state))  # pause and resume move it
        if reschedule:
            roster.reschedule(runtime)
        else:
            roster.changes.touch(runtime.key)
