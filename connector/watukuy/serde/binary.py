"""The records written once per event, encoded by hand: byte for byte what fastavro writes.

Why not fastavro here: its ``schemaless_writer`` walks the schema for every record (a dict
lookup and a type dispatch per field, the ``timestamp-millis`` converted from a datetime each
time): about 8 µs an event envelope and 5 µs a snapshot entry on the development machine, the
largest single cost of the runner in the profile of issue 13. These schemas are fixed and
ours, and much of an event is the same for all of one key's events (poller, partition, time):
written by hand, with those parts encoded once, an envelope costs under 2 µs. A poller's
data record, when it is flat (strings, numbers, booleans, nullable ones: what JSON items
mostly are), is written and validated here too: fastavro picks each ``[null, X]`` branch by
validating the value, about 10 µs for the examples' invoice.

fastavro stays the reference. Each function here returns ``None`` for anything outside the
common case (a value of an unexpected type, a number out of range, a string that is not valid
UTF-8), and the caller then takes fastavro's path, which writes it or raises as before. A
writer is only used for the exact schema (Parsing Canonical Form) it was written for; tests
compare both paths byte for byte (tests/serde/test_serde_binary.py).

Avro binary encoding (spec, "Binary Encoding"): ``int`` and ``long`` are zigzag then base-128
varints, low group first; a string is its UTF-8 length as a long, then the bytes; an enum is
the symbol's index as an int; a union is the branch index as a long, then the value; a
``double`` is 8 bytes little-endian IEEE 754.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from fastavro.logical_writers import LOGICAL_WRITERS

from watukuy.core.events import Event

_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1
_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1


def long_bytes(n: int) -> bytes:
    """An Avro ``long`` (or ``int``) in ``[-2**63, 2**63)``."""
    z = (n << 1) ^ (n >> 63)
    # Sequences pass 4,096 early and then stay below 2**27 for long: two to four bytes
    # written at once (a third faster than the loop).
    if z < 0x4000:
        return bytes(((z & 0x7F) | 0x80, z >> 7)) if z > 0x7F else bytes((z,))
    if z < 0x200000:
        return bytes(((z & 0x7F) | 0x80, ((z >> 7) & 0x7F) | 0x80, z >> 14))
    if z < 0x10000000:
        return bytes(
            ((z & 0x7F) | 0x80, ((z >> 7) & 0x7F) | 0x80, ((z >> 14) & 0x7F) | 0x80, z >> 21)
        )
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


_SMALL = tuple(long_bytes(n) for n in range(4096))  # lengths and counters: one lookup


def _long(n: Any) -> bytes | None:
    if type(n) is not int or not _LONG_MIN <= n <= _LONG_MAX:
        return None
    return _SMALL[n] if 0 <= n < 4096 else long_bytes(n)


def _int(n: Any) -> bytes | None:
    if type(n) is not int or not _INT_MIN <= n <= _INT_MAX:
        return None
    return _SMALL[n] if 0 <= n < 4096 else long_bytes(n)


def _text(value: Any) -> bytes | None:
    """A string (``None`` for anything but a ``str``; UnicodeEncodeError for a lone
    surrogate)."""
    if type(value) is not str:
        return None
    raw = value.encode()
    n = len(raw)
    return (_SMALL[n] if n < 4096 else long_bytes(n)) + raw


def _utf8(raw: bytes) -> bytes:
    """A string already UTF-8 encoded."""
    n = len(raw)
    return (_SMALL[n] if n < 4096 else long_bytes(n)) + raw


def _double(value: Any) -> bytes | None:
    if type(value) is not float and type(value) is not int:
        return None
    return struct.pack("<d", value)


# -- the event envelope (schemas/event.avsc) ---------------------------------------------------

_EVENT_TYPES = {"created": b"\x00", "updated": b"\x02", "deleted": b"\x04"}
_LANES = {"live": b"\x00", "backfill": b"\x02", "reconcile": b"\x04"}
_TIMESTAMP_MILLIS = LOGICAL_WRITERS["long-timestamp-millis"]
_TIME_SCHEMA = {"type": "long", "logicalType": "timestamp-millis"}

EVENT_CANONICAL = (
    '{"name":"watukuy.Event","type":"record","fields":[{"name":"id","type":"string"},'
    '{"name":"poller","type":"string"},{"name":"partition","type":"string"},'
    '{"name":"subject","type":"string"},{"name":"type","type":{"name":"watukuy.EventType",'
    '"type":"enum","symbols":["created","updated","deleted"]}},'
    '{"name":"version","type":"string"},{"name":"sequence","type":"long"},'
    '{"name":"time","type":"long"},{"name":"lane","type":{"name":"watukuy.Lane","type":"enum",'
    '"symbols":["live","backfill","reconcile"]}},{"name":"schema_version","type":"int"},'
    '{"name":"data","type":'
)
"""The Parsing Canonical Form of every envelope up to its ``data`` type, the part
:class:`EnvelopeFields` writes (``data`` is ``["null","string"]`` or ``["null",<record>]``)."""


class EnvelopeFields:
    """Writes the envelope's fields before ``data``; what one key's events share (poller and
    partition; a page's time, lane and schema version) is encoded once and kept until an event
    comes that differs in it.

    One instance may be used from several threads: each cache is one tuple, replaced whole.
    """

    __slots__ = ("_key", "_tail")

    def __init__(self) -> None:
        self._key: tuple[str, str, bytes] | None = None
        self._tail: tuple[object, object, object, bytes] | None = None

    def head(self, event: Event, first: bytes = b"") -> list[bytes] | None:
        """``first``, then the encoded fields ``id`` .. ``schema_version`` of ``event``; or
        ``None`` when it is not the common case. May raise (a lone surrogate in a string, an
        unhashable ``type``): callers take fastavro's path then too, which writes the event or
        says what is wrong with it."""
        key = self._key
        poller, partition = event.poller, event.partition
        if key is None or key[0] is not poller or key[1] is not partition:
            both = strings(poller, partition)
            if both is None:
                return None
            key = (poller, partition, both)
            self._key = key
        time, lane, schema_version = event.time, event.lane, event.schema_version
        tail = self._tail
        # By identity: a page's events share these objects, and an equal value of another
        # type (True for 1) must not reuse another's bytes.
        if (
            tail is None
            or tail[0] is not time
            or tail[1] is not lane
            or tail[2] is not schema_version
        ):
            millis = _long(_TIMESTAMP_MILLIS(time, _TIME_SCHEMA))
            lane_field, version_field = _LANES.get(lane), _int(schema_version)
            if millis is None or lane_field is None or version_field is None:
                return None
            tail = (time, lane, schema_version, millis + lane_field + version_field)
            self._tail = tail
        fields = [
            first,
            _text(event.id),
            key[2],
            _text(event.subject),
            _EVENT_TYPES.get(event.type),
            _text(event.version),
            _long(event.sequence),
            tail[3],
        ]
        if None in fields:
            return None
        return fields  # type: ignore[return-value]


def json_branch(size: int) -> bytes:
    """What comes before a JSON-data envelope's ``data`` text of ``size`` UTF-8 bytes: the
    ``string`` branch of ``["null", "string"]`` and the length (the text follows as is)."""
    return _JSON_BRANCHES[size] if size < 4096 else b"\x02" + long_bytes(size)


_JSON_BRANCHES = tuple(b"\x02" + _SMALL[n] for n in range(4096))


# -- a poller's data record --------------------------------------------------------------------


def _boolean(value: Any) -> bytes | None:
    if type(value) is not bool:
        return None
    return b"\x01" if value else b"\x00"


def _exact_double(value: Any) -> bytes | None:
    # Only a float: fastavro writes an int given for a double too, but then it also picks a
    # union branch by validating, which this writer does not repeat.
    if type(value) is not float:
        return None
    return struct.pack("<d", value)


_PRIMITIVES: dict[str, Callable[[Any], bytes | None]] = {
    "string": _text,
    "long": _long,
    "int": _int,
    "double": _exact_double,
    "boolean": _boolean,
}
_MISSING = object()


def _flat_plan(parsed: Any) -> list[tuple[str, str, bytes | None, bytes]] | None:
    """``(field, primitive, null branch, value branch)`` per field of a flat record schema
    (branches ``None``/``b""`` outside a union); ``None`` for any other schema."""
    if not isinstance(parsed, dict) or parsed.get("type") != "record":
        return None
    plan: list[tuple[str, str, bytes | None, bytes]] = []
    for field in parsed.get("fields", ()):
        kind = field.get("type")
        null: bytes | None = None
        branch = b""
        if isinstance(kind, list):
            if len(kind) != 2 or "null" not in kind:
                return None
            position = kind.index("null")
            null, branch = _SMALL[position], _SMALL[1 - position]
            kind = kind[1 - position]
        if not isinstance(kind, str) or kind not in _PRIMITIVES:
            return None
        plan.append((field["name"], kind, null, branch))
    return plan


def record_writer(parsed: Any) -> Callable[[Any], bytes | None] | None:
    """A writer of the body of ``parsed`` (a record schema parsed by fastavro) when every field
    is one of ``string``, ``long``, ``int``, ``double``, ``boolean``, or a union of ``null``
    and one of those; ``None`` for any other schema (fastavro writes those).

    The writer returns ``None`` for an item it does not write exactly as fastavro would: not
    a ``dict``, a field missing (fastavro would write its default), a value of another type
    than the field's (an ``int`` for a ``double``, a ``bool`` for a ``long``), or out of range.
    Its fastavro counterpart is ``schemaless_writer`` with the item as it is; items come from
    JSON, so most are flat records of these types and take this path.
    """
    plan = _flat_plan(parsed)
    if plan is None:
        return None
    steps = tuple((name, _PRIMITIVES[kind], null, branch) for name, kind, null, branch in plan)

    def body(item: Any) -> bytes | None:
        if type(item) is not dict:
            return None
        out: list[bytes] = []
        for name, write, null, branch in steps:
            value = item.get(name, _MISSING)
            if value is None and null is not None:
                out.append(null)
                continue
            encoded = write(value)
            if encoded is None:
                return None
            if null is not None:
                out.append(branch)
            out.append(encoded)
        return b"".join(out)

    return body


_TYPES: dict[str, frozenset[type]] = {
    "string": frozenset({str}),
    "long": frozenset({int}),
    "int": frozenset({int}),
    "double": frozenset({float}),
    "boolean": frozenset({bool}),
}
_BOUNDS = {"long": (_LONG_MIN, _LONG_MAX), "int": (_INT_MIN, _INT_MAX)}


def record_check(parsed: Any) -> Callable[[Any], bool] | None:
    """For the schemas :func:`record_writer` writes: a test that is true only of items that
    fastavro's ``validate`` accepts (a ``dict`` with every field present, of exactly its type
    and in range), so a validator can skip fastavro for them. False says nothing: fastavro
    decides (an ``int`` for a ``double``, a missing field with a default are valid too)."""
    plan = _flat_plan(parsed)
    if plan is None:
        return None
    steps = tuple(
        (name, _TYPES[kind] | ({type(None)} if null is not None else set()), _BOUNDS.get(kind))
        for name, kind, null, _ in plan
    )

    def check(item: Any) -> bool:
        if type(item) is not dict:
            return False
        for name, types, bounds in steps:
            value = item.get(name, _MISSING)
            if type(value) not in types:
                return False
            if bounds is not None and value is not None and not bounds[0] <= value <= bounds[1]:
                return False
        return True

    return check


# -- the snapshot entry (schemas/state/snapshot_entry.avsc) -----------------------------------

SNAPSHOT_ENTRY_CANONICAL = (
    '{"name":"watukuy.state.SnapshotEntry","type":"record","fields":['
    '{"name":"format_version","type":"int"},{"name":"poller","type":"string"},'
    '{"name":"partition","type":"string"},{"name":"identity","type":"string"},'
    '{"name":"version","type":"string"},{"name":"seen","type":"double"},'
    '{"name":"scan","type":"long"},{"name":"deleted","type":["null","double"]}]}'
)


def snapshot_entry(
    format_version: int,
    key: bytes,
    identity: Any,
    version: Any,
    seen: Any,
    scan: Any,
    deleted: Any,
) -> bytes | None:
    """The body of a snapshot entry; ``key`` is ``poller`` and ``partition`` already encoded
    (:func:`strings`)."""
    fields = [
        _int(format_version),
        key,
        _text(identity),
        _text(version),
        entry_tail(seen, scan, deleted),
    ]
    if None in fields:
        return None
    return b"".join(fields)  # type: ignore[arg-type]


def entry_tail(seen: Any, scan: Any, deleted: Any) -> bytes | None:
    """A snapshot entry's fields after ``version`` (``seen``, ``scan``, ``deleted``), which
    every entry one page writes shares: encoded once for them all."""
    first, second = _double(seen), _long(scan)
    if first is None or second is None:
        return None
    if deleted is None:
        return first + second + b"\x00"
    gone = _double(deleted)
    return None if gone is None else first + second + b"\x02" + gone


def text(value: Any) -> bytes | None:
    """A ``string`` field (``None`` for anything but a ``str``; UnicodeEncodeError for a lone
    surrogate)."""
    return _text(value)


def strings(*values: str) -> bytes | None:
    """Consecutive string fields, encoded (``None`` when one is not a plain ``str``)."""
    out = [_text(value) for value in values]
    if None in out:
        return None
    return b"".join(out)  # type: ignore[arg-type]


encode_long = _long
"""A ``long`` (``None`` for anything but an ``int`` in range)."""
encode_int = _int
"""An ``int`` (``None`` for anything but an ``int`` in range)."""
encode_double = _double
"""A ``double`` (``None`` for anything but a number)."""


__all__ = [
    "EVENT_CANONICAL",
    "SNAPSHOT_ENTRY_CANONICAL",
    "EnvelopeFields",
    "encode_double",
    "encode_int",
    "encode_long",
    "entry_tail",
    "json_branch",
    "long_bytes",
    "record_check",
    "record_writer",
    "snapshot_entry",
    "strings",
    "text",
]
