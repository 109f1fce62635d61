"""Events as Avro: both encodings round-trip, schemas resolve by fingerprint, items validate."""

from __future__ import annotations

import json
import socket
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from watukuy.core.errors import ConfigError
from watukuy.core.events import Event, canonical_json
from watukuy.serde import framing
from watukuy.serde.consumer import decode_events, event_decoder
from watukuy.serde.data import DataSchema, InvalidData
from watukuy.serde.events import (
    EventSchemas,
    PublishedEvent,
    SchemaNotFound,
    UndecodableEvent,
    decode_event,
    dlq_schema,
    encode_event,
    envelope,
    published_event,
)

registry = pytest.importorskip("watukuy.serde.registry")  # needs confluent-kafka[schemaregistry]

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
    ],
}
ITEM = {"id": "inv-1", "amount": 12.5, "currency": "EUR", "lines": [{"sku": "a", "qty": 2}]}
TIME = datetime(2026, 9, 1, 12, 30, 15, 123000, tzinfo=UTC)  # timestamp-millis: no microseconds
KINDS = [
    (t, lane)
    for t in ("created", "updated", "deleted")
    for lane in ("live", "backfill", "reconcile")
]


def event(poller: str, kind: str = "created", lane: str = "live", data: Any = ITEM) -> Event:
    return Event(
        id=f"{poller}-{kind}-{lane}",
        poller=poller,
        partition="t_42",
        subject="inv-1",
        type=kind,  # type: ignore[arg-type]
        version="etag-7",
        sequence=3,
        time=TIME,
        lane=lane,
        schema_version=2,
        data=None if kind == "deleted" else data,
    )


@pytest.fixture
def schemas() -> EventSchemas:
    return EventSchemas(
        {"invoices": DataSchema.load(INVOICE, "pollers[0].schema"), "tickets": None}
    )


# -- single-object encoding --------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "lane"), KINDS)
@pytest.mark.parametrize("poller", ["invoices", "tickets"])
@pytest.mark.parametrize("validated", [False, True])
def test_single_object_round_trip(
    schemas: EventSchemas, poller: str, kind: str, lane: str, validated: bool
) -> None:
    original = event(poller, kind, lane)
    raw = encode_event(original, schemas, validated=validated)
    assert raw[:2] == b"\xc3\x01"
    assert raw[2:10] == schemas.of(poller).fingerprint
    decoded = decode_event(raw, schemas.resolve)
    assert decoded == original
    assert decoded.time.tzinfo is not None and decoded.time.utcoffset() == UTC.utcoffset(None)


def test_data_with_and_without_a_schema_get_their_own_envelopes(schemas: EventSchemas) -> None:
    with_schema, as_json = schemas.of("invoices"), schemas.of("tickets")
    assert with_schema.fingerprint != as_json.fingerprint
    assert schemas.of("another-json-poller").fingerprint == as_json.fingerprint  # shared
    assert "acme.Invoice" in with_schema.canonical
    # Without a data schema, data is the item's canonical JSON text inside the Avro body.
    raw = encode_event(event("tickets", data={"b": 1, "a": [1, "x"]}), schemas)
    assert canonical_json({"b": 1, "a": [1, "x"]}).encode() in raw


def test_time_is_cut_to_the_millisecond(schemas: EventSchemas) -> None:
    precise = replace(event("tickets"), time=TIME.replace(microsecond=123456))
    assert decode_event(encode_event(precise, schemas), schemas.resolve).time == TIME


def test_decode_with_only_the_schema_text_by_fingerprint(schemas: EventSchemas) -> None:
    """What a consumer of the schemas topic has: fingerprint hex -> schema JSON text."""
    topic = schemas.published()  # the records published to <prefix>.schemas
    assert set(topic) == {
        schemas.of("invoices").fingerprint_hex,
        schemas.of("tickets").fingerprint_hex,
    }

    def from_topic(fingerprint: bytes) -> framing.Schema:
        return framing.Schema.of(topic[fingerprint.hex()])

    for poller in ("invoices", "tickets"):
        original = event(poller)
        assert decode_event(encode_event(original, schemas), from_topic) == original
    # The published text keeps what the canonical form drops (logical types, defaults).
    text = json.loads(topic[schemas.of("invoices").fingerprint_hex])
    time_field = next(f for f in text["fields"] if f["name"] == "time")
    assert time_field["type"] == {"type": "long", "logicalType": "timestamp-millis"}


def test_unknown_fingerprint_and_foreign_bytes(schemas: EventSchemas) -> None:
    raw = encode_event(event("tickets"), schemas)
    with pytest.raises(SchemaNotFound):
        decode_event(raw, EventSchemas().resolve)
    with pytest.raises(UndecodableEvent):
        decode_event(b'{"json": true}', schemas.resolve)
    with pytest.raises(UndecodableEvent):
        decode_event(raw[:12], schemas.resolve)  # cut short


def test_fingerprint_matches_the_avro_spec() -> None:
    # Avro spec, "Schema Fingerprints": CRC-64-AVRO of the canonical form of "int".
    assert framing.Schema.of('"int"').fingerprint == bytes.fromhex("8f5c393f1ad57572")


def test_envelope_and_dlq_schemas_load() -> None:
    plain = envelope()
    assert plain.schema.parsed["name"] == "watukuy.Event"
    names = [f["name"] for f in json.loads(plain.text)["fields"]]
    assert names == [
        "id",
        "poller",
        "partition",
        "subject",
        "type",
        "version",
        "sequence",
        "time",
        "lane",
        "schema_version",
        "data",
    ]
    record = {
        "poller": "invoices",
        "partition": "t_42",
        "kind": "invalid",
        "stage": "poll",
        "error": "field 'amount': expected double, got 'abc'",
        "item": '{"amount":"abc"}',
        "attempts": 1,
    }
    dlq = dlq_schema()
    decoded = framing.decode(framing.encode(dlq.schema, record), dlq.schema)
    assert decoded["cursor"] is None and decoded["truncated"] is False
    assert decoded["error"] == record["error"]


# -- Confluent wire format ---------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "lane"), KINDS)
@pytest.mark.parametrize("poller", ["invoices", "tickets"])
@pytest.mark.parametrize("validated", [False, True])
def test_confluent_round_trip(
    schemas: EventSchemas, poller: str, kind: str, lane: str, validated: bool
) -> None:
    client = registry.registry_client("mock://events")
    encoder = registry.ConfluentEventEncoder(client, f"watukuy.events.{poller}")
    original = event(poller, kind, lane)
    raw = encoder.encode(original, schemas, validated=validated)
    latest = client.get_latest_version(f"watukuy.events.{poller}-value")
    assert raw[:5] == b"\x00" + latest.schema_id.to_bytes(4, "big")
    assert registry.ConfluentEventDecoder(client)(raw) == original


def test_confluent_registers_once_per_schema_and_keeps_logical_types(
    schemas: EventSchemas,
) -> None:
    client = registry.registry_client("mock://once")
    encoder = registry.ConfluentEventEncoder(client, "watukuy.events.invoices")
    first = encoder.encode(event("invoices"), schemas)
    second = encoder.encode(event("invoices", "updated"), schemas)
    assert first[:5] == second[:5]
    assert client.get_subjects() == ["watukuy.events.invoices-value"]
    registered = client.get_latest_version("watukuy.events.invoices-value").schema
    assert "timestamp-millis" in (registered.schema_str or "")
    # A decoder that has only the registry (another process) reads it too.
    assert registry.ConfluentEventDecoder(client).decode(second).type == "updated"


def test_one_decoder_reads_both_encodings(schemas: EventSchemas) -> None:
    client = registry.registry_client("mock://both")
    confluent = registry.ConfluentEventEncoder(client, "watukuy.events.tickets").encode(
        event("tickets"), schemas
    )
    single = encode_event(event("tickets", "updated"), schemas)
    decode = event_decoder(schemas.resolve, client)
    assert [decode(confluent).type, decode(single).type] == ["created", "updated"]
    with pytest.raises(UndecodableEvent):
        event_decoder(schemas.resolve)(confluent)  # no registry given


def test_registry_credentials_stay_out_of_urls_and_errors() -> None:
    client = registry.registry_client("mock://user:s3cret@registry")
    assert client.config() == {
        "url": "mock://registry",
        "basic.auth.user.info": "user:s3cret",
        "timeout": registry.REGISTRY_TIMEOUT,
    }
    with pytest.raises(ConfigError) as given_twice:
        registry.registry_client("mock://user:s3cret@registry", "user:s3cret")
    with pytest.raises(ConfigError) as malformed:
        registry.registry_client("mock://registry", "no-colon-s3cret")
    with pytest.raises(ConfigError) as bad_url:
        registry.registry_client("ftp://registry", "user:s3cret")
    for raised in (given_twice, malformed, bad_url):
        assert "s3cret" not in str(raised.value) and raised.value.__cause__ is None
    assert "s3cret" not in repr(registry.registry_client("mock://r", "user:s3cret"))


def test_a_registry_that_never_answers_fails_the_request_instead_of_hanging() -> None:
    # One accepted the connection and never answered: a whole CI run hung on it.
    silent = socket.create_server(("127.0.0.1", 0))
    try:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        client = registry.registry_client(url, timeout=1)
        began = time.monotonic()
        with pytest.raises(Exception):  # noqa: B017  # the client's or httpx's own timeout error
            client.get_subjects()
        assert time.monotonic() - began < 30
    finally:
        silent.close()


# -- data schemas ------------------------------------------------------------------------------


def test_validate_names_the_offending_field() -> None:
    schema = DataSchema.load(INVOICE, "pollers[0].schema")
    assert schema.name == "acme.Invoice"
    assert schema.validate(ITEM) is None
    assert schema.validate({"id": "x", "amount": 3}) is None  # int is a double; defaults fill
    wrong = schema.validate({**ITEM, "amount": "abc"})
    assert wrong == "field 'amount': expected double, got 'abc'"
    missing = schema.validate({"id": "inv-1"})
    assert missing == "field 'amount': missing, expected double"
    nested = schema.validate({**ITEM, "lines": [{"sku": "a", "qty": 1}, {"sku": "b"}]})
    assert nested == "field 'lines[1].qty': missing, expected int"
    union = schema.validate({**ITEM, "currency": 978})
    assert union == "field 'currency': expected null or string, got 978"
    assert (
        schema.validate(["not", "a", "record"])
        == "item: expected record acme.Invoice, got an array"
    )


def test_encoding_an_invalid_item_raises_invalid_data(schemas: EventSchemas) -> None:
    with pytest.raises(InvalidData, match="field 'amount': expected double"):
        encode_event(event("invoices", data={**ITEM, "amount": "abc"}), schemas)
    # fastavro's writer alone would write 1.5 to an int field as 1: not without validated=True.
    coerced = {**ITEM, "lines": [{"sku": "a", "qty": 1.5}]}
    with pytest.raises(InvalidData, match=r"field 'lines\[0\].qty': expected int, got 1.5"):
        encode_event(event("invoices", data=coerced), schemas)


def test_schema_file(tmp_path: Path) -> None:
    (tmp_path / "invoice.avsc").write_text(json.dumps(INVOICE))
    loaded = DataSchema.load("invoice.avsc", "pollers[0].schema", base=tmp_path)
    assert loaded.name == "acme.Invoice"
    assert DataSchema.load(tmp_path / "invoice.avsc", "p").schema == loaded.schema


def test_missing_schema_file_names_the_path(tmp_path: Path) -> None:
    where = tmp_path / "nope.avsc"
    with pytest.raises(ConfigError) as raised:
        DataSchema.load(str(where), "pollers[1].schema")
    assert raised.value.path == "pollers[1].schema"
    assert str(where) in str(raised.value)


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        ({"type": "string"}, "must be an Avro record schema"),
        ({"type": "record", "name": "R", "fields": [{"name": "a", "type": "nope"}]}, "unknown"),
        ({"type": "record", "name": "R"}, "needs a list of fields"),
        ({"type": "record", "name": "R", "fields": [{"name": "a-b", "type": "int"}]}, "a-b"),
        ({"type": "record", "name": "Event", "namespace": "watukuy", "fields": []}, "reserved"),
    ],
)
def test_invalid_schemas_are_config_errors(schema: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError, match=says) as raised:
        DataSchema.load(schema, "pollers[0].schema")
    assert raised.value.path == "pollers[0].schema"


def test_a_record_without_namespace_keeps_its_name_in_the_envelope() -> None:
    plain = DataSchema.load({"type": "record", "name": "Event", "fields": []}, "p")
    assert plain.name == "Event"  # not watukuy.Event, so no clash with the envelope
    schemas = EventSchemas({"p": plain})
    original = event("p", data={})
    assert decode_event(encode_event(original, schemas), schemas.resolve) == original


# -- consumer helpers (no broker) --------------------------------------------------------------


class FakeError:
    def __init__(self, code: int) -> None:
        self._code = code

    def code(self) -> int:
        return self._code


class FakeRecord:
    def __init__(self, key: bytes | None, value: bytes | None, error: Any = None) -> None:
        self._key, self._value, self._error = key, value, error

    def error(self) -> Any:
        return self._error

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value


def test_decode_events_skips_markers_tombstones_and_other_partitions(schemas: EventSchemas) -> None:
    from confluent_kafka import KafkaError

    mine, other = event("tickets"), replace(event("tickets", "updated"), partition="t_7")
    records = [
        FakeRecord(b"tickets/t_42", encode_event(mine, schemas)),
        FakeRecord(None, None, FakeError(KafkaError._PARTITION_EOF)),
        FakeRecord(b"tickets/t_42", None),
        FakeRecord(b"tickets/t_7", encode_event(other, schemas)),
    ]
    decode = event_decoder(schemas.resolve)
    assert list(decode_events(records, decode)) == [mine, other]
    assert list(decode_events(records, decode, partition_key="t_7")) == [other]
    garbage = [FakeRecord(b"tickets/t_42", b"garbage"), *records]
    with pytest.raises(UndecodableEvent):
        list(decode_events(garbage, decode))
    assert list(decode_events(garbage, decode, skip_undecodable=True)) == [mine, other]


def test_schemas_topic_resolver_and_reader_on_librdkafka_mock_cluster(
    schemas: EventSchemas,
) -> None:
    """librdkafka's in-process mock cluster (no broker): it auto-creates topics on produce."""
    from confluent_kafka import Producer

    from watukuy.serde.consumer import EventReader, SchemaTopicResolver

    producer = Producer({"test.mock.num.brokers": 1, "log_level": 3})
    broker = next(iter(producer.list_topics(timeout=10).brokers.values()))
    bootstrap = f"{broker.host}:{broker.port}"
    written = [event("tickets"), event("invoices", "updated"), event("tickets", "deleted")]
    for one in written[:2]:
        producer.produce("w.events", key=one.key.encode(), value=encode_event(one, schemas))
    producer.produce(
        "w.schemas",
        key=schemas.of("tickets").fingerprint_hex.encode(),
        value=schemas.writer("tickets").text.encode(),
    )
    producer.flush(10)
    resolver = SchemaTopicResolver(bootstrap, "w.schemas", timeout=10)
    try:
        reader = EventReader(bootstrap, "w.events", resolver=resolver)
        with reader, pytest.raises(SchemaNotFound):  # the invoices schema is not published yet
            list(reader.read())
        writer = schemas.writer("invoices")
        producer.produce(
            "w.schemas", key=writer.fingerprint_hex.encode(), value=writer.text.encode()
        )
        producer.produce(
            "w.events", key=written[2].key.encode(), value=encode_event(written[2], schemas)
        )
        producer.flush(10)
        with EventReader(bootstrap, "w.events", resolver=resolver) as reader:
            assert sorted(e.id for e in reader.read()) == sorted(e.id for e in written)
        assert set(resolver.texts) == set(schemas.published())
        with EventReader(bootstrap, "w.events", resolver=resolver, from_beginning=False) as reader:
            assert list(reader.read()) == []
        with pytest.raises(ConfigError, match="does not exist"):
            list(EventReader(bootstrap, "w.nothing", resolver=resolver).read())
    finally:
        resolver.close()


# -- what a restore reads of an event (its head) -----------------------------------------------


@pytest.mark.parametrize("kind", ["created", "updated", "deleted"])
@pytest.mark.parametrize("poller", ["invoices", "tickets"])
def test_a_restore_reads_the_head_of_an_event_in_either_encoding(
    schemas: EventSchemas, poller: str, kind: str
) -> None:
    original = replace(event(poller, kind), sequence=123_456_789_012)
    client = registry.registry_client("mock://heads")
    confluent = registry.ConfluentEventEncoder(client, f"watukuy.events.{poller}")
    expected = PublishedEvent("inv-1", kind, "etag-7", 123_456_789_012, TIME.timestamp())  # type: ignore[arg-type]
    for raw in (encode_event(original, schemas), confluent.encode(original, schemas)):
        assert published_event(raw, poller, "t_42") == expected


def test_a_head_of_another_key_or_encoding_is_refused(schemas: EventSchemas) -> None:
    raw = encode_event(event("tickets"), schemas)
    with pytest.raises(UndecodableEvent, match="not an event of tickets/t_43"):
        published_event(raw, "tickets", "t_43")
    with pytest.raises(UndecodableEvent, match="unknown encoding"):
        published_event(b'{"id": 1}', "tickets", "t_42")
    with pytest.raises(UndecodableEvent, match="unreadable event head"):
        published_event(raw[:14], "tickets", "t_42")
