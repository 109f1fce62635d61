"""What a key's status is and how it travels in ``<prefix>.status``; pure, time passed in.

- :func:`key_status` turns the engine's :class:`~watukuy.core.inspect.PollerInspect` of a key
  into the :class:`KeyStatus` its owner publishes.
- :func:`encode_status`, :func:`encode_heartbeat` and :func:`decode_record` are the records:
  ``key/<poller>/<partition>`` (a key's status) and ``worker/<runner id>`` (a heartbeat), JSON
  values (UTF-8, sorted keys, a ``format_version``) that any console consumer can read.
- :class:`StatusTable` holds the latest of each record as read, and answers a poller's keys,
  UNASSIGNED where the owner's heartbeat is gone or older than the session timeout.
- :class:`Outbox` decides what a publish writes: what changed since the last write of the
  key, and every key at least every ``full_every`` seconds.

Heartbeats carry the writer's clock and are judged by the reader's: runners' clocks are
assumed to agree to well within a session timeout (as NTP keeps them).
"""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

import orjson

from watukuy.control.jsonrecord import json_record
from watukuy.core.errors import StateCorrupted
from watukuy.core.events import canonical_json
from watukuy.core.inspect import PollerInspect
from watukuy.core.keys import KeyId, key_text
from watukuy.core.lifecycle import Target, TaskState
from watukuy.core.observe import NEEDS_AUTHORIZATION_PREFIX
from watukuy.core.redaction import MAX_LENGTH

__all__ = [
    "FORMAT_VERSION",
    "RECORDED",
    "BackfillProgress",
    "Heartbeat",
    "KeyStatus",
    "Outbox",
    "StatusTable",
    "decode_record",
    "encode_heartbeat",
    "encode_status",
    "heartbeat_key",
    "key_status",
    "status_key",
]

RECORDED = frozenset(TaskState) - {TaskState.RESTARTING}
"""The states a status record may hold (RESTARTING is only REST's word)."""
FORMAT_VERSION = 1
"""``format_version`` written by this release; a record with a higher one is refused."""

KEY_PREFIX = "key/"
WORKER_PREFIX = "worker/"
MAX_CURSOR = 200  # characters of a cursor kept in a status: a position to show, not to resume


@dataclass(frozen=True, slots=True)
class BackfillProgress:
    """A running backfill: pages and items done, where its cursor is, and how far it is
    between its start and its end when both are known (0..1)."""

    pages: int | None = None
    items: int | None = None
    cursor: Any = None
    fraction: float | None = None


@dataclass(frozen=True, slots=True)
class KeyStatus:
    poller: str
    partition: str
    state: TaskState
    owner: str | None
    lag: float | None  # seconds since the last successful poll, as of updated_at
    circuit: str
    parked: Mapping[str, int] = field(default_factory=dict)
    backfill: BackfillProgress | None = None
    last_error: str | None = None  # already redacted by whoever recorded it
    updated_at: float = 0.0

    @property
    def key(self) -> str:
        return key_text(self.poller, self.partition)


@dataclass(frozen=True, slots=True)
class Heartbeat:
    runner: str
    at: float
    partitions: tuple[int, ...] = ()
    """The Kafka partitions of ``<prefix>.state`` the runner owned when it wrote this: the
    group's assignment as every runner can read it, which standby replicas are chosen from
    (records written before it was added have none)."""
    restoring: tuple[int, ...] = ()
    """The partitions assigned to it and still being restored: held, but not yet polled."""


# -- from inspect -----------------------------------------------------------------------------


def key_status(inspect: PollerInspect, *, now: float, target: Target = Target.RUNNING) -> KeyStatus:
    """The status of one key from its ``inspect()`` entry.

    ``target`` is the connector's target state (RUNNING, PAUSED, STOPPED). A key is STOPPED
    when its connector is; UNASSIGNED while it waits for a newer release (owned here, so
    ``owner`` is this runner, but run by no one: ``last_error`` says why); PAUSED when either
    is paused; NEEDS_AUTHORIZATION while its tenant's grant is refused; FAILED while its circuit
    is open (its polls keep failing; ``last_error`` says
    why); else RUNNING. Backfill progress comes from
    ``inspect.lanes["backfill"]`` when the engine reports one: a mapping with any of
    ``pages``, ``items``, ``cursor``, ``fraction``, or ``start`` and ``until`` (numbers or
    ISO-8601 times) from which, with ``cursor``, the fraction is worked out.
    """
    state: TaskState
    if target == Target.STOPPED:
        state = TaskState.STOPPED
    elif inspect.waiting_newer:
        # Not RUNNING: Connect's users read that as "this instance works on it". Nor PAUSED:
        # resuming would not make it run; only an instance of the newer release can.
        state = TaskState.UNASSIGNED
    elif target == Target.PAUSED or inspect.paused:
        state = TaskState.PAUSED
    elif (inspect.last_error or "").startswith(NEEDS_AUTHORIZATION_PREFIX):
        state = TaskState.NEEDS_AUTHORIZATION
    elif inspect.circuit == "open":
        state = TaskState.FAILED
    else:
        state = TaskState.RUNNING
    error = inspect.last_error
    return KeyStatus(
        poller=inspect.poller,
        partition=inspect.partition,
        state=state,
        owner=inspect.owner,
        lag=inspect.lag,
        circuit=inspect.circuit,
        parked=dict(inspect.parked),
        backfill=_progress(inspect.lanes.get("backfill")) if inspect.backfill else None,
        last_error=None if error is None else error[:MAX_LENGTH],
        updated_at=now,
    )


def _progress(lane: object) -> BackfillProgress:
    if not isinstance(lane, Mapping):
        return BackfillProgress()
    cursor = lane.get("cursor")
    fraction = _number(lane.get("fraction"))
    if fraction is None:
        fraction = _fraction(lane.get("start"), lane.get("until"), cursor)
    return BackfillProgress(
        pages=_count(lane.get("pages")),
        items=_count(lane.get("items")),
        cursor=_short_cursor(cursor),
        fraction=None if fraction is None else min(1.0, max(0.0, fraction)),
    )


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _instant(value: object) -> float | None:
    """A number, or an ISO-8601 time with a zone, as seconds; else ``None``."""
    number = _number(value)
    if number is not None or not isinstance(value, str):
        return number
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return None if parsed.tzinfo is None else parsed.timestamp()


def _fraction(start: object, until: object, cursor: object) -> float | None:
    begin, end, at = _instant(start), _instant(until), _instant(cursor)
    if begin is None or end is None or at is None or end == begin:
        return None
    return (at - begin) / (end - begin)


def _short_cursor(cursor: Any) -> Any:
    if cursor is None or isinstance(cursor, bool | int | float):
        return cursor
    text = cursor if isinstance(cursor, str) else canonical_json(cursor)
    if len(text) <= MAX_CURSOR:
        return cursor
    return text[: MAX_CURSOR - 1] + "…"


# -- records ----------------------------------------------------------------------------------


def status_key(poller: str, partition: str) -> bytes:
    """``key/`` and the key's text form: the bytes any reader of ``<prefix>.status`` sees."""
    return (KEY_PREFIX + key_text(poller, partition)).encode()


def heartbeat_key(runner: str) -> bytes:
    return f"{WORKER_PREFIX}{runner}".encode()


def _json(value: Mapping[str, Any]) -> bytes:
    # orjson writes the same JSON (sorted keys, no spaces, UTF-8 as is) about five times faster
    # than json.dumps: every key's status is written every 30 s. What it cannot write (an
    # integer beyond 64 bits in a backfill cursor, a key that is not a string) json writes.
    try:
        return orjson.dumps(value, default=str, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        return json.dumps(
            value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
        ).encode("utf-8")


def encode_status(status: KeyStatus) -> bytes:
    backfill = status.backfill
    return _json(
        {
            "format_version": FORMAT_VERSION,
            "poller": status.poller,
            "partition": status.partition,
            "state": status.state,
            "owner": status.owner,
            "lag": status.lag,
            "circuit": status.circuit,
            "parked": dict(status.parked),
            "backfill": None
            if backfill is None
            else {
                "pages": backfill.pages,
                "items": backfill.items,
                "cursor": backfill.cursor,
                "fraction": backfill.fraction,
            },
            "last_error": status.last_error,
            "updated_at": status.updated_at,
        }
    )


def encode_heartbeat(heartbeat: Heartbeat) -> bytes:
    return _json(
        {
            "format_version": FORMAT_VERSION,
            "runner": heartbeat.runner,
            "at": heartbeat.at,
            "partitions": list(heartbeat.partitions),
            "restoring": list(heartbeat.restoring),
        }
    )


@dataclass(frozen=True, slots=True)
class StatusRecord:
    """A decoded record: ``value`` is ``None`` for a tombstone."""

    kind: Literal["key", "worker"]
    name: str  # poller/partition, or the runner id
    value: KeyStatus | Heartbeat | None


def decode_record(key: bytes | None, value: bytes | None) -> StatusRecord | None:
    """What a record of the status topic says; ``None`` for a key this release does not know.
    Raises :class:`StateCorrupted` for a value it cannot read (never quoting it)."""
    if key is None:
        return None
    text = key.decode("utf-8", errors="replace")
    if text.startswith(KEY_PREFIX):
        name = text[len(KEY_PREFIX) :]
        try:
            KeyId.parse(name)
        except ValueError:  # not a key this release writes
            return None
        return StatusRecord("key", name, None if value is None else _status(name, value))
    if text.startswith(WORKER_PREFIX):
        name = text[len(WORKER_PREFIX) :]
        return StatusRecord("worker", name, None if value is None else _heartbeat(name, value))
    return None


def _object(what: str, raw: bytes) -> dict[str, Any]:
    return json_record(raw, f"status record of {what}", FORMAT_VERSION)


def _status(name: str, raw: bytes) -> KeyStatus:
    value = _object(f"key {name}", raw)
    try:
        backfill = value.get("backfill")
        state = value["state"]
        if state not in RECORDED:
            raise ValueError(f"unknown state {state!r}")
        return KeyStatus(
            poller=str(value["poller"]),
            partition=str(value["partition"]),
            state=TaskState(state),
            owner=value.get("owner"),
            lag=None if value.get("lag") is None else float(value["lag"]),
            circuit=str(value["circuit"]),
            parked={str(k): int(v) for k, v in dict(value.get("parked") or {}).items()},
            backfill=None
            if backfill is None
            else BackfillProgress(
                pages=_count(backfill.get("pages")),
                items=_count(backfill.get("items")),
                cursor=backfill.get("cursor"),
                fraction=_number(backfill.get("fraction")),
            ),
            last_error=value.get("last_error"),
            updated_at=float(value["updated_at"]),
        )
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise StateCorrupted(f"unreadable status record of key {name}: {exc!r}") from exc


def _heartbeat(name: str, raw: bytes) -> Heartbeat:
    value = _object(f"worker {name}", raw)
    try:
        partitions = tuple(sorted(int(p) for p in value.get("partitions", ())))
        restoring = tuple(sorted(int(p) for p in value.get("restoring", ())))
        return Heartbeat(
            runner=str(value["runner"]),
            at=float(value["at"]),
            partitions=partitions,
            restoring=restoring,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise StateCorrupted(f"unreadable heartbeat of worker {name}: {exc!r}") from exc


# -- the table of what was read ---------------------------------------------------------------


class StatusTable:
    """The latest status of each key and heartbeat of each runner, as read from the topic."""

    def __init__(self) -> None:
        self._keys: dict[str, KeyStatus] = {}
        # Replaced whole on each change, never changed in place: the Kafka thread reads it.
        self._heartbeats: Mapping[str, Heartbeat] = {}

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        """Take one record in; raises :class:`StateCorrupted` for an unreadable value."""
        record = decode_record(key, value)
        if record is None:
            return
        if record.kind == "worker":
            beats = dict(self._heartbeats)
            if isinstance(record.value, Heartbeat):
                beats[record.name] = record.value
            else:
                beats.pop(record.name, None)
            self._heartbeats = beats
        elif isinstance(record.value, KeyStatus):
            self._keys[record.name] = record.value
        else:
            self._keys.pop(record.name, None)

    def put(self, status: KeyStatus) -> None:
        """Take in a key's status read as a record whose value was ``encode_status(status)``
        (the writer's own, known without decoding it)."""
        self._keys[status.key] = status

    def pollers(self) -> list[str]:
        return sorted({status.poller for status in self._keys.values()})

    def owner(self, key: str) -> str | None:
        """Who wrote the latest status of ``key`` (its text form), as read."""
        found = self._keys.get(key)
        return None if found is None else found.owner

    def heartbeats(self) -> dict[str, float]:
        """Runner id -> time of its last heartbeat (clean shutdowns removed)."""
        return {runner: beat.at for runner, beat in self._heartbeats.items()}

    def owned(self, *, now: float, session_timeout: float) -> dict[str, set[int]]:
        """Runner id -> the Kafka partitions it said it owned, for each runner whose last
        heartbeat is younger than ``session_timeout``. Safe to call from any thread."""
        return {
            runner: set(beat.partitions)
            for runner, beat in self._heartbeats.items()
            if now - beat.at <= session_timeout
        }

    def claimed(self, *, now: float, session_timeout: float, but: str | None = None) -> set[int]:
        """Every Kafka partition a live runner (other than ``but``) said it held, restored or
        restoring."""
        return {
            kafka_partition
            for runner, beat in self._heartbeats.items()
            if now - beat.at <= session_timeout and runner != but
            for kafka_partition in (*beat.partitions, *beat.restoring)
        }

    def alive(self, owner: str | None, *, now: float, session_timeout: float) -> bool:
        beat = None if owner is None else self._heartbeats.get(owner)
        return beat is not None and now - beat.at <= session_timeout

    def view(
        self, poller: str | None = None, *, now: float, session_timeout: float
    ) -> list[KeyStatus]:
        """The keys of ``poller`` (default: every poller) by poller and partition key;
        UNASSIGNED where the owner is not alive.

        The ``last_error`` of an UNASSIGNED key says why its live owner does not run it (it
        waits for a newer release); a gone owner's last error is dropped, as it no longer
        says why the key is not run."""
        shown = []
        for status in sorted(self._keys.values(), key=lambda s: (s.poller, s.partition)):
            if poller is not None and status.poller != poller:
                continue
            if not self.alive(status.owner, now=now, session_timeout=session_timeout):
                status = replace(status, state=TaskState.UNASSIGNED, last_error=None)
            shown.append(status)
        return shown


# -- what a publish writes --------------------------------------------------------------------


def _significant(status: KeyStatus) -> tuple[Any, ...]:
    """What counts as a change: not the time, and not the lag's growth (only whether there
    is one); lag and time are refreshed by the periodic full write."""
    return (
        status.poller,
        status.partition,
        status.state,
        status.owner,
        status.lag is None,
        status.circuit,
        status.parked,
        status.backfill,
        status.last_error,
    )


class Outbox:
    """Remembers what was written of each key, to write only what changed, and every key at
    least every ``full_every`` seconds."""

    def __init__(self, full_every: float) -> None:
        self.full_every = full_every
        self._written: dict[str, tuple[KeyStatus, float]] = {}
        # (when, key) of each write in the order made: the keys due again are at its head.
        self._order: deque[tuple[float, str]] = deque()

    def due(self, statuses: Iterable[KeyStatus], now: float) -> list[KeyStatus]:
        return [
            status
            for status in statuses
            if self.stale(status.key, now)
            or _significant(self._written[status.key][0]) != _significant(status)
        ]

    def stale(self, key: str, now: float) -> bool:
        last = self._written.get(key)
        return last is None or now - last[1] >= self.full_every

    def due_again(self, now: float) -> list[str]:
        """The keys last written ``full_every`` seconds before ``now`` or earlier, each once
        (then no longer, until written again): what a round must look at whatever changed."""
        order, written, limit = self._order, self._written, now - self.full_every
        found = []
        while order and order[0][0] <= limit:
            at, key = order.popleft()
            last = written.get(key)
            if last is not None and last[1] == at:  # not written again since
                found.append(key)
        return found

    def written(self, status: KeyStatus, now: float) -> None:
        self._written[status.key] = (status, now)
        self._order.append((now, status.key))

    def forget(self, poller: str, partition: str) -> None:
        self._written.pop(key_text(poller, partition), None)

    def released(self, keys: Iterable[str]) -> list[KeyStatus]:
        """The statuses written of ``keys``, which this runner no longer holds (removed,
        expired, moved away), forgotten as they are returned."""
        return [found[0] for key in keys if (found := self._written.pop(key, None)) is not None]
