"""The sequence of an event read by hand from its head (watukuy.serde.event_head) agrees with
fastavro's reading of the same bytes (watukuy.serde.events.published_event): for any event in
either encoding, and for bytes cut short, changed or of another key, where the hand-written
reader either gives the sequence fastavro reads or leaves the event to it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from watukuy.core.events import Event
from watukuy.serde.event_head import event_sequence, key_head
from watukuy.serde.events import EventSchemas, UndecodableEvent, encode_event, published_event

registry = pytest.importorskip("watukuy.serde.registry")  # needs confluent-kafka[schemaregistry]

pytestmark = pytest.mark.unit

SCHEMAS = EventSchemas({"invoices": None})
# Short and ASCII mostly; long enough at times for a multi-byte length, and any code point.
TEXT = st.text(max_size=20) | st.text(min_size=60, max_size=300)
TIMES = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
)
EVENTS = st.builds(
    Event,
    id=TEXT,
    poller=st.just("invoices"),
    partition=TEXT,
    subject=TEXT,
    type=st.sampled_from(["created", "updated", "deleted"]),
    version=TEXT,
    sequence=st.integers(-(2**63), 2**63 - 1),
    time=TIMES,
    lane=st.sampled_from(["live", "backfill", "reconcile"]),
    schema_version=st.integers(0, 5),
    data=st.none() | st.just('{"id": 1}'),
)
CONFLUENT = registry.ConfluentEventEncoder(
    registry.registry_client("mock://heads"), "watukuy.events.invoices"
)


def fastavro_sequence(raw: bytes, partition: str) -> int | None:
    try:
        return published_event(raw, "invoices", partition).sequence
    except UndecodableEvent:
        return None


def encoded(event: Event, confluent: bool) -> bytes:
    return CONFLUENT.encode(event, SCHEMAS) if confluent else encode_event(event, SCHEMAS)


def surrogate_free(event: Event) -> bool:
    texts = (event.id, event.partition, event.subject, event.version)
    return all(not any(0xD800 <= ord(c) <= 0xDFFF for c in text) for text in texts)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(EVENTS.filter(surrogate_free), st.booleans())
def test_the_sequence_of_any_event_is_the_one_fastavro_reads(event: Event, confluent: bool) -> None:
    raw = encoded(event, confluent)
    head = key_head("invoices", event.partition)
    assert head is not None
    assert event_sequence(raw, head) == event.sequence == fastavro_sequence(raw, event.partition)


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(EVENTS.filter(surrogate_free), st.booleans(), st.data())
def test_changed_or_cut_bytes_give_fastavros_sequence_or_are_left_to_it(
    event: Event, confluent: bool, data: Any
) -> None:
    raw = bytearray(encoded(event, confluent))
    cut = data.draw(st.integers(0, len(raw)))
    changes = data.draw(st.lists(st.tuples(st.integers(0, len(raw) - 1), st.integers(0, 255))))
    for at, byte in changes:
        raw[at] = byte
    changed = bytes(raw[:cut]) if data.draw(st.booleans()) else bytes(raw)
    head = key_head("invoices", event.partition)
    assert head is not None
    found = event_sequence(changed, head)
    if found is not None:  # read by hand: exactly what fastavro reads
        assert found == fastavro_sequence(changed, event.partition)


def test_an_event_of_another_key_is_left_to_fastavro_which_refuses_it() -> None:
    event = Event(
        "e-1", "invoices", "t_1", "inv-1", "created", "v1", 7, datetime.now(UTC),
        "live", 1, None,
    )  # fmt: skip
    raw = encode_event(event, SCHEMAS)
    other = key_head("invoices", "t_2")
    assert other is not None
    assert event_sequence(raw, other) is None
    assert fastavro_sequence(raw, "t_2") is None


@pytest.mark.parametrize("millis", [-62_135_596_800_001, 253_402_300_800_000])
def test_a_time_fastavro_cannot_read_is_left_to_it(millis: int) -> None:
    event = Event(
        "e-1", "invoices", "t_1", "inv-1", "created", "v1", 7,
        datetime(2026, 1, 1, tzinfo=UTC), "live", 1, None,
    )  # fmt: skip
    good = encode_event(event, SCHEMAS)
    written = _zigzag(event.time.timestamp() * 1000)
    at = good.index(written, len(good) - len(written) - 16)
    raw = good[:at] + _zigzag(millis) + good[at + len(written) :]
    head = key_head("invoices", "t_1")
    assert head is not None
    assert fastavro_sequence(raw, "t_1") is None
    assert event_sequence(raw, head) is None


def _zigzag(value: float) -> bytes:
    z = (int(value) << 1) ^ (int(value) >> 63)
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def test_times_at_the_ends_of_the_datetime_range_are_read_by_both() -> None:
    for when in (datetime(1, 1, 1, tzinfo=UTC), datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)):
        event = Event("e", "invoices", "t_1", "s", "updated", "v", 9, when, "live", 1, None)
        raw = encode_event(event, SCHEMAS)
        head = key_head("invoices", "t_1")
        assert head is not None
        assert event_sequence(raw, head) == 9 == fastavro_sequence(raw, "t_1")


def test_a_sequence_varint_past_64_bits_is_left_to_fastavro() -> None:
    # Found by hypothesis: ten varint bytes can carry more than a long; the hand reader gave a
    # number past 2**63 where fastavro wraps. Now it steps aside.
    head = key_head("invoices", "")
    assert head is not None
    raw = (
        b"\xc3\x01n\xdf{\xc8\xe8\x18NZ\x00\x10invoices\x00\x1000\xc2\x80\xf0\x90\x80\x80\x00"
        b"\x1c0000\xc2\x80\xc2\x80\xc2\x80\xf0\x90\x80\x80\x80\x80\x80\x80\xa0\xe2\xbf\x94"
        b"\x81\x02\x00\x00\x00"
    )
    assert event_sequence(raw, head) is None
