"""The schema registry the suite runs against is real: Apicurio Registry's Confluent API.

``schema_registry_url`` is the Confluent-compatible URL (``.../apis/ccompat/v7``) of the registry
named by ``WATUKUY_SCHEMA_REGISTRY_URL``, else of one already started by
``python -m integration.registry start``, else of one this session starts and stops.
"""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "dev.watukuy.test",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "amount", "type": "long"},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}


@pytest.fixture
def client(schema_registry_url: str) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": schema_registry_url, "timeout": 30})  # default: none


def test_register_and_fetch_by_id(client: SchemaRegistryClient) -> None:
    schema_id = client.register_schema("t-value", Schema(json.dumps(ORDER), "AVRO"))
    assert isinstance(schema_id, int)

    fetched = client.get_schema(schema_id)
    assert json.loads(fetched.schema_str) == ORDER
    assert fetched.schema_type in (None, "AVRO")

    latest = client.get_latest_version("t-value")
    assert latest.schema_id == schema_id
    assert "t-value" in client.get_subjects()
    # Registering the same schema again is idempotent: same id.
    assert client.register_schema("t-value", Schema(json.dumps(ORDER), "AVRO")) == schema_id


def test_confluent_wire_format_round_trip(client: SchemaRegistryClient) -> None:
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    serializer = AvroSerializer(client, json.dumps(ORDER))
    # TOPIC, as the serializer: confluent-kafka 2.16's default first asks the registry for
    # "associations", which Apicurio's Confluent API once left unanswered.
    deserializer = AvroDeserializer(client, conf={"subject.name.strategy.type": "TOPIC"})
    ctx = SerializationContext(topic, MessageField.VALUE)
    record = {"id": "o-1", "amount": 42, "note": None}

    payload = serializer(record, ctx)
    assert payload is not None
    registered = client.get_latest_version(f"{topic}-value")  # TopicNameStrategy
    assert payload[0] == 0  # magic byte, then the 4-byte big-endian schema id
    assert int.from_bytes(payload[1:5], "big") == registered.schema_id
    assert deserializer(payload, ctx) == record


def test_subject_can_be_deleted(client: SchemaRegistryClient) -> None:
    subject = f"gone-{uuid.uuid4().hex[:8]}-value"
    client.register_schema(subject, Schema(json.dumps(ORDER), "AVRO"))
    assert client.delete_subject(subject) == [1]
    assert subject not in client.get_subjects()
