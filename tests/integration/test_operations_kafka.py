"""Operations and run-time connectors on the Kafka store, against a real broker: a retry
command written by another process is applied once by the key's owner; a poller added to a
running store gets its topics, its schema published and its events on its own topic."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from tests.engine.support import INVOICE_SCHEMA, Env, simulated
from tests.integration.kafka_support import (
    in_sequence,
    latest_values,
    make_store,
    read_topic,
    wait_owned,
)
from tests.integration.runners import ROOT, runner_env
from watukuy import Engine
from watukuy.store.kafka import records

PARTITIONS = 4


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    async with simulated(3, 10, 5) as environment:
        yield environment


SEND_RETRY = """
import asyncio, sys, time
from watukuy.core.operations import KEY_OPERATIONS
from watukuy.store.base import Command
from watukuy.store.kafka.store import KafkaSettings, KafkaStore
from watukuy.store.kafka.topics import TopicLayout
bootstrap, prefix, partitions, partition, parked_id = sys.argv[1:6]
async def main():
    store = KafkaStore(KafkaSettings(kafka={"bootstrap.servers": bootstrap},
        layout=TopicLayout(prefix, int(partitions), 1), runner_id="outsider", use_group=False))
    await store.start()
    try:
        op = KEY_OPERATIONS["retry"]
        args = op.encode(op.values({"ids": [parked_id]}))
        command = Command.issue(op.name, "invoices", partition, args, time.time())
        await store.send_command(command)
        print(command.id)
    finally:
        await store.close()
asyncio.run(main())
"""


async def _tick_until(engine: Engine, done: Any) -> None:
    """Tick until ``done()``; the caller bounds it with ``asyncio.timeout``."""
    while not await done():
        await engine.tick()
        await asyncio.sleep(0.2)


async def test_a_retry_command_from_another_process_is_applied_once_by_the_owner(
    env: Env, kafka_bootstrap: str, prefix: str
) -> None:
    tenant = env.tenants[1].id
    broken = env.sim.create_item(tenant, broken=True)
    fixed = False

    def identity(item: dict[str, Any]) -> str:
        if item.get("broken") and not fixed:
            raise ValueError("the vendor sent an item without a usable id")
        return str(item["id"])

    store = make_store(kafka_bootstrap, prefix, partitions=PARTITIONS)
    engine = env.make_engine(env.make_poller(identity=identity), store=store)
    await engine.__aenter__()
    try:
        await wait_owned(store, PARTITIONS)
        await engine.tick()
        (parked,) = await engine.parked.list("invoices", partition=tenant)
        fixed = True  # the bug is fixed; an operator retries from elsewhere

        sent = await asyncio.to_thread(
            subprocess.run,
            [
                sys.executable,
                "-c",
                SEND_RETRY,
                kafka_bootstrap,
                prefix,
                str(PARTITIONS),
                tenant,
                parked.id,
            ],
            cwd=ROOT,
            env=runner_env("http://127.0.0.1:1"),
            capture_output=True,
            timeout=60,
        )
        assert sent.returncode == 0, sent.stderr.decode()[-2000:]
        command_id = sent.stdout.decode().strip()

        async def retried() -> bool:
            return await engine.parked.list("invoices", partition=tenant) == []

        async with asyncio.timeout(60):  # the command travels through <prefix>.state
            await _tick_until(engine, retried)
        for _ in range(3):  # nothing more comes of it
            await engine.tick()
    finally:
        await engine.close()

    events = await asyncio.to_thread(read_topic, kafka_bootstrap, f"{prefix}.events.invoices")
    key = f"invoices/{tenant}"
    assert in_sequence(events.sequences(key))
    recovered = [e for e in events.by_key[key] if e["subject"] == broken["id"]]
    assert [(e["type"], e["sequence"]) for e in recovered] == [("created", 11)]

    # The parked record and the command record are tombstoned with the commit that applied it.
    state = await asyncio.to_thread(latest_values, kafka_bootstrap, f"{prefix}.state")
    commands = {k: v for k, v in state.items() if records.is_command(k)}
    assert [k.decode().rsplit("/", 1)[1] for k in commands] == [command_id]
    assert list(commands.values()) == [None]
    parked_records = await asyncio.to_thread(latest_values, kafka_bootstrap, f"{prefix}.parked")
    assert parked_records and all(v is None for v in parked_records.values())

    # A new owner restores no pending command, so it is not applied a second time.
    store = make_store(kafka_bootstrap, prefix, partitions=PARTITIONS)
    engine = env.make_engine(env.make_poller(identity=identity), store=store)
    await engine.__aenter__()
    try:
        await wait_owned(store, PARTITIONS)
        assert store.take_commands() == []
    finally:
        await engine.close()


def _topics(bootstrap: str, prefix: str) -> set[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return {t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix + ".")}


async def test_a_poller_added_to_a_running_store_gets_its_topics_and_publishes(
    env: Env, kafka_bootstrap: str, prefix: str
) -> None:
    store = make_store(kafka_bootstrap, prefix, partitions=PARTITIONS)
    engine = env.make_engine(env.make_poller(), store=store)
    await engine.__aenter__()
    try:
        await wait_owned(store, PARTITIONS)
        await engine.tick()
        before = await asyncio.to_thread(_topics, kafka_bootstrap, prefix)
        assert f"{prefix}.events.orders" not in before

        # Its own data schema: its envelope is new to the schemas topic.
        await engine.add_poller(env.make_poller(name="orders", schema=INVOICE_SCHEMA))
        after = await asyncio.to_thread(_topics, kafka_bootstrap, prefix)
        assert after - before == {f"{prefix}.events.orders", f"{prefix}.dlq.orders"}
        await engine.tick()
    finally:
        await engine.close()

    # Decoded the way any consumer without a registry would: the writer schema comes from
    # <prefix>.schemas by fingerprint, so the added poller's envelope was published there.
    orders = await asyncio.to_thread(read_topic, kafka_bootstrap, f"{prefix}.events.orders")
    assert orders.count == 30
    for tenant in env.tenants:
        values = orders.by_key[f"orders/{tenant.id}"]
        assert in_sequence(v["sequence"] for v in values)
        assert set(values[0]["data"]) == {f["name"] for f in INVOICE_SCHEMA["fields"]}
    invoices = await asyncio.to_thread(read_topic, kafka_bootstrap, f"{prefix}.events.invoices")
    assert invoices.count == 30 and not any(k.startswith("orders/") for k in invoices.by_key)
