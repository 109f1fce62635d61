"""Events as Avro: the envelope of each poller, single-object encoding, decoding by fingerprint.

The envelope ``watukuy.Event`` (``schemas/event.avsc``) carries ``data`` as ``[null, string]``
(the item's canonical JSON) for a poller without a data schema, or ``[null, <its record>]`` for
one with a data schema. Pollers without one share one envelope, hence one fingerprint.

``time`` is ``timestamp-millis``: a decoded event's time is an aware UTC datetime cut to the
millisecond.
"""

from __future__ import annotations

import functools
import io
import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from importlib import resources
from typing import Any, NoReturn

import orjson
from fastavro import parse_schema, schemaless_reader, schemaless_writer

from watukuy.core.errors import StateCorrupted, WatukuyError
from watukuy.core.events import Event, EventType, canonical_json
from watukuy.core.keys import key_text
from watukuy.serde import binary, framing
from watukuy.serde.data import DataSchema, InvalidData

Resolve = Callable[[bytes], framing.Schema]
"""Finds the writer schema of an 8-byte CRC-64-AVRO fingerprint (raise SchemaNotFound)."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

CONFLUENT_MAGIC = b"\x00"
CONFLUENT_HEADER = 5  # the magic byte and a 4-byte schema id, before the Avro body


class SchemaNotFound(WatukuyError, LookupError):
    """No schema is known under that fingerprint or registry id (yet)."""


class UndecodableEvent(WatukuyError, ValueError):
    """The bytes are not a watukuy event in a known encoding."""


@dataclass(frozen=True, eq=False)
class WriterSchema:
    """A writer schema and its JSON text: what the schemas topic or the registry publishes.

    The text keeps logical types and docs (the canonical form drops them); its fingerprint is
    the same as the canonical form's.
    """

    schema: framing.Schema
    text: str
    data: DataSchema | None = None
    header: bytes = field(init=False)  # C3 01 + fingerprint: the single-object prefix
    compiled: bool = field(init=False)  # the hand-written encoder writes it (see binary)
    # The data record's body by the hand-written writer, when the data schema is flat.
    data_body: Callable[[Any], bytes | None] | None = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "header", framing.MAGIC + self.schema.fingerprint)
        object.__setattr__(self, "compiled", _compiled(self.schema, self.data))
        data_body = None if self.data is None else binary.record_writer(self.data.parsed)
        object.__setattr__(self, "data_body", data_body)

    @property
    def fingerprint_hex(self) -> str:
        return self.schema.fingerprint_hex


def _compiled(schema: framing.Schema, data: DataSchema | None) -> bool:
    """Whether :mod:`~watukuy.serde.binary` writes this envelope: the fields it knows, in
    its order, with ``time`` in milliseconds (the canonical form drops the logical type), and
    ``data`` as ``[null, string]`` or ``[null, <data's record>]``."""
    expected = binary.EVENT_CANONICAL + '["null",'
    if data is None:
        expected += '"string"]}]}'
    if not schema.canonical.startswith(expected) or (data is None) != (
        expected == schema.canonical
    ):
        return False
    fields = schema.parsed.get("fields", []) if isinstance(schema.parsed, dict) else []
    times = [f["type"] for f in fields if f.get("name") == "time"]
    return len(times) == 1 and dict(times[0]).get("logicalType") == "timestamp-millis"


def schema_text(name: str) -> str:
    """The text of ``schemas/<name>.avsc`` shipped with the package (``event``, ``dlq``)."""
    return (resources.files("watukuy.serde") / "schemas" / f"{name}.avsc").read_text("utf-8")


@functools.cache
def dlq_schema() -> WriterSchema:
    text = json.dumps(json.loads(schema_text("dlq")), separators=(",", ":"))
    return WriterSchema(framing.Schema.of(text), text)


def envelope(data: DataSchema | None = None) -> WriterSchema:
    """The event envelope with ``data`` as JSON text, or as ``data``'s record."""
    tree = json.loads(schema_text("event"))
    if data is not None:
        for field in tree["fields"]:
            if field["name"] == "data":
                field["type"] = ["null", data.schema]
    text = json.dumps(tree, separators=(",", ":"))
    return WriterSchema(framing.Schema.of(text), text, data)


class EventSchemas:
    """The envelope of each poller, built once; also resolves the fingerprints it built."""

    def __init__(self, data: Mapping[str, DataSchema | None] | None = None) -> None:
        self._data: dict[str, DataSchema | None] = dict(data or {})
        self._built: dict[str, WriterSchema] = {}
        self._by_fingerprint: dict[bytes, WriterSchema] = {}
        self._json: WriterSchema | None = None

    def add(self, poller: str, data: DataSchema | None) -> WriterSchema:
        """Declare (or re-declare) ``poller``'s data schema; returns its envelope."""
        self._data[poller] = data
        self._built.pop(poller, None)
        return self.writer(poller)

    def data(self, poller: str) -> DataSchema | None:
        return self._data.get(poller)

    def writer(self, poller: str) -> WriterSchema:
        """The envelope of ``poller``: the JSON-data one unless it declared a data schema."""
        built = self._built.get(poller)
        if built is None:
            data = self._data.get(poller)
            if data is None:
                if self._json is None:
                    self._json = envelope()
                built = self._json
            else:
                built = envelope(data)
            self._built[poller] = built
            self._by_fingerprint[built.schema.fingerprint] = built
        return built

    def of(self, poller: str) -> framing.Schema:
        return self.writer(poller).schema

    def published(self) -> dict[str, str]:
        """Fingerprint hex -> text of every envelope declared or used: the schemas topic."""
        self._build_declared()
        return {w.fingerprint_hex: w.text for w in self._by_fingerprint.values()}

    def resolve(self, fingerprint: bytes) -> framing.Schema:
        self._build_declared()
        found = self._by_fingerprint.get(fingerprint)
        if found is None:
            raise SchemaNotFound(f"no event schema with fingerprint {fingerprint.hex()}")
        return found.schema

    def _build_declared(self) -> None:
        for poller in self._data:
            self.writer(poller)


# -- records -----------------------------------------------------------------------------------


def event_record(
    event: Event, data: DataSchema | None, *, validated: bool = False
) -> dict[str, Any]:
    """The envelope record of ``event`` as fastavro writes it.

    Without a data schema ``data`` is the item's canonical JSON. With one, fastavro picks the
    union branch by validating the item, which also rejects what its writer would silently
    coerce (1.5 written to an ``int`` field as 1). ``validated=True`` says the caller already
    ran :meth:`DataSchema.validate`: the branch is then named with fastavro's tuple notation
    ``(record name, item)``, skipping the second validation (about half the encode cost).
    """
    payload: Any
    if event.data is None:
        payload = None
    elif data is None:
        payload = data_json(event.data)
    elif validated:
        payload = (data.name, event.data)
    else:
        payload = event.data
    return {
        "id": event.id,
        "poller": event.poller,
        "partition": event.partition,
        "subject": event.subject,
        "type": event.type,
        "version": event.version,
        "sequence": event.sequence,
        "time": event.time,
        "lane": event.lane,
        "schema_version": event.schema_version,
        "data": payload,
    }


_ORJSON_OPTIONS = (
    orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
)


def data_json(value: Any) -> str:
    """The JSON text of an event's ``data``: sorted keys, no spaces, UTF-8 as is.

    orjson writes it (about 8 times faster than :func:`json.dumps` on an invoice); the text is
    that of :func:`~watukuy.core.events.canonical_json` except that a float below 1e-4 is
    written without an exponent's ``+``/leading zero (``0.00001``, not ``1e-05``) and NaN and
    infinities become ``null`` (both parse to the same item; NaN was not JSON anyway), and an
    ``Enum`` member is written as its value, not its ``str()``. Datetimes and dataclasses are
    ``str()``-ed as canonical JSON does; what orjson cannot write (an integer beyond 64 bits, a
    key that is not a string, a lone surrogate) is written by canonical JSON. Ids and
    fingerprints keep canonical JSON: their bytes must never change.
    """
    try:
        return orjson.dumps(value, default=str, option=_ORJSON_OPTIONS).decode()
    except orjson.JSONEncodeError:
        return canonical_json(value)


def _data_utf8(value: Any) -> bytes:
    """``data_json(value).encode()``, without decoding orjson's bytes and encoding them again."""
    try:
        return orjson.dumps(value, default=str, option=_ORJSON_OPTIONS)
    except orjson.JSONEncodeError:
        return canonical_json(value).encode()


def event_of(record: Any) -> Event:
    """The :class:`Event` of a decoded envelope record."""
    if not isinstance(record, Mapping):
        raise UndecodableEvent("not a watukuy event: the value is not a record")
    try:
        data = record.get("data")
        if isinstance(data, str):
            data = json.loads(data)
        return Event(
            id=record["id"],
            poller=record["poller"],
            partition=record["partition"],
            subject=record["subject"],
            type=record["type"],
            version=record["version"],
            sequence=record["sequence"],
            time=_utc(record["time"]),
            lane=record["lane"],
            schema_version=record["schema_version"],
            data=data,
        )
    except KeyError as exc:
        raise UndecodableEvent(f"not a watukuy event: no field {exc}") from None
    except ValueError as exc:
        raise UndecodableEvent(f"not a watukuy event: {exc}") from None


def _utc(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, int):  # read by a schema without the logical type
        return _EPOCH + timedelta(milliseconds=value)
    raise ValueError(f"time is {type(value).__name__}")


@contextmanager
def encoding(event: Event, writer: WriterSchema) -> Iterator[None]:
    """Turns fastavro's errors into :class:`InvalidData` (the data) or ``ValueError``."""
    try:
        yield
    except Exception as exc:  # fastavro raises many types for a value its schema rejects
        _cannot_encode(event, writer, exc)


def _cannot_encode(event: Event, writer: WriterSchema, exc: Exception) -> NoReturn:
    if writer.data is not None and event.data is not None:
        problem = writer.data.validate(event.data)
        if problem is not None:
            raise InvalidData(f"event {event.id}: {problem}") from None
    raise ValueError(f"event {event.id} cannot be encoded: {type(exc).__name__}: {exc}") from exc


_ENVELOPE = binary.EnvelopeFields()  # shared: its caches are per key, not per envelope


def _fast(event: Event, writer: WriterSchema, first: bytes, validated: bool) -> bytes | None:
    """``first`` + the body of ``event`` by the hand-written encoder; ``None`` when it does not
    apply (another envelope, an unusual value): fastavro then writes it or says why not."""
    if not writer.compiled:
        return None
    try:
        fields = _ENVELOPE.head(event, first)
        if fields is None:
            return None
        data = event.data
        if data is None:
            fields.append(b"\x00")
        elif writer.data is None:
            text = _data_utf8(data)
            fields += (binary.json_branch(len(text)), text)
        elif validated:
            fields.append(b"\x02")  # the record branch of [null, record]
            body = None if writer.data_body is None else writer.data_body(data)
            if body is None:  # not a flat record of plain values: fastavro writes it
                out = io.BytesIO()
                schemaless_writer(out, writer.data.parsed, data)
                body = out.getvalue()
            fields.append(body)
        else:
            return None  # fastavro validates the item as it picks the union branch
    except Exception:  # whatever it is, fastavro's path says it as it always did
        return None
    return b"".join(fields)


def write_body(
    out: io.BytesIO, event: Event, writer: WriterSchema, *, validated: bool = False
) -> None:
    """The Avro binary body of ``event`` (both encodings share it)."""
    body = _fast(event, writer, b"", validated)
    if body is not None:
        out.write(body)
        return
    record = event_record(event, writer.data, validated=validated)
    with encoding(event, writer):
        schemaless_writer(out, writer.schema.parsed, record)


# -- single-object encoding --------------------------------------------------------------------


def encode_event(event: Event, schemas: EventSchemas, *, validated: bool = False) -> bytes:
    """``C3 01`` + fingerprint of the poller's envelope + body (``validated``: see
    :func:`event_record`)."""
    writer = schemas.writer(event.poller)
    value = _fast(event, writer, writer.header, validated)
    if value is not None:
        return value
    record = event_record(event, writer.data, validated=validated)
    try:  # not ``with encoding(...)``: a generator context manager per event costs ~1 µs
        return framing.encode(writer.schema, record)
    except Exception as exc:  # fastavro raises many types for a value its schema rejects
        _cannot_encode(event, writer, exc)


def decode_event(raw: bytes, resolve: Resolve) -> Event:
    """Decode a single-object event; ``resolve`` finds its writer schema by fingerprint."""
    try:
        fingerprint = framing.fingerprint_of(raw)
    except StateCorrupted as exc:
        raise UndecodableEvent(str(exc)) from None
    writer = resolve(fingerprint)
    try:
        record = framing.decode(raw, writer)
    except StateCorrupted as exc:
        raise UndecodableEvent(str(exc)) from None
    return event_of(record)


def read_body(raw: bytes, offset: int, writer: framing.Schema) -> Any:
    """The record of an Avro binary body starting at ``offset`` of ``raw``."""
    try:
        return schemaless_reader(io.BytesIO(raw[offset:]), writer.parsed, None)
    except Exception as exc:  # fastavro raises many types for a bad body
        raise UndecodableEvent(f"unreadable Avro body: {type(exc).__name__}: {exc}") from None


@functools.cache
def _head() -> Any:
    """The fields every envelope begins with (``schemas/event.avsc`` up to ``time``; only
    ``data`` differs from one poller to another), as a writer schema of their own: an Avro body
    is its fields one after the other, so reading with it stops before ``lane`` and ``data``,
    whatever the poller's data schema is."""
    tree = json.loads(schema_text("event"))
    names = [f["name"] for f in tree["fields"]]
    tree["fields"] = tree["fields"][: names.index("time") + 1]
    return parse_schema(tree)


@dataclass(frozen=True, slots=True)
class PublishedEvent:
    """What the events topic holds of one event of a key: enough to roll its snapshot forward
    (see :mod:`watukuy.store.kafka.catchup_rule`)."""

    subject: str
    type: EventType
    version: str
    sequence: int
    time: float  # seconds since the epoch: the ``now`` of the poll that detected it


def published_event(raw: bytes, poller: str, partition: str) -> PublishedEvent:
    """What a restore needs of one event of ``poller/partition``, in either encoding, read
    without its writer schema (a restore must not wait on the schemas topic or a registry).

    Raises :class:`UndecodableEvent` for anything else: another encoding, a body that does not
    start like an envelope, or an event of another key.
    """
    if raw[:2] == framing.MAGIC:
        offset = framing.HEADER
    elif raw[:1] == CONFLUENT_MAGIC:
        offset = CONFLUENT_HEADER
    else:
        raise UndecodableEvent(f"unknown encoding (first bytes {raw[:2].hex() or 'none'})")
    try:
        head = schemaless_reader(io.BytesIO(raw[offset:]), _head(), None)
    except Exception as exc:  # fastavro raises many types for a bad body
        raise UndecodableEvent(f"unreadable event head: {type(exc).__name__}: {exc}") from None
    if not isinstance(head, dict) or (head["poller"], head["partition"]) != (poller, partition):
        raise UndecodableEvent(f"not an event of {key_text(poller, partition)}")
    return PublishedEvent(
        head["subject"], head["type"], head["version"], head["sequence"], head["time"].timestamp()
    )
