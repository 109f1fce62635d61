"""The declarative example (config/invoices.yaml) run by a real runner process on the real
broker: tenants come from the vendor's ``/tenants`` through the ``http`` partition source, no
Python of the user's is involved, and what reaches Kafka is every item once, in order."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from integration.demo import Simulator, example_config, runner_config
from integration.demo import write_config as write_runner_config
from tests.integration.kafka_support import (
    in_sequence,
    read_to_end,
    read_topic,
)
from tests.integration.runners import Runner, runner_env, wait_for

TENANTS = 3
ITEMS = 6


@pytest.fixture
def simulator(simulator_process: Callable[..., Simulator]) -> Simulator:
    return simulator_process(TENANTS, ITEMS)


def add_tenant(sim: Simulator, slug: str, items: int) -> dict[str, str]:
    request = urllib.request.Request(
        f"{sim.base_url}/_admin/tenants",
        data=json.dumps({"slug": slug, "items": items}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        tenant: dict[str, str] = json.load(response)
    return tenant


def test_the_declarative_example_publishes_every_tenant_and_a_new_one(
    kafka_bootstrap: str, prefix: str, simulator: Simulator, tmp_path: Path
) -> None:
    example = example_config({"min": "1s", "max": "2s"})
    example["pollers"][0]["partitions"]["refresh"] = "2s"
    config = runner_config(kafka_bootstrap, prefix, "declarative-1", example=example)
    config["runner"]["session.timeout"] = "6s"
    path = write_runner_config(tmp_path / "runner.yaml", config)
    runner = Runner("declarative-1", path, runner_env(simulator.base_url), tmp_path / "r.log")
    runner.start()
    topic = f"{prefix}.events.invoices"
    try:
        keys = {f"invoices/{tenant['id']}" for tenant in simulator.tenants}

        def arrived(expected: set[str], items: int) -> bool:
            read = read_topic(kafka_bootstrap, topic, idle=1.0)
            return set(read.by_key) >= expected and all(
                len(read.by_key[key]) >= items for key in expected
            )

        wait_for(lambda: arrived(keys, ITEMS), 90, "every tenant's items", step=1.0)

        late = add_tenant(simulator, "late-comer", 4)
        wait_for(lambda: arrived({f"invoices/{late['id']}"}, 4), 60, "the new tenant's items")
        assert runner.process is not None and runner.process.poll() is None, runner.output()
    finally:
        assert runner.stop() == 0, runner.output()

    read = read_topic(kafka_bootstrap, topic, idle=1.0)
    assert set(read.by_key) == keys | {f"invoices/{late['id']}"}
    for key, events in read.by_key.items():
        assert in_sequence(read.sequences(key)), key
        assert all(event["type"] == "created" for event in events), key
        # data is the example's Avro record, not a JSON string
        assert all(event["data"]["id"] == event["subject"] for event in events), key
    assert len(read.ids()) == len(set(read.ids())) == TENANTS * ITEMS + 4

    # Partition data (slugs and bearer tokens) reaches no record of any topic of the run.
    tenants = [*simulator.tenants, late]
    canaries = [t["token"].encode() for t in tenants] + [t["slug"].encode() for t in tenants]
    topics = [f"{prefix}.{name}" for name in ("state", "items", "parked", "schemas")]
    for record in read_to_end(kafka_bootstrap, [*topics, topic]):
        blob = b"".join([record.key or b"", record.value or b"", *record.headers.values()])
        assert not any(canary in blob for canary in canaries), record.topic
