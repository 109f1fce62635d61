"""``parent.poll: on_change``: a child key polled when its parent item changes, never on a timer.

A child stream's key is normally polled on its own schedule forever, although a ticket's
comments only change when the ticket does. With ``on_change`` the key is polled once when its
parent item creates it, once more each time that item is ``updated``, and otherwise holds no
due time at all: an idle key costs its stored state, no schedule entry and no CPU.

Why a trigger can be neither lost nor doubled (exactly once), with no new record kind:

- The trigger is the ``adopt`` command the parent's commit already sends for each ``created``
  or ``updated`` parent item (:func:`watukuy.core.children.sends`), in the *same* Kafka
  transaction as the parent's events: a committed parent change has a committed trigger, an
  aborted one has none.
- The child key's owner applies the command in one commit that writes the key's state *due
  now* and takes the command away (:func:`adopted`). A crash before that commit leaves the
  command, handed over again; a crash after it leaves a state that is due, which a restore
  schedules like any due key.
- The child's poll commits its events with the state :func:`after_success` makes: due
  :data:`WHEN_CHANGED` (never). A crash before that commit leaves the key due: it is polled
  again, from its committed cursor and snapshot, so nothing is published twice. The idle
  state is always written (:func:`watukuy.core.state.only_rescheduled` never skips a move to
  :data:`WHEN_CHANGED`), so a restart does not poll every child triggered since.
- Several triggers before one poll make one poll (the state is due; due twice is due once):
  the poll reads the child's current data, which covers each change.

A failed poll backs off like any key's (:func:`watukuy.core.schedule.backoff`: a timer until it
succeeds), then goes back to waiting. An operator's ``trigger`` (REST, CLI) makes it due now
like any key; ``pause`` and ``resume`` work as they do on any key (a resumed on_change key
waits for its next trigger, as it waited before the pause, unless it was due).
"""

from __future__ import annotations

import math
from dataclasses import replace

from watukuy.core.circuit import CircuitState
from watukuy.core.poller import Poller
from watukuy.core.schedule import KeySchedule, trigger
from watukuy.core.state import PartitionState

__all__ = [
    "WHEN_CHANGED",
    "adopted",
    "after_success",
    "dormant",
    "is_on_change",
    "sleeps",
    "waiting",
]

WHEN_CHANGED = math.inf
"""The ``next_due`` of an on_change key between triggers: no timer ever reaches it."""


def is_on_change(poller: Poller) -> bool:
    """Whether ``poller`` is a child stream polled on its parent's changes only."""
    return poller.parent is not None and poller.parent.on_change


def waiting(schedule: KeySchedule) -> bool:
    """Whether a key's schedule waits for a trigger (no due time)."""
    return schedule.next_due == WHEN_CHANGED


def after_success(poller: Poller, schedule: KeySchedule) -> KeySchedule:
    """The schedule after a poll of ``poller`` finished: unchanged for a scheduled poller (the
    caller's AIMD step stands), back to waiting for an on_change child. The interval and any
    throttle window are kept: a trigger still waits for the window."""
    if not is_on_change(poller):
        return schedule
    return replace(schedule, next_due=WHEN_CHANGED)


def adopted(poller: Poller, state: PartitionState, now: float) -> PartitionState:
    """An ``adopt`` (its parent item created, updated or back within ``where``) applied to a
    child key that its parent did not pause. A scheduled child is left as it is (it polls on
    its timer anyway); an on_change child is due now: this is its trigger."""
    if not is_on_change(poller):
        return state
    return replace(state, schedule=trigger(state.schedule, now))


def sleeps(state: PartitionState) -> bool:
    """:func:`dormant`, read from the state alone (a store that does not know the pollers):
    only an on_change child's state ever waits without a due time."""
    return (
        state.paused is None
        and waiting(state.schedule)
        and not state.backfill.active
        and not state.reconcile.active
        and state.reconcile_due is None
        and state.circuit.state is CircuitState.CLOSED
    )


def dormant(poller: Poller, state: PartitionState) -> bool:
    """Whether a key of ``poller`` in ``state`` needs nothing until its next trigger: an
    on_change child waiting, not paused, no lane running or reconcile planned, its circuit
    closed. Such a key is not held in memory by the engine (no runtime, no listing entry,
    no schedule entry): its stored state is all it costs. A trigger (its parent's ``adopt``
    or an operator's operation) holds it again."""
    return is_on_change(poller) and sleeps(state)
