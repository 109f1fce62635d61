"""The hand-written encoders write byte for byte what fastavro writes, or leave it to fastavro.

The reference is the path every value took before the hand-written one existed: the record
dict (``event_record``, ``encode_item``'s fields) given to fastavro's ``schemaless_writer``
behind the single-object header. Whatever a value is, the new path gives the same bytes or
the same error.
"""

from __future__ import annotations

import io
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from fastavro import schemaless_writer
from fastavro.validation import validate as avro_validate
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from watukuy.core.events import Event
from watukuy.core.state import SnapshotEntry
from watukuy.serde import binary, framing
from watukuy.serde.data import DataSchema
from watukuy.serde.events import EventSchemas, encode_event, event_record, write_body
from watukuy.serde.state import ITEM, encode_item
from watukuy.serde.state import SCHEMAS as STATE

INVOICE = {
    "type": "record",
    "name": "Invoice",
    "namespace": "acme",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "currency", "type": ["null", "string"], "default": None},
        {
            "name": "lines",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "Line",
                    "fields": [{"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}],
                },
            },
            "default": [],
        },
        {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["open", "paid"]}},
    ],
}
SCHEMAS = EventSchemas({"json": None, "invoices": DataSchema.load(INVOICE, "pollers[0].schema")})

LONG = st.integers(-(2**63), 2**63 - 1)
INT = st.integers(-(2**31), 2**31 - 1)
# Short and ASCII mostly; long enough at times for a multi-byte length, and any code point.
TEXT = st.text(max_size=20) | st.text(min_size=60, max_size=300) | st.just("x" * 5000)
TIMES = st.datetimes(
    min_value=datetime(1900, 1, 1),
    max_value=datetime(2200, 1, 1),
    timezones=st.just(UTC)
    | st.builds(timezone, st.integers(-720, 720).map(lambda m: timedelta(minutes=m))),
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
INVOICES = st.fixed_dictionaries(
    {
        "id": TEXT,
        "amount": st.floats(allow_nan=False) | st.integers(-(2**53), 2**53),
        "currency": st.none() | TEXT,
        "lines": st.lists(st.fixed_dictionaries({"sku": TEXT, "qty": INT}), max_size=3),
        "state": st.sampled_from(["open", "paid"]),
    }
)


def events(poller: str, data: st.SearchStrategy[Any]) -> st.SearchStrategy[Event]:
    return st.builds(
        Event,
        id=TEXT,
        poller=st.just(poller),
        partition=TEXT,
        subject=TEXT,
        type=st.sampled_from(["created", "updated", "deleted"]),
        version=TEXT,
        sequence=LONG,
        time=TIMES,
        lane=st.sampled_from(["live", "backfill", "reconcile"]),
        schema_version=INT,
        data=st.none() | data,
    )


def fastavro_event(event: Event, validated: bool) -> bytes:
    writer = SCHEMAS.writer(event.poller)
    return framing.encode(writer.schema, event_record(event, writer.data, validated=validated))


def outcome(write: Any) -> bytes | type[BaseException]:
    try:
        value: bytes = write()
    except Exception as exc:
        return type(exc)
    return value


def test_the_shipped_envelopes_and_snapshot_entry_are_written_by_hand() -> None:
    """Otherwise everything below compares fastavro with itself."""
    assert SCHEMAS.writer("json").compiled
    assert SCHEMAS.writer("invoices").compiled
    assert STATE.current[ITEM].canonical == binary.SNAPSHOT_ENTRY_CANONICAL


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(event=events("json", JSON), validated=st.booleans())
def test_json_data_events_are_the_bytes_fastavro_writes(event: Event, validated: bool) -> None:
    assert encode_event(event, SCHEMAS, validated=validated) == fastavro_event(event, validated)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(event=events("invoices", INVOICES), validated=st.booleans())
def test_data_schema_events_are_the_bytes_fastavro_writes(event: Event, validated: bool) -> None:
    assert encode_event(event, SCHEMAS, validated=validated) == fastavro_event(event, validated)
    # The Confluent framing shares the body.
    writer = SCHEMAS.writer("invoices")
    body = io.BytesIO()
    write_body(body, event, writer, validated=validated)
    reference = io.BytesIO()
    schemaless_writer(reference, writer.schema.parsed, event_record(event, writer.data))
    assert body.getvalue() == reference.getvalue()


@settings(max_examples=200)
@given(events=st.lists(events("json", JSON), min_size=2, max_size=6), time=TIMES)
def test_one_keys_events_sharing_a_time_and_key_between_others(
    events: list[Event], time: datetime
) -> None:
    """The per-key and per-time parts are encoded once: a cache must never leak into the
    next key's or time's events."""
    shared = [replace(e, poller="json", partition="p/1", time=time) for e in events[:3]]
    for event in shared + events + shared:
        assert encode_event(event, SCHEMAS) == fastavro_event(event, False)


@pytest.mark.parametrize(
    "odd",
    [
        {"sequence": 2**63},  # beyond a long: fastavro refuses it
        {"sequence": 1.5},
        {"sequence": True},
        {"schema_version": 2**31},
        {"subject": "lone \udc80 surrogate"},
        {"id": b"bytes"},
        {"type": "moved"},
        {"lane": ["unhashable"]},
        {"time": 1_700_000_000_000},  # already milliseconds
        {"time": datetime(2024, 5, 1, 12, 0, 0, 999_999)},  # naive: fastavro takes it as local
        {"data": {"amount": 2**70}},  # orjson refuses, canonical JSON writes it
        {"data": {"bad": "\udc80"}},
    ],
)
def test_unusual_values_give_what_fastavro_gives(odd: dict[str, Any]) -> None:
    event = Event(
        "id-1",
        "json",
        "t-1",
        "s-1",
        "created",
        "v1",
        7,
        datetime(2026, 1, 1, tzinfo=UTC),
        "live",
        1,
        {"a": 1},
    )
    event = replace(event, **odd)
    new = outcome(lambda: encode_event(event, SCHEMAS))
    old = outcome(lambda: fastavro_event(event, False))
    if isinstance(old, bytes):
        assert new == old
    else:  # fastavro's error, as encode_event always reported it
        assert isinstance(new, type) and issubclass(new, ValueError | TypeError | OverflowError)


# -- snapshot entries --------------------------------------------------------------------------


def fastavro_item(poller: str, partition: str, identity: str, entry: SnapshotEntry) -> bytes:
    value = {
        "poller": poller,
        "partition": partition,
        "identity": identity,
        "version": entry.version,
        "seen": entry.seen,
        "scan": entry.scan,
        "deleted": entry.deleted,
        "format_version": 1,
    }
    return framing.encode(STATE.current[ITEM], value)


SEEN = st.floats() | st.integers(-(2**53), 2**53)


@settings(max_examples=400)
@given(
    poller=TEXT,
    partition=TEXT,
    identity=TEXT,
    version=TEXT,
    seen=SEEN,
    scan=LONG,
    deleted=st.none() | SEEN,
)
def test_snapshot_entries_are_the_bytes_fastavro_writes(
    poller: str, partition: str, identity: str, version: str, seen: Any, scan: int, deleted: Any
) -> None:
    entry = SnapshotEntry(version, seen, scan, deleted)
    expected = fastavro_item(poller, partition, identity, entry)
    assert encode_item(poller, partition, identity, entry) == expected
    key = binary.strings(poller, partition)
    assert key is not None
    header = expected[: framing.HEADER]
    assert (
        header + (binary.snapshot_entry(1, key, identity, version, seen, scan, deleted) or b"")
        == expected
    )


BOUNDARIES = sorted(
    {
        value
        for bit in range(64)
        for value in (2**bit - 1, 2**bit, -(2**bit), -(2**bit) - 1)
        if -(2**63) <= value < 2**63
    }
)


@pytest.mark.parametrize("value", BOUNDARIES)
def test_longs_at_every_varint_length_boundary(value: int) -> None:
    reference = io.BytesIO()
    schemaless_writer(reference, "long", value)
    assert binary.long_bytes(value) == reference.getvalue()


# -- flat data records -------------------------------------------------------------------------

FLAT: dict[str, Any] = {
    "type": "record",
    "name": "Flat",
    "namespace": "acme",
    "fields": [
        {"name": "s", "type": "string"},
        {"name": "l", "type": "long"},
        {"name": "i", "type": "int"},
        {"name": "d", "type": "double"},
        {"name": "b", "type": "boolean"},
        {"name": "ns", "type": ["null", "string"], "default": None},
        {"name": "nd", "type": ["null", "double"], "default": None},
        {"name": "ln", "type": ["long", "null"], "default": 0},
        {"name": "nb", "type": ["null", "boolean"], "default": None},
    ],
}
FLAT_SCHEMAS = EventSchemas({"flat": DataSchema.load(FLAT, "pollers[0].schema")})
ANY_VALUE = st.none() | st.booleans() | st.integers() | st.floats() | TEXT
FLAT_ITEMS = st.fixed_dictionaries(
    {
        "s": TEXT,
        "l": LONG,
        "i": INT,
        "d": st.floats(),
        "b": st.booleans(),
        "ns": st.none() | TEXT,
        "nd": st.none() | st.floats(),
        "ln": st.none() | LONG,
        "nb": st.none() | st.booleans(),
    },
    optional={"extra": ANY_VALUE},
)


def flat_event(item: Any) -> Event:
    return Event(
        "id-1",
        "flat",
        "t-1",
        "s-1",
        "created",
        "v1",
        7,
        datetime(2026, 1, 1, tzinfo=UTC),
        "live",
        1,
        item,
    )


def fastavro_flat(event: Event) -> bytes:
    writer = FLAT_SCHEMAS.writer("flat")
    return framing.encode(writer.schema, event_record(event, writer.data, validated=True))


def test_flat_data_schemas_are_written_by_hand_and_others_by_fastavro() -> None:
    assert FLAT_SCHEMAS.writer("flat").data_body is not None
    assert SCHEMAS.writer("invoices").data_body is None  # an array of records: fastavro


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(item=FLAT_ITEMS)
def test_flat_data_records_are_the_bytes_fastavro_writes(item: dict[str, Any]) -> None:
    event = flat_event(item)
    assert encode_event(event, FLAT_SCHEMAS, validated=True) == fastavro_flat(event)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(item=FLAT_ITEMS, field=st.sampled_from([f["name"] for f in FLAT["fields"]]), data=st.data())
def test_flat_data_records_with_an_odd_field_give_what_fastavro_gives(
    item: dict[str, Any], field: str, data: Any
) -> None:
    """Another type, or the field missing: bytes or an error, as fastavro has it."""
    odd = dict(item)
    if data.draw(st.booleans()):
        odd.pop(field)
    else:
        odd[field] = data.draw(ANY_VALUE | st.just(2**64) | st.just(b"raw"))
    event = flat_event(odd)
    old = outcome(lambda: fastavro_flat(event))
    new = outcome(lambda: encode_event(event, FLAT_SCHEMAS, validated=True))
    if isinstance(old, bytes):
        assert new == old
    else:
        assert isinstance(new, type)


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(item=FLAT_ITEMS, field=st.sampled_from([f["name"] for f in FLAT["fields"]]), data=st.data())
def test_validating_a_flat_item_answers_as_fastavro_does(
    item: dict[str, Any], field: str, data: Any
) -> None:
    """The quick check says "valid" only of items fastavro's validate accepts; the
    validator's answer is fastavro's either way."""
    schema = FLAT_SCHEMAS.data("flat")
    assert schema is not None
    check = binary.record_check(schema.parsed)
    assert check is not None
    for candidate in (item, {**item, field: data.draw(ANY_VALUE | st.just(2**64))}):
        accepted = avro_validate(candidate, schema.parsed, raise_errors=False)
        if check(candidate):
            assert accepted
        assert (schema.validate(candidate) is None) == accepted
    assert check(item)  # the common case does take the quick way
