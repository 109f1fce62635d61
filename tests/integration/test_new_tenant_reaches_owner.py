"""A tenant added at the vendor, listed over REST on the runner that does not own it, is polled
by its owner within seconds, not at the owner's next partitions refresh (5 minutes, the
default, kept here): two real runner processes on the real broker."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from integration.demo import Simulator, example_config, runner_config
from integration.demo import write_config as write_runner_config
from tests.integration.kafka_support import read_topic
from tests.integration.runners import (
    Runner,
    assignments,
    free_port,
    rest_healthy,
    runner_env,
    wait_for,
)
from tests.integration.test_rest_runners import call
from watukuy.store.kafka.partitioner import partition_for

TENANTS = 4
ITEMS = 2
PARTITIONS = 4  # of the internal topics (runner_config's default)
PROMPTLY = 30.0
"""Seconds the new tenant's first events may take: generous on a busy machine, and still
ten times less than the owner's own refresh interval (5 minutes)."""


@pytest.fixture
def simulator(simulator_process: Callable[..., Simulator]) -> Simulator:
    return simulator_process(TENANTS, ITEMS)


@pytest.fixture
def runners(
    kafka_bootstrap: str, prefix: str, simulator: Simulator, tmp_path: Path
) -> Iterator[dict[str, int]]:
    """Two runners of the declarative ``invoices`` poller; their REST ports by runner id."""
    example = example_config({"min": "1s", "max": "2s"})
    del example["pollers"][0]["partitions"]["refresh"]  # the default: 5 minutes
    ports = {"new-1": free_port(), "new-2": free_port()}
    started = []
    for name, port in ports.items():
        config = runner_config(kafka_bootstrap, prefix, name, example=example)
        config["runner"]["session.timeout"] = "6s"
        config["rest"] = {"listen": f"127.0.0.1:{port}"}
        path = write_runner_config(tmp_path / f"{name}.yaml", config)
        log = tmp_path / f"{name}.log"
        started.append(Runner(name, path, runner_env(simulator.base_url), log).start())
    try:
        yield ports
    finally:
        for runner in started:
            assert runner.stop() == 0, runner.output()


def add_tenant(sim: Simulator) -> str:
    request = urllib.request.Request(
        f"{sim.base_url}/_admin/tenants",
        data=json.dumps({"items": ITEMS}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        tenant: str = json.load(answer)["id"]
    return tenant


def test_a_tenant_listed_on_another_runner_is_polled_by_its_owner_within_seconds(
    runners: dict[str, int], kafka_bootstrap: str, prefix: str, simulator: Simulator
) -> None:
    topic = f"{prefix}.events.invoices"

    def shares() -> dict[str, set[int]] | None:
        held = {k: v for k, v in assignments(kafka_bootstrap, f"{prefix}.runners").items() if v}
        both = set(held) == set(runners) and set().union(*held.values()) == set(range(PARTITIONS))
        return held if both else None

    def every_tenant_polled() -> bool:
        read = read_topic(kafka_bootstrap, topic, idle=1.0)
        return len(read.by_key) == TENANTS and all(len(e) >= ITEMS for e in read.by_key.values())

    # Both runners up, sharing the keys, each past its first listing (the tenants polled).
    wait_for(lambda: all(rest_healthy(port) for port in runners.values()), 60, "both runners' REST")
    wait_for(every_tenant_polled, 60, "the first events of every tenant", step=1.0)
    held = wait_for(shares, 60, "both runners holding partitions")

    tenant = add_tenant(simulator)
    (owner,) = [
        r for r, parts in held.items() if partition_for(f"invoices/{tenant}", PARTITIONS) in parts
    ]
    (other,) = [r for r in runners if r != owner]

    asked = time.monotonic()
    code, listed = call(runners[other], "GET", "/connectors/invoices/partitions")
    assert code == 200 and tenant in [p["key"] for p in listed]

    def first_events() -> list[dict[str, Any]]:
        return read_topic(kafka_bootstrap, topic, idle=1.0).by_key.get(f"invoices/{tenant}", [])

    events = wait_for(
        lambda: len(first_events()) >= ITEMS and first_events(),
        PROMPTLY,
        f"{tenant}'s events from its owner {owner}",
        step=0.5,
    )
    took = time.monotonic() - asked
    assert [e["sequence"] for e in events] == list(range(1, ITEMS + 1))
    assert {e["type"] for e in events} == {"created"}

    # Its owner holds it: either runner's status names the owner.
    def owner_shown() -> str | None:
        code, status = call(runners[other], "GET", "/connectors/invoices/status")
        tasks = [t for t in status["tasks"] if t.get("partition") == tenant] if code == 200 else []
        return tasks[0]["worker_id"] if tasks else None

    assert wait_for(owner_shown, 30, f"{tenant} in the status") == owner
    print(f"the new tenant's events arrived {took:.1f}s after the listing was asked for")
