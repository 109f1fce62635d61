"""The operations a user can ask for, declared once: every adapter reads this registry.

Per key (``poller/partition``, :data:`KEY_OPERATIONS`): trigger, pause, resume, backfill,
replay, reset_cursor, reconcile, retry, remove and alter_offsets. Per connector (a whole
poller, :data:`CONNECTOR_OPERATIONS`): pause, resume, stop and restart.

A key operation has a name (an engine method's name and a command record's ``op``), typed
arguments with their JSON form (what a command record and a REST body carry: ``from``, ``to``,
``clear_snapshot``, ``ids``, ``offset``) and, for those that only change the key's state, a pure
:meth:`KeyOperation.apply` to that state (and snapshot) at ``now``. The engine's methods, the
command records, the CLI's reset and replay and the REST routes are thin adapters over it, so
an operation means the same whether it is called in process or arrives from another instance.

Argument values are normalised to their JSON form as they enter (a ``datetime`` cursor becomes
its ISO-8601 text), so a value applied here is exactly the value another instance would apply.
Bad arguments raise :class:`ConfigError` naming the argument (``from``, ``ids[2]``): the checks
are in :mod:`watukuy.core.arguments`, the offsets' KIP-875 shape in :mod:`watukuy.core.offsets`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from watukuy.core import schedule as schedules
from watukuy.core.arguments import LANES, check_names, flag, ids, json_value, offset
from watukuy.core.errors import ConfigError
from watukuy.core.lifecycle import Target
from watukuy.core.offsets import decode_offsets, offsets_of
from watukuy.core.onchange import adopted
from watukuy.core.poller import Poller
from watukuy.core.state import LaneState, PartitionState, SnapshotEntry
from watukuy.core.validation import join, kind

__all__ = [
    "CONNECTOR_OPERATIONS",
    "CURSOR_SCHEMA",
    "KEY_OPERATIONS",
    "LANES",
    "Argument",
    "ConnectorOperation",
    "Effect",
    "KeyChange",
    "KeyOperation",
    "KeyView",
    "connector_operation",
    "decode_offsets",
    "json_value",
    "key_operation",
    "offsets_of",
]
# LANES, json_value, decode_offsets and offsets_of live in watukuy.core.arguments and
# watukuy.core.offsets; every adapter finds them here with the operations that use them.

# -- key operations ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Argument:
    """One argument: its JSON name, the engine method's keyword, and its check."""

    name: str
    """In a command record's ``args`` and a REST body: ``from``."""
    keyword: str
    """The Python keyword: ``from_``."""
    check: Callable[[object, str], Any]
    """Accepts the JSON form or a Python value; returns the JSON form or raises ConfigError."""
    default: Any = None
    legacy: tuple[str, ...] = ()
    """Names records written by earlier releases use (``from_``), read as this argument."""
    schema: Mapping[str, Any] = field(default_factory=dict)
    """The JSON Schema of its JSON form, for documents (the REST API's request bodies)."""


@dataclass(frozen=True, slots=True)
class KeyView:
    """What an operation may read of a key: its definition, committed state and snapshot."""

    poller: Poller
    state: PartitionState
    snapshot: Mapping[str, SnapshotEntry]


@dataclass(frozen=True, slots=True)
class KeyChange:
    """The key's new state, and the snapshot entries to forget with it."""

    state: PartitionState
    forget: tuple[str, ...] = ()


Apply = Callable[[KeyView, Mapping[str, Any], float], KeyChange]


class Effect(Enum):
    """What running an operation does, beyond its name and arguments."""

    STATE = "state"
    """``apply`` gives the key's new state: a pure step the engine commits."""
    RETRY = "retry"
    """Parked items are delivered again through the handlers (user code, so not pure)."""
    REMOVE = "remove"
    """Every record of the key is deleted."""


HOLDING = frozenset({Target.RUNNING, Target.PAUSED})


@dataclass(frozen=True, slots=True)
class KeyOperation:
    name: str
    summary: str
    arguments: tuple[Argument, ...] = ()
    apply_state: Apply | None = None
    effect: Effect = Effect.STATE
    allowed: frozenset[Target] = HOLDING
    """Connector targets under which it may run (offsets change only while STOPPED)."""
    verb: str = ""
    """The REST route's and CLI command's name when it differs (``reset``)."""
    partition_route: bool = True
    """Served over REST as ``POST /connectors/{name}/partitions/{key}/{verb}``. Retry, remove
    and alter_offsets have routes of their own (``parked/retry``, ``DELETE``, ``offsets``)."""

    @property
    def called(self) -> str:
        """Its REST/CLI name: :attr:`verb`, or :attr:`name` when it has none."""
        return self.verb or self.name

    @property
    def keywords(self) -> tuple[str, ...]:
        return tuple(a.keyword for a in self.arguments)

    def values(self, given: Mapping[str, Any] | None = None, path: str = "") -> dict[str, Any]:
        """Checked values by keyword, from an engine method's keywords (``from_=...``)."""
        given = dict(given or {})
        check_names(given, self.keywords, path)
        return {
            a.keyword: a.check(given.get(a.keyword, a.default), join(path, a.name))
            for a in self.arguments
        }

    def decode(self, raw: object, path: str = "") -> dict[str, Any]:
        """Checked values by keyword, from the JSON form (a command's ``args``, a REST body).

        ``None`` reads as ``{}``; absent arguments take their default.
        """
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            raise ConfigError(f"must be a JSON object, got {kind(raw)}", path or "args")
        names = tuple(n for a in self.arguments for n in (a.name, *a.legacy))
        check_names(raw, names, path)
        out: dict[str, Any] = {}
        for argument in self.arguments:
            value = argument.default
            for name in (argument.name, *argument.legacy):
                if name in raw:
                    value = raw[name]
                    break
            out[argument.keyword] = argument.check(value, join(path, argument.name))
        return out

    def encode(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The JSON form of checked ``values`` (what :meth:`decode` reads back)."""
        return {a.name: values.get(a.keyword, a.default) for a in self.arguments}

    def apply(self, view: KeyView, values: Mapping[str, Any], now: float) -> KeyChange:
        """The key's new state; only for operations whose effect is :attr:`Effect.STATE`."""
        if self.apply_state is None:
            raise ConfigError(f"{self.name} does not change a key's state by itself", "op")
        return self.apply_state(view, values, now)


def _triggered(state: PartitionState, now: float) -> PartitionState:
    return replace(state, schedule=schedules.trigger(state.schedule, now))


def _trigger(view: KeyView, values: Mapping[str, Any], now: float) -> KeyChange:
    return KeyChange(_triggered(view.state, now))


def _pause(view: KeyView, values: Mapping[str, Any], now: float) -> KeyChange:
    return KeyChange(view.state.paused_by("user", now))


def _resume(view: KeyView, values: Mapping[str, Any], now: float) -> KeyChange:
    return KeyChange(view.state.resumed())


def _reconcile(view: KeyView, values: Mapping[str, Any], now: float) -> KeyChange:
    return KeyChange(replace(view.state, reconcile_due=now))


def _backfill(view: KeyView, values: Mapping[str, Any], now: float) -> KeyChange:
    # A timestamp backfill stops where live began; a token one runs to the end of history.
    until = view.state.live.cursor if view.poller.cursor.strategy == "timestamp" else None
    backfill = LaneState(cursor=values["from_"], active=True, until=until)
    return KeyChange(replace(view.state, backfill=backfill))


def _replay(view: KeyView, values: Mapping[str, Any], now: float) -> KeyChange:
    live = LaneState(cursor=values["from_"], replaying=True)
    # Validators would let the vendor answer 304 and the replay would see nothing.
    return KeyChange(_triggered(replace(view.state, live=live, validators=()), now))


def _reset_cursor(view: KeyView, values: Mapping[str, Any], now: float) -> KeyChange:
    state = replace(view.state, live=LaneState(cursor=values["to"]), validators=())
    forget = tuple(view.snapshot) if values["clear_snapshot"] else ()
    return KeyChange(_triggered(state, now), forget)


def _alter_offsets(view: KeyView, values: Mapping[str, Any], now: float) -> KeyChange:
    offset: dict[str, Any] | None = values["offset"]
    state = view.state
    if offset is None:  # start over: initial cursor, no lane running, nothing seen
        state = replace(
            state,
            live=LaneState(cursor=view.poller.cursor.initial),
            backfill=LaneState(),
            reconcile=LaneState(),
            validators=(),
        )
        return KeyChange(_triggered(state, now), tuple(view.snapshot))
    if "live" in offset:
        state = replace(state, live=replace(state.live, cursor=offset["live"]), validators=())
    if "backfill" in offset:
        state = replace(state, backfill=replace(state.backfill, cursor=offset["backfill"]))
    if "reconcile" in offset:
        state = replace(state, reconcile=replace(state.reconcile, cursor=offset["reconcile"]))
    return KeyChange(_triggered(state, now))


def _adopt(view: KeyView, values: Mapping[str, Any], now: float) -> KeyChange:
    # Sent by every parent commit that creates (or updates) the parent item: a child paused
    # by its parent resumes; a live scheduled child is not re-read on each parent change, a
    # live on_change child is (its trigger, watukuy.core.onchange).
    if view.state.paused == "parent":
        return KeyChange(_triggered(view.state.resumed(), now))
    return KeyChange(adopted(view.poller, view.state, now))


def _resume_child(view: KeyView, values: Mapping[str, Any], now: float) -> KeyChange:
    # Sent down by a child resumed by its parent: the grandchildren it paused resume with it.
    if view.state.paused == "parent":
        return KeyChange(_triggered(view.state.resumed(), now))
    return KeyChange(view.state)


def _pause_child(view: KeyView, values: Mapping[str, Any], now: float) -> KeyChange:
    if view.state.paused is None:  # a user's pause stays the user's
        return KeyChange(view.state.paused_by("parent", now))
    return KeyChange(view.state)


CURSOR_SCHEMA: Mapping[str, Any] = {
    "description": "A cursor: any JSON value as the poller keeps it (a token, an ISO-8601 "
    "timestamp...)."
}
_FROM = Argument(
    "from",
    "from_",
    json_value,
    legacy=("from_",),
    schema={**CURSOR_SCHEMA, "description": "The cursor to start from; null: the beginning."},
)
_OFFSET_SCHEMA = {
    "oneOf": [
        {
            "type": "object",
            "properties": dict.fromkeys(LANES, CURSOR_SCHEMA),
            "additionalProperties": False,
        },
        {"type": "null", "description": "Start over."},
    ]
}

_KEY_OPERATIONS = (
    KeyOperation("trigger", "poll the key now", apply_state=_trigger),
    # Written by a webhook's route for the key's owner: a trigger that says why, so its commit
    # is timed from the webhook (watukuy_webhook_wake_seconds). Always a command record, even
    # for a key held where the webhook arrived, so an accepted webhook survives a crash.
    KeyOperation(
        "wake",
        "poll the key now: a vendor's webhook said it changed",
        apply_state=_trigger,
        partition_route=False,
    ),
    KeyOperation("pause", "stop polling the key until it is resumed", apply_state=_pause),
    KeyOperation("resume", "poll the key again", apply_state=_resume),
    KeyOperation(
        "backfill",
        "read history in the backfill lane, from a cursor (null: the beginning)",
        (_FROM,),
        _backfill,
    ),
    KeyOperation(
        "replay",
        "re-read the live lane from a cursor, re-emitting unchanged items with their ids",
        (_FROM,),
        _replay,
    ),
    KeyOperation(
        "reset_cursor",
        "move the live cursor (and optionally forget the snapshot: everything is new again)",
        (
            Argument("to", "to", json_value, schema=CURSOR_SCHEMA),
            Argument("clear_snapshot", "clear_snapshot", flag, False, schema={"type": "boolean"}),
        ),
        _reset_cursor,
        verb="reset",
    ),
    KeyOperation(
        "reconcile",
        "run a full scan now (finds deletions)",
        apply_state=_reconcile,
        partition_route=False,  # not in the REST contract (yet)
    ),
    KeyOperation(
        "retry",
        "deliver parked items again; those that now succeed are unparked",
        (
            Argument(
                "ids",
                "ids",
                ids,
                (),
                schema={"type": "array", "items": {"type": "string", "minLength": 1}},
            ),
        ),
        effect=Effect.RETRY,
        partition_route=False,
    ),
    KeyOperation(
        "remove",
        "delete every record of the key",
        effect=Effect.REMOVE,
        allowed=frozenset(Target),
        partition_route=False,
    ),
    KeyOperation(
        "alter_offsets",
        "set the key's lane cursors (null: start over); only while the connector is STOPPED",
        (Argument("offset", "offset", offset, schema=_OFFSET_SCHEMA),),
        _alter_offsets,
        allowed=frozenset({Target.STOPPED}),
        partition_route=False,
    ),
    # Sent by a parent stream's commits to its child keys' owners (watukuy.core.children).
    KeyOperation(
        "adopt",
        "create a child stream's key (due at once), or resume it if its parent paused it",
        apply_state=_adopt,
        allowed=frozenset(Target),
        partition_route=False,
    ),
    KeyOperation(
        "pause_child",
        "pause a child stream's key: its parent item was deleted or left the filter",
        apply_state=_pause_child,
        allowed=frozenset(Target),
        partition_route=False,
    ),
    KeyOperation(
        "resume_child",
        "resume a child stream's key its parent paused, as its paused parent resumes; "
        "never creates one",
        apply_state=_resume_child,
        allowed=frozenset(Target),
        partition_route=False,
    ),
)

KEY_OPERATIONS: Mapping[str, KeyOperation] = {op.name: op for op in _KEY_OPERATIONS}
"""Every per-key operation by name: the command schema's ``CommandOp`` symbols."""

_BY_VERB = {op.verb: op for op in _KEY_OPERATIONS if op.verb}


def key_operation(name: str, path: str = "op") -> KeyOperation:
    """The operation named ``name`` (or its REST/CLI verb, ``reset``)."""
    found = KEY_OPERATIONS.get(name) or _BY_VERB.get(name)
    if found is None:
        known = ", ".join(KEY_OPERATIONS)
        raise ConfigError(f"unknown operation {name!r}; expected one of: {known}", path)
    return found


# -- connector operations ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConnectorOperation:
    """An operation on a whole poller: it sets a target, or restarts the keys in place."""

    name: str
    summary: str
    target: Target | None
    """The target it sets; ``None`` keeps the target (restart)."""

    @property
    def restarts(self) -> bool:
        return self.target is None


CONNECTOR_OPERATIONS: Mapping[str, ConnectorOperation] = {
    op.name: op
    for op in (
        ConnectorOperation("pause", "keep the keys, stop polling them", Target.PAUSED),
        ConnectorOperation("resume", "poll the keys again", Target.RUNNING),
        ConnectorOperation(
            "stop", "let the keys go (state kept); offsets may then be altered", Target.STOPPED
        ),
        ConnectorOperation("restart", "reload every key from the store, state kept", None),
    )
}


def connector_operation(name: str, path: str = "op") -> ConnectorOperation:
    found = CONNECTOR_OPERATIONS.get(name)
    if found is None:
        known = ", ".join(CONNECTOR_OPERATIONS)
        raise ConfigError(f"unknown connector operation {name!r}; expected one of: {known}", path)
    return found
