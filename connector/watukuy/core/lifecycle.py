"""Lifecycles: of one key on this instance (:class:`KeyPhase`) and of a connector's target
(:class:`Target`, what the user asked the whole poller to do).

A key's phase is where this instance stands with it, like Kafka Streams' task states: it is
being restored, held (active or paused by the user), waiting for a newer release (its stored
state is one this release cannot read), or let go, and why. The legal moves are
the table :data:`MOVES`; :func:`move` raises :class:`IllegalTransition` on any other, so a key
let go for one reason is never silently let go again for another (a fenced key is not then
marked removed), and a key that was let go comes back only through ``RESTORING``.

The stored ``PartitionState.paused`` flag is a different thing: it is what survives a
restart ("user", "removed", or "parent": a child stream's key whose parent item went).
:func:`held_phase` reads it when a key is restored.

The connector's target is independent of each key's phase: a key the user paused stays paused
when its connector is resumed, and a running key of a paused connector keeps its phase
(``ACTIVE``) while it is not polled.
"""

from __future__ import annotations

from enum import Enum, StrEnum

from watukuy.core.errors import ConfigError, IllegalTransition
from watukuy.core.state import PartitionState

__all__ = [
    "HELD",
    "MOVES",
    "IllegalTransition",
    "KeyPhase",
    "Target",
    "TaskState",
    "held_phase",
    "move",
    "parse_target",
]


class KeyPhase(Enum):
    RESTORING = "restoring"
    """Being loaded from the store; not yet scheduled."""
    ACTIVE = "active"
    """Held and scheduled (polled when its connector's target is RUNNING)."""
    PAUSED_BY_USER = "paused_by_user"
    """Held, not scheduled: a user paused it (stored ``paused="user"``)."""
    PAUSED_REMOVED = "paused_removed"
    """Let go: the partitions source no longer lists it. State kept; it resumes if listed again."""
    FENCED = "fenced"
    """Let go: another instance owns it now (ownership moved, or a commit was fenced)."""
    STOPPED = "stopped"
    """Let go: its connector was stopped, replaced or deleted. State kept in the store."""
    REMOVED = "removed"
    """Let go and every record of it deleted (``partitions.remove``)."""
    DORMANT = "dormant"
    """Let go: an on_change child waiting for its parent's next change (its poll is done).
    State kept in the store; a trigger or an operation holds it again through a restore."""
    WAITING_NEWER = "waiting_newer"
    """Owned and shown, but neither polled nor written: its stored state was written by a newer
    release (a rolling upgrade), which this one cannot read. It waits until its partition
    moves to an instance that can, so the newer value survives."""


_P = KeyPhase

HELD = frozenset({_P.ACTIVE, _P.PAUSED_BY_USER})
"""Phases in which the key is in memory, may be operated on and may commit."""

_LET_GO = frozenset({_P.PAUSED_REMOVED, _P.FENCED, _P.STOPPED, _P.REMOVED})

MOVES: dict[KeyPhase, frozenset[KeyPhase]] = {
    # Restored into its stored pause; or ownership moved, its connector stopped, or it was
    # removed while it was loading.
    _P.RESTORING: frozenset(
        {_P.ACTIVE, _P.PAUSED_BY_USER, _P.FENCED, _P.STOPPED, _P.REMOVED, _P.WAITING_NEWER}
    ),
    # A held key may be paused or resumed again (idempotent operations), or let go.
    _P.ACTIVE: frozenset({_P.ACTIVE, _P.PAUSED_BY_USER, _P.DORMANT}) | _LET_GO,
    _P.PAUSED_BY_USER: frozenset({_P.ACTIVE, _P.PAUSED_BY_USER}) | _LET_GO,
    # A key let go comes back only through a restore. A removed-but-kept key may still be
    # deleted; a deleted one may be listed again (it then comes back fresh).
    _P.PAUSED_REMOVED: frozenset({_P.RESTORING, _P.REMOVED}),
    _P.FENCED: frozenset({_P.RESTORING}),
    _P.DORMANT: frozenset({_P.RESTORING, _P.REMOVED}),
    _P.STOPPED: frozenset({_P.RESTORING, _P.REMOVED}),
    _P.REMOVED: frozenset({_P.RESTORING}),
    # A key that waits for a newer release is never held here; it is only let go (ownership
    # moved, its connector stopped, the listing dropped it, or a user deleted it).
    _P.WAITING_NEWER: _LET_GO,
}
"""Legal moves: from a phase to the phases it may go to."""


def move(current: KeyPhase, to: KeyPhase, key: str = "") -> KeyPhase:
    """``to``, if the table allows it; else :class:`IllegalTransition` naming both phases."""
    if to not in MOVES[current]:
        where = f"{key}: " if key else ""
        raise IllegalTransition(f"{where}a key cannot go from {current.name} to {to.name}")
    return to


def held_phase(state: PartitionState) -> KeyPhase:
    """The phase a held key is in, from its stored pause flag.

    ``"removed"`` reads as active: a key is held only while it is listed, so a flag left from
    an earlier removal is cleared as the key is restored.
    """
    # A child paused by its parent is held and shown paused, as a user's pause is.
    return _P.PAUSED_BY_USER if state.paused in ("user", "parent") else _P.ACTIVE


class Target(StrEnum):
    """What a connector (a poller, in REST terms) was asked to do, as Kafka Connect names it.

    A ``str``: its value is its name in records, REST bodies and the OpenAPI document.
    """

    RUNNING = "RUNNING"
    """Its keys are held and polled."""
    PAUSED = "PAUSED"
    """Its keys stay held and restored but are not polled; operations still apply."""
    STOPPED = "STOPPED"
    """Its keys are let go (state kept in the store); only now may its offsets be altered."""

    @property
    def holds_keys(self) -> bool:
        return self is not Target.STOPPED

    @property
    def polls(self) -> bool:
        return self is Target.RUNNING


class TaskState(StrEnum):
    """What REST and ``<prefix>.status`` say of one key (a task, in Connect's words): its
    connector's target where that decides, else how its owner runs it."""

    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    """The key or its connector is paused."""
    STOPPED = "STOPPED"
    """Its connector is stopped."""
    FAILED = "FAILED"
    """Its circuit is open: its polls keep failing."""
    NEEDS_AUTHORIZATION = "NEEDS_AUTHORIZATION"
    """Its tenant's grant was refused (or a refresh's answer lost): a person must authorise the
    account again; nothing is sent until a new grant is handed in."""
    UNASSIGNED = "UNASSIGNED"
    """No live runner runs it (none owns it, or its owner waits for a newer release)."""
    RESTARTING = "RESTARTING"
    """Only REST may say it (Connect's word); no status record holds it."""


def parse_target(value: object, path: str = "target") -> Target:
    """A target from its name (``"PAUSED"``); ``ConfigError`` naming ``path`` otherwise."""
    if isinstance(value, Target):
        return value
    if isinstance(value, str):
        try:
            return Target(value.upper())
        except ValueError:
            pass
    names = ", ".join(t.value for t in Target)
    raise ConfigError(f"must be one of: {names}; got {value!r}", path)
