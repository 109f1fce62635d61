"""Avro encoding of the internal state values: partition state, snapshot entry, parked item,
command; :mod:`watukuy.store.kafka.records` names their record keys.

Each value is Avro single-object encoded (:mod:`watukuy.serde.framing`) with a schema from
``schemas/state/*.avsc``. Older versions of those schemas live in ``schemas/state/history/``:
a value is decoded with the schema its fingerprint names (current or history) as writer and
the current schema as reader, so Avro schema resolution fills the fields added since with
their defaults. Every record carries ``format_version`` for changes resolution cannot express.

Values that are arbitrary JSON (cursors, a backfill's ``until``, a parked item and event,
command arguments) are stored as canonical JSON strings; ``None`` is Avro ``null`` where the
field is optional.

Anything that cannot be decoded (no single-object header, a bad body, bad embedded JSON)
raises :class:`StateCorrupted`; a value from a newer release (a higher ``format_version``, or
a fingerprint no schema of this release has) raises its subclass ``NewerRelease``. Messages
never include the value. Encoding a value the schema does not admit (an unknown command op,
a float sequence) raises :class:`ValueError`: that is a bug of the caller, not corrupted
state.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any, TypeVar

from watukuy.core.circuit import Circuit, CircuitState
from watukuy.core.commands import Command
from watukuy.core.errors import NewerRelease, StateCorrupted
from watukuy.core.events import canonical_json
from watukuy.core.keys import key_text
from watukuy.core.schedule import KeySchedule
from watukuy.core.state import LaneState, ParkedItem, PartitionState, SnapshotEntry, Validators
from watukuy.serde import binary, framing, state_binary

__all__ = [
    "FORMAT_VERSION",
    "SCHEMAS",
    "decode_command",
    "decode_item",
    "decode_parked",
    "decode_state",
    "encode_command",
    "encode_item",
    "encode_parked",
    "encode_state",
]

NAMESPACE = "watukuy.state"
STATE = f"{NAMESPACE}.PartitionState"
ITEM = f"{NAMESPACE}.SnapshotEntry"
PARKED = f"{NAMESPACE}.ParkedItem"
COMMAND = f"{NAMESPACE}.Command"

FORMAT_VERSION = 1
"""``format_version`` written by this release. A value with a higher one, or with a schema
fingerprint this release does not know, raises :class:`~watukuy.core.errors.NewerRelease`
(a ``StateCorrupted``): during a rolling upgrade the store lets such a key wait for an
instance that reads it instead of failing."""

_DIRECTORY = ("schemas", "state")
_HISTORY = "history"


@dataclass(frozen=True)
class Schemas:
    """The current schema of each value, and every known writer schema by fingerprint."""

    current: dict[str, framing.Schema]  # full name -> schema
    writers: dict[str, dict[bytes, framing.Schema]]  # full name -> fingerprint -> schema

    def writer(self, name: str, raw: bytes) -> framing.Schema:
        """The schema ``raw`` was written with: ``StateCorrupted`` if it is a value of
        another kind, ``NewerRelease`` if no schema of this release has its fingerprint (a
        later release changed the schema; this one cannot read it, and must not guess)."""
        fingerprint = framing.fingerprint_of(raw)
        found = self.writers[name].get(fingerprint)
        if found is not None:
            return found
        for other, schemas in self.writers.items():
            if fingerprint in schemas:
                raise StateCorrupted(
                    f"unreadable {_short(name)} record: it is a {_short(other)} record"
                )
        raise NewerRelease(
            f"unreadable {_short(name)} record: no known schema has fingerprint "
            f"{fingerprint.hex()} (written by a newer release, or not a {_short(name)})"
        )


def _short(name: str) -> str:
    return name.rpartition(".")[2]


def _full_name(schema: Mapping[str, Any]) -> str:
    name = str(schema["name"])
    namespace = schema.get("namespace")
    return name if "." in name or not namespace else f"{namespace}.{name}"


def _avsc(directory: Traversable) -> Iterator[tuple[str, framing.Schema]]:
    for entry in sorted(directory.iterdir(), key=lambda e: e.name):
        if entry.is_file() and entry.name.endswith(".avsc"):
            given = json.loads(entry.read_text(encoding="utf-8"))
            yield _full_name(given), framing.Schema.of(given)


def load(directory: Traversable) -> Schemas:
    """Parse the current schemas in ``directory`` and the older ones in its ``history/``."""
    current: dict[str, framing.Schema] = {}
    writers: dict[str, dict[bytes, framing.Schema]] = {}
    for name, schema in _avsc(directory):
        if name in current:
            raise RuntimeError(f"two current schemas named {name} in {directory}")
        current[name] = schema
        writers.setdefault(name, {})[schema.fingerprint] = schema
    history = directory.joinpath(_HISTORY)
    if history.is_dir():
        for name, schema in _avsc(history):
            if name not in current:
                raise RuntimeError(f"history schema {name} has no current version")
            writers[name].setdefault(schema.fingerprint, schema)
    missing = {STATE, ITEM, PARKED, COMMAND} - current.keys()
    if missing:
        raise RuntimeError(f"missing state schemas: {', '.join(sorted(missing))}")
    return Schemas(current, writers)


SCHEMAS = load(resources.files(__package__ or "watukuy.serde").joinpath(*_DIRECTORY))

_CIRCUIT_SYMBOL = {state: state.name for state in CircuitState}
_CIRCUIT_STATE = {state.name: state for state in CircuitState}


# -- encoding -------------------------------------------------------------------------------


def _json(value: Any) -> str:
    return canonical_json(value)


def _optional_json(value: Any) -> str | None:
    return None if value is None else canonical_json(value)


def _encode(name: str, value: dict[str, Any], what: str) -> bytes:
    value["format_version"] = FORMAT_VERSION
    try:
        return framing.encode(SCHEMAS.current[name], value)
    except (TypeError, ValueError, AttributeError, KeyError, OverflowError) as exc:
        reason = str(exc)
        if len(reason) > 300:
            reason = reason[:300] + "..."
        raise ValueError(f"cannot encode {what} as {_short(name)}: {reason}") from exc


def _lane_out(lane: LaneState) -> dict[str, Any]:
    return {
        "cursor": _optional_json(lane.cursor),
        "active": lane.active,
        "replaying": lane.replaying,
        "scan": lane.scan,
        "until": _optional_json(lane.until),
    }


_STATE_BY_HAND = SCHEMAS.current[STATE].canonical == state_binary.PARTITION_STATE_CANONICAL
_STATE_HEAD = framing.MAGIC + SCHEMAS.current[STATE].fingerprint


def encode_state(state: PartitionState) -> bytes:
    if _STATE_BY_HAND:  # by hand, byte for byte what fastavro writes (serde.binary)
        body = state_binary.partition_state(FORMAT_VERSION, state, _optional_json)
        if body is not None:
            return _STATE_HEAD + body
    return _encode(STATE, _state_record(state), f"state of {state.key}")


def _state_record(state: PartitionState) -> dict[str, Any]:
    """``state`` as fastavro writes it (the reference the hand-written path is tested on)."""
    circuit = state.circuit
    return {
        "poller": state.poller,
        "partition": state.partition,
        "live": _lane_out(state.live),
        "schedule": {
            "interval": state.schedule.interval,
            "next_due": state.schedule.next_due,
            "throttle_until": state.schedule.throttle_until,
        },
        "backfill": _lane_out(state.backfill),
        "reconcile": _lane_out(state.reconcile),
        "reconcile_due": state.reconcile_due,
        "circuit": {
            "state": _CIRCUIT_SYMBOL[circuit.state],
            "consecutive_failures": circuit.consecutive_failures,
            "opened_at": circuit.opened_at,
            "cooldown": circuit.cooldown,
            "probe_in_flight": circuit.probe_in_flight,
        },
        "sequence": state.sequence,
        "validators": [
            {"url": url, "etag": v.etag, "last_modified": v.last_modified}
            for url, v in state.validators
        ],
        "paused": state.paused,
        "paused_at": state.paused_at,
        "epoch": state.epoch,
        "last_success": state.last_success,
        "last_error": state.last_error,
        "created": state.created,
        "format_version": FORMAT_VERSION,
    }


def encode_item(poller: str, partition: str, identity: str, entry: SnapshotEntry) -> bytes:
    value = {
        "poller": poller,
        "partition": partition,
        "identity": identity,
        "version": entry.version,
        "seen": entry.seen,
        "scan": entry.scan,
        "deleted": entry.deleted,
    }
    return _encode(ITEM, value, f"snapshot entry of {key_text(poller, partition)}")


def encode_parked(item: ParkedItem) -> bytes:
    value = {
        "id": item.id,
        "poller": item.poller,
        "partition": item.partition,
        "kind": item.kind,
        "item": _json(item.item),
        "error": item.error,
        "attempts": item.attempts,
        "parked_at": item.parked_at,
        "lane": item.lane,
        "subject": item.subject,
        "event": _optional_json(item.event),
    }
    return _encode(PARKED, value, f"parked item of {key_text(item.poller, item.partition)}")


def encode_command(command: Command) -> bytes:
    """The command's value (where it waits, its record's key, is the store's business)."""
    value = {
        "id": command.id,
        "op": command.op,
        "poller": command.poller,
        "partition": command.partition,
        "args": _json(command.args),
        "issued_at": command.issued_at,
    }
    return _encode(COMMAND, value, f"command {command.op!r} for {command.key}")


# -- decoding -------------------------------------------------------------------------------

T = TypeVar("T")


def _decode(name: str, raw: bytes, build: Callable[[dict[str, Any]], T]) -> T:
    what = _short(name)
    writer = SCHEMAS.writer(name, raw)
    value = framing.decode(raw, writer, SCHEMAS.current[name])
    if not isinstance(value, dict):
        raise StateCorrupted(f"unreadable {what} record: not a record")
    version = value.get("format_version")
    if not isinstance(version, int):
        raise StateCorrupted(f"unreadable {what} record: format_version {version!r}")
    if version > FORMAT_VERSION:
        raise NewerRelease(
            f"unreadable {what} record: format_version {version} is newer than "
            f"{FORMAT_VERSION} (written by a newer release)"
        )
    try:
        return build(value)
    except (KeyError, TypeError, ValueError) as exc:  # json.JSONDecodeError is a ValueError
        raise StateCorrupted(f"unreadable {what} record: {type(exc).__name__}: {exc}") from exc


def _from_json(text: str) -> Any:
    return json.loads(text)


def _optional_from_json(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _lane_in(raw: dict[str, Any]) -> LaneState:
    return LaneState(
        cursor=_optional_from_json(raw["cursor"]),
        active=raw["active"],
        replaying=raw["replaying"],
        scan=raw["scan"],
        until=_optional_from_json(raw["until"]),
    )


def _state(raw: dict[str, Any]) -> PartitionState:
    circuit = raw["circuit"]
    schedule = raw["schedule"]
    return PartitionState(
        poller=raw["poller"],
        partition=raw["partition"],
        live=_lane_in(raw["live"]),
        schedule=KeySchedule(
            interval=schedule["interval"],
            next_due=schedule["next_due"],
            throttle_until=schedule["throttle_until"],
        ),
        backfill=_lane_in(raw["backfill"]),
        reconcile=_lane_in(raw["reconcile"]),
        reconcile_due=raw["reconcile_due"],
        circuit=Circuit(
            state=_CIRCUIT_STATE[circuit["state"]],
            consecutive_failures=circuit["consecutive_failures"],
            opened_at=circuit["opened_at"],
            cooldown=circuit["cooldown"],
            probe_in_flight=circuit["probe_in_flight"],
        ),
        sequence=raw["sequence"],
        validators=tuple(
            (v["url"], Validators(etag=v["etag"], last_modified=v["last_modified"]))
            for v in raw["validators"]
        ),
        paused=raw["paused"],
        paused_at=raw["paused_at"],
        epoch=raw["epoch"],
        last_success=raw["last_success"],
        last_error=raw["last_error"],
        created=raw["created"],
    )


def decode_state(raw: bytes) -> PartitionState:
    return _decode(STATE, raw, _state)


def decode_item(raw: bytes) -> tuple[str, str, SnapshotEntry]:
    """``("poller/partition", identity, entry)``."""
    if _ITEM_BY_HAND and raw[2:HEADER] == _ITEM_FINGERPRINT and raw[:2] == framing.MAGIC:
        try:
            read = _item_by_hand(raw)
        except (IndexError, ValueError, struct.error):  # UnicodeDecodeError is a ValueError
            read = None
        if read is not None:
            return read

    def build(value: dict[str, Any]) -> tuple[str, str, SnapshotEntry]:
        entry = SnapshotEntry(
            version=value["version"],
            seen=value["seen"],
            scan=value["scan"],
            deleted=value["deleted"],
        )
        return key_text(value["poller"], value["partition"]), value["identity"], entry

    return _decode(ITEM, raw, build)


# Snapshot entries are read by hand when written with the current schema: a key is decoded
# when it is loaded, a thousand or more entries at once, and fastavro's reader walks the
# schema for each (6-7 µs an entry here, under 3 µs by hand). Like serde.binary's writers, only
# for the exact schema it was written for; anything unusual (a newer format_version, trailing
# bytes, a negative length) returns None and fastavro's path reads it or raises as before.
# Tests compare both paths.
HEADER = framing.HEADER
_ITEM_FINGERPRINT = SCHEMAS.current[ITEM].fingerprint
_ITEM_BY_HAND = SCHEMAS.current[ITEM].canonical == binary.SNAPSHOT_ENTRY_CANONICAL
_DOUBLE = struct.Struct("<d").unpack_from


def _long(buf: bytes, pos: int) -> tuple[int, int]:
    """An Avro ``long`` at ``pos`` (zigzag varint) and the position after it."""
    byte = buf[pos]
    pos += 1
    value = byte & 0x7F
    shift = 7
    while byte & 0x80:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
    return (value >> 1) ^ -(value & 1), pos


def _string(buf: bytes, pos: int) -> tuple[str, int]:
    size = buf[pos]
    if size < 0x80 and not size & 1:  # the common case: a short string, one length byte
        size >>= 1
        pos += 1
    else:
        size, pos = _long(buf, pos)
        if size < 0:
            raise ValueError("negative string length")
    end = pos + size
    if end > len(buf):
        raise ValueError("string past the end")
    return buf[pos:end].decode(), end


def _item_by_hand(raw: bytes) -> tuple[str, str, SnapshotEntry] | None:
    version, pos = _long(raw, HEADER)
    if version > FORMAT_VERSION:
        return None  # fastavro's path says so
    poller, pos = _string(raw, pos)
    partition, pos = _string(raw, pos)
    identity, pos = _string(raw, pos)
    item_version, pos = _string(raw, pos)
    (seen,) = _DOUBLE(raw, pos)
    scan, pos = _long(raw, pos + 8)
    branch, pos = _long(raw, pos)
    deleted: float | None = None
    if branch == 1:
        (deleted,) = _DOUBLE(raw, pos)
        pos += 8
    elif branch != 0:
        return None
    if pos != len(raw):
        return None
    return key_text(poller, partition), identity, SnapshotEntry(item_version, seen, scan, deleted)


def decode_parked(raw: bytes) -> ParkedItem:
    def build(value: dict[str, Any]) -> ParkedItem:
        return ParkedItem(
            id=value["id"],
            poller=value["poller"],
            partition=value["partition"],
            kind=value["kind"],
            item=_from_json(value["item"]),
            error=value["error"],
            attempts=value["attempts"],
            parked_at=value["parked_at"],
            lane=value["lane"],
            subject=value["subject"],
            event=_optional_from_json(value["event"]),
        )

    return _decode(PARKED, raw, build)


def decode_command(raw: bytes) -> Command:

    def build(value: dict[str, Any]) -> Command:
        args = _from_json(value["args"])
        if not isinstance(args, dict):
            raise TypeError("args is not a JSON object")
        return Command(
            id=value["id"],
            op=value["op"],
            poller=value["poller"],
            partition=value["partition"],
            args=args,
            issued_at=value["issued_at"],
        )

    return _decode(COMMAND, raw, build)
