"""Avro events on the real broker, read the way downstream consumers read them: with only the
schemas topic (single-object encoding), or through Apicurio Registry (Confluent wire format)."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.engine.support import INVOICE_SCHEMA, Env, Recorder, simulated
from tests.integration.kafka_support import (
    make_store,
    read_to_end,
    wait_owned,
)
from tests.integration.runners import ROOT, runner_env
from watukuy import Engine, Event
from watukuy.serde import framing
from watukuy.serde.consumer import SchemaTopicResolver, event_decoder
from watukuy.serde.events import dlq_schema
from watukuy.serde.registry import registry_client

INVOICE = INVOICE_SCHEMA


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    async with simulated(2, 5, 7) as environment:
        yield environment


async def delivered(engine: Engine, done: Callable[[], bool]) -> None:
    """Tick until ``done()`` (30 s at most): on Kafka, handlers get events from the events
    topic's consumer, so what a tick commits reaches them a moment later."""
    async with asyncio.timeout(30):
        while not done():
            await engine.tick()
            await asyncio.sleep(0.1)


async def _every_event_type(env: Env, engine: Engine) -> list[Event]:
    """created (first poll), updated (a change), deleted (a reconcile after a deletion)."""
    seen = Recorder()
    engine.on("invoices", seen)
    await engine.tick()
    tenant = env.tenants[0]
    items = env.sim.items(tenant.id)
    env.sim.update_item(tenant.id, items[0]["id"], amount=1.25)
    env.sim.delete_item(tenant.id, items[1]["id"])
    env.clock.advance(60)
    await engine.reconcile("invoices", partition=tenant.id)
    await engine.tick()
    await delivered(engine, lambda: {"updated", "deleted"} <= {e.type for e in seen.events})
    assert {e.type for e in seen.events} == {"created", "updated", "deleted"}
    return seen.events


@pytest.mark.parametrize("encoding", ["single-object", "confluent"])
@pytest.mark.parametrize("with_schema", [False, True], ids=["json-data", "avro-data"])
async def test_every_event_type_round_trips_through_kafka(
    env: Env,
    kafka_bootstrap: str,
    prefix: str,
    encoding: str,
    with_schema: bool,
    request: pytest.FixtureRequest,
) -> None:
    options: dict[str, Any] = {}
    registry = None
    if encoding == "confluent":
        url = request.getfixturevalue("schema_registry_url")
        options["registry_url"] = url
        registry = registry_client(url)
    store = make_store(kafka_bootstrap, prefix, **options)
    poller = env.make_poller(schema=INVOICE if with_schema else None)
    engine = env.make_engine(poller, store=store)
    await engine.__aenter__()
    await wait_owned(store, 4)
    env.clock.advance(0.123_456)  # a time with microseconds, which Avro's millis drop
    sent = await _every_event_type(env, engine)
    await engine.close()

    records = await asyncio.to_thread(read_to_end, kafka_bootstrap, [f"{prefix}.events.invoices"])
    magic = b"\x00" if encoding == "confluent" else framing.MAGIC
    assert all((r.value or b"").startswith(magic) for r in records)
    resolver = SchemaTopicResolver(kafka_bootstrap, f"{prefix}.schemas")
    try:
        decode = event_decoder(resolve=resolver, registry=registry)
        received = [decode(r.value or b"") for r in records]
    finally:
        resolver.close()
    expected = _millis(sent)
    if with_schema:  # data is the schema's record: fields the schema does not name are dropped
        expected = [_projected(e) for e in expected]
    assert sorted(received, key=_order) == sorted(expected, key=_order)
    first = records[0].headers
    assert first["ce_specversion"] == b"1.0"
    assert first["ce_type"].startswith(b"watukuy.")
    assert first["content-type"] == b"application/avro"
    event = next(e for e in received if e.id == first["ce_id"].decode())
    assert first["ce_subject"] == event.subject.encode()
    # ce_time is the Avro time field's precision (milliseconds): the same time, to the letter.
    for record, decoded in zip(records, received, strict=True):
        header = record.headers["ce_time"].decode()
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", header), header
        assert datetime.fromisoformat(header.replace("Z", "+00:00")) == decoded.time
    if with_schema:
        assert isinstance(next(e for e in received if e.type == "created").data, dict)


def _order(event: Event) -> tuple[str, int]:
    return (event.partition, event.sequence)


def _projected(event: Event) -> Event:
    if event.data is None:
        return event
    names = [f["name"] for f in INVOICE["fields"]]  # type: ignore[index]
    return replace(event, data={n: event.data[n] for n in names})


def _millis(events: list[Event]) -> list[Event]:
    """Avro keeps event time to the millisecond (timestamp-millis)."""
    return [
        replace(e, time=e.time.replace(microsecond=e.time.microsecond // 1000 * 1000))
        for e in events
    ]


async def test_an_item_failing_its_schema_goes_to_the_dlq_and_the_key_goes_on(
    env: Env, kafka_bootstrap: str, prefix: str
) -> None:
    tenant = env.tenants[1]
    bad = env.sim.create_item(tenant.id, amount="twelve")
    store = make_store(kafka_bootstrap, prefix)
    engine = env.make_engine(env.make_poller(schema=INVOICE), store=store)
    seen = Recorder()
    engine.on("invoices", seen)
    await engine.__aenter__()
    await wait_owned(store, 4)
    await engine.tick()
    await delivered(engine, lambda: len(seen.of(tenant.id)) >= 5)
    await engine.close()

    assert len(seen.of(tenant.id)) == 5
    dlq = await asyncio.to_thread(read_to_end, kafka_bootstrap, [f"{prefix}.dlq.invoices"])
    assert len(dlq) == 1
    letter = framing.decode(dlq[0].value or b"", dlq_schema().schema)
    assert letter["kind"] == "invalid"
    assert "field 'amount'" in letter["error"]
    assert json.loads(letter["item"])["id"] == bad["id"]
    assert dlq[0].headers["watukuy.error.class"] == b"SchemaError"


async def test_tail_prints_decoded_events_as_json_lines(
    env: Env, kafka_bootstrap: str, prefix: str, tmp_path: Path
) -> None:
    store = make_store(kafka_bootstrap, prefix)
    engine = env.make_engine(env.make_poller(), store=store)
    await engine.__aenter__()
    await wait_owned(store, 4)
    await engine.tick()
    await engine.close()

    config = tmp_path / "runner.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "kafka": {"bootstrap.servers": kafka_bootstrap},
                "topics": {"prefix": prefix, "partitions": 4},
                "runner": {"id": "tail"},
                "pollers": [{"python": "integration.pollers:invoices"}],
            }
        )
    )
    tenant = env.tenants[0].id
    command = [
        sys.executable,
        "-m",
        "watukuy.cli",
        "tail",
        "--config",
        str(config),
        "--poller",
        "invoices",
        "--partition",
        tenant,
        "--from-beginning",
        "--no-follow",
    ]
    done = await asyncio.to_thread(
        subprocess.run,
        command,
        cwd=ROOT,
        env=runner_env(env.base_url),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines, done.stderr
    assert [e["sequence"] for e in lines] == [1, 2, 3, 4, 5]
    assert {e["partition"] for e in lines} == {tenant}
    assert all(e["type"] == "created" and e["data"]["id"] == e["subject"] for e in lines)
