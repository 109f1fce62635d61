"""What is kept per ``(poller, partition)``: cursors per lane, schedule, circuit, sequence,
HTTP validators, paused flag, fencing epoch; the snapshot entries and parked items.

Values are frozen; every change makes a new value, so a poll's outcome can be computed in full
before anything is committed. ``to_dict``/``from_dict`` give the JSON-able form stores write.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, dataclass, field, fields, replace
from operator import attrgetter
from typing import Any, Literal

from watukuy.core.budget import Lane
from watukuy.core.circuit import Circuit, CircuitState
from watukuy.core.errors import StateCorrupted
from watukuy.core.keys import key_text
from watukuy.core.schedule import ON_GRID, KeySchedule

STATE_FORMAT = 1

__all__ = [
    "Lane",
    "LaneState",
    "ParkedItem",
    "PartitionState",
    "SnapshotEntry",
    "Validators",
    "only_rescheduled",
]


@dataclass(frozen=True, slots=True)
class LaneState:
    """Cursor of one lane.

    ``active`` matters for backfill and reconcile (they run, then stop); ``replaying`` makes
    the live lane re-emit unchanged items until it catches up; ``scan`` numbers reconcile
    passes so a completed pass knows which snapshot entries it did not see; ``until`` is where
    a backfill stops (the live cursor when it began).
    """

    cursor: Any = None
    active: bool = False
    replaying: bool = False
    scan: int = 0
    until: Any = None


@dataclass(frozen=True, slots=True)
class Validators:
    etag: str | None = None
    last_modified: str | None = None


PauseReason = Literal["user", "removed", "parent"]
"""``parent``: a child stream's key whose parent item was deleted or left ``where``."""


@dataclass(frozen=True, slots=True)
class PartitionState:
    poller: str
    partition: str
    live: LaneState
    schedule: KeySchedule
    backfill: LaneState = LaneState()
    reconcile: LaneState = LaneState()
    reconcile_due: float | None = None
    circuit: Circuit = Circuit()  # noqa: RUF009 - frozen, so one shared default is safe
    sequence: int = 0
    validators: tuple[tuple[str, Validators], ...] = ()
    paused: PauseReason | None = None
    paused_at: float | None = None  # when ``paused`` was set: a paused child expires after retain
    epoch: int = 0
    last_success: float | None = None
    last_error: str | None = None
    created: float = 0.0

    @property
    def key(self) -> str:
        return key_text(self.poller, self.partition)

    def lane(self, lane: Lane) -> LaneState:
        # Compared by identity: hashing an Enum member runs Python code, and a poll asks this
        # a few times.
        if lane is Lane.LIVE:
            return self.live
        if lane is Lane.BACKFILL:
            return self.backfill
        return self.reconcile

    def with_lane(self, lane: Lane, value: LaneState) -> PartitionState:
        if lane is Lane.LIVE:
            return replace(self, live=value)
        if lane is Lane.BACKFILL:
            return replace(self, backfill=value)
        return replace(self, reconcile=value)

    def paused_by(self, reason: PauseReason, now: float) -> PartitionState:
        return replace(self, paused=reason, paused_at=now)

    def resumed(self) -> PartitionState:
        return replace(self, paused=None, paused_at=None)

    def validators_for(self, url: str) -> Validators | None:
        return dict(self.validators).get(url)

    def with_validators(self, updates: dict[str, Validators]) -> PartitionState:
        if not updates:
            return self
        merged = dict(self.validators)
        merged.update(updates)
        return replace(self, validators=tuple(sorted(merged.items())))

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["format"] = STATE_FORMAT
        out["circuit"]["state"] = self.circuit.state.value
        out["validators"] = {url: asdict(v) for url, v in self.validators}
        return out

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> PartitionState:
        try:
            circuit = dict(raw["circuit"])
            circuit["state"] = CircuitState(circuit["state"])
            return cls(
                poller=raw["poller"],
                partition=raw["partition"],
                live=LaneState(**raw["live"]),
                backfill=LaneState(**raw["backfill"]),
                reconcile=LaneState(**raw["reconcile"]),
                reconcile_due=raw.get("reconcile_due"),
                schedule=KeySchedule(**raw["schedule"]),
                circuit=Circuit(**circuit),
                sequence=int(raw["sequence"]),
                validators=tuple(
                    sorted((url, Validators(**v)) for url, v in raw["validators"].items())
                ),
                paused=raw.get("paused"),
                paused_at=raw.get("paused_at"),
                epoch=int(raw.get("epoch", 0)),
                last_success=raw.get("last_success"),
                last_error=raw.get("last_error"),
                created=float(raw.get("created", 0.0)),
            )
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise StateCorrupted(f"unreadable partition state: {exc!r}") from exc


# Every field of a state but the two an idle poll moves, read at once: a new field is compared
# without anyone remembering to add it here.
_ALL_BUT_TIMES = attrgetter(
    *(f.name for f in fields(PartitionState) if f.name not in ("schedule", "last_success"))
)


def only_rescheduled(written: PartitionState, new: PartitionState) -> bool:
    """Whether ``new`` differs from ``written`` only as idle polls move a key: its next due
    time whole intervals later (the interval and any throttle window as they were), and its
    last success later. Such a state need not be written: whoever restores ``written``
    finds the due time again from when its owner last said it had made every poll due
    (:func:`watukuy.core.schedule.resumed`), and the lag it shows is right again at the
    key's next poll."""
    old, now = written.schedule, new.schedule
    if now.interval != old.interval or now.throttle_until != old.throttle_until:
        return False
    if not old.interval > 0:
        return False
    if not math.isfinite(now.next_due) or not math.isfinite(old.next_due):
        return False  # an on_change key going back to waiting, or triggered: always written
    moved = now.next_due - old.next_due
    steps = round(moved / old.interval)
    if steps < 1 or abs(moved - steps * old.interval) > ON_GRID:
        return False
    return _ALL_BUT_TIMES(new) == _ALL_BUT_TIMES(written)


@dataclass(frozen=True, slots=True, init=False)
class SnapshotEntry:
    """What was last seen of one item: the basis of change detection."""

    version: str
    seen: float
    scan: int = 0
    deleted: float | None = None  # when a reconcile found it gone; kept until ``retain``

    def __init__(
        self, version: str, seen: float, scan: int = 0, deleted: float | None = None
    ) -> None:
        # What the generated __init__ of a frozen dataclass does, in half the time (one entry
        # per change detected, per entry restored): each slot's own setter, not
        # ``object.__setattr__``.
        _set_version(self, version)
        _set_seen(self, seen)
        _set_scan(self, scan)
        _set_deleted(self, deleted)


_set_version, _set_seen, _set_scan, _set_deleted = (
    vars(SnapshotEntry)[name].__set__ for name in ("version", "seen", "scan", "deleted")
)


ParkedKind = Literal["invalid", "poison"]
CUT_MARK = "truncated"  # the key of a cut item's stand-in that says it was cut
TRANSFORMED_MARK = "transformed"
"""The key of the stand-in parked for an item of a poller that transforms items: what it would
publish (``item``), never the vendor's item (:func:`watukuy.core.changes.parked_form`)."""


@dataclass(frozen=True, slots=True)
class ParkedItem:
    """An item or event that could not be turned into an event or delivered."""

    id: str
    poller: str
    partition: str
    kind: ParkedKind
    item: Any
    error: str
    attempts: int
    parked_at: float
    lane: str = "live"
    subject: str | None = None
    event: dict[str, Any] | None = field(default=None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def cut(self, encoded: bytes, keep: int) -> ParkedItem:
        """This item with ``item`` replaced by the first ``keep`` bytes of ``encoded`` (its
        JSON) and that JSON's size and hash: what is parked when the whole would not fit."""
        stand_in = {
            CUT_MARK: True,
            "head": encoded[:keep].decode(errors="ignore"),
            "original_bytes": len(encoded),
            "original_sha256": hashlib.sha256(encoded).hexdigest(),
        }
        return replace(self, item=stand_in)

    @property
    def is_cut(self) -> bool:
        """Parked cut (:meth:`cut`): the item itself is gone, so it cannot be retried."""
        return isinstance(self.item, dict) and self.item.get(CUT_MARK) is True

    @property
    def is_transformed(self) -> bool:
        """Parked as its poller would publish it: the vendor's item is not kept, so it cannot
        be retried (transforming it again would, say, mask a masked value)."""
        return isinstance(self.item, dict) and self.item.get(TRANSFORMED_MARK) is True

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> ParkedItem:
        try:
            return cls(**raw)
        except TypeError as exc:
            raise StateCorrupted(f"unreadable parked item: {exc!r}") from exc
