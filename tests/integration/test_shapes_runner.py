"""Real APIs' shapes (issue 43) read by a real runner process on the real broker: every stream
of ``config/shapes.yaml`` against the simulator's Zendesk-, Twilio-, Linear-, Intercom-,
Chargebee- and Graph-shaped answers publishes each tenant's items once; and a runner SIGKILLed
in the middle of a listing that follows next URLs (never stored) is taken over without a
duplicate or a gap."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from integration.demo import Simulator, runner_config
from integration.demo import write_config as write_runner_config
from integration.simulator.shapes import folder_of
from tests.integration.kafka_support import in_sequence, read_to_end, read_topic
from tests.integration.runners import Runner, runner_env, wait_for

REPO = Path(__file__).resolve().parents[2]
TENANTS = 2
ITEMS = 8


@pytest.fixture
def simulator(simulator_process: Callable[..., Simulator]) -> Simulator:
    return simulator_process(TENANTS, ITEMS)


def shapes(page_size: int = 5) -> dict[str, Any]:
    """``config/shapes.yaml``'s connector, with small pages so every listing pages."""
    (connector,) = yaml.safe_load((REPO / "config" / "shapes.yaml").read_text())["pollers"]
    for stream in connector["streams"]:
        request = stream["request"]
        for name in ("page[size]", "PageSize", "limit", "$top"):
            if name in request.get("query", {}):
                request["query"][name] = page_size
        body = request.get("body", {})
        if "variables" in body:
            body["variables"]["first"] = page_size
        if "pagination" in body:
            body["pagination"]["per_page"] = page_size
    connector["defaults"]["schedule"] = {"min": "1s", "max": "2s"}
    return connector


def held(simulator: Simulator, tenant: str) -> list[dict[str, Any]]:
    """The tenant's items as the simulator holds them (its admin API)."""
    url = f"{simulator.base_url}/_admin/tenants/{tenant}/items"
    with urllib.request.urlopen(url, timeout=10) as answer:
        found: list[dict[str, Any]] = json.loads(answer.read())["data"]
    return found


def started(
    kafka_bootstrap: str, prefix: str, simulator: Simulator, tmp_path: Path, name: str
) -> Runner:
    example = {"pollers": [shapes()]}
    config = runner_config(kafka_bootstrap, prefix, name, example=example)
    path = write_runner_config(tmp_path / f"{name}.yaml", config)
    runner = Runner(name, path, runner_env(simulator.base_url), tmp_path / f"{name}.log")
    return runner.start()


def test_every_shape_publishes_each_item_once(
    kafka_bootstrap: str, prefix: str, simulator: Simulator, tmp_path: Path
) -> None:
    tenants = [tenant["id"] for tenant in simulator.tenants]
    slugs = {tenant["id"]: tenant["slug"] for tenant in simulator.tenants}
    items = {t: sorted(i["id"] for i in held(simulator, t)) for t in tenants}
    runner = started(kafka_bootstrap, prefix, simulator, tmp_path, "shapes-1")
    lists = ("tickets", "messages", "issues", "contacts", "customers")

    def topic(stream: str) -> str:
        return f"{prefix}.events.saas.{stream}"

    def subjects(stream: str) -> dict[str, list[str]]:
        read = read_topic(kafka_bootstrap, topic(stream), idle=1.0)
        return {key: sorted(e["subject"] for e in events) for key, events in read.by_key.items()}

    def listed() -> bool:
        return all(
            subjects(stream) == {f"saas.{stream}/{t}": items[t] for t in tenants}
            for stream in lists
        )

    try:
        wait_for(listed, 120, "every list stream to publish every item", step=1.0)
        mail = subjects("mail")
        for tenant in tenants:
            for folder in ("inbox", "drafts", "sent"):
                wanted = sorted(i for i in items[tenant] if folder_of(i) == folder)
                assert mail.get(f"saas.mail/{tenant}/{folder}", []) == wanted
        me = subjects("me")
        assert me == {f"saas.me/{t}": [f"user-{slugs[t]}"] for t in tenants}
        time.sleep(3)  # a few more polls: the quotes stream ignores its 400, publishes nothing
        assert subjects("quotes") == {}
        assert "StatusFailed" not in runner.output() and "-> 400" not in runner.output()
        for stream in lists:  # and nothing twice, in sequence
            read = read_topic(kafka_bootstrap, topic(stream), idle=1.0)
            for events in read.by_key.values():
                assert in_sequence(e["sequence"] for e in events)
    finally:
        runner.stop()


def test_a_runner_killed_mid_listing_on_next_urls_is_taken_over_once(
    kafka_bootstrap: str, prefix: str, simulator: Simulator, tmp_path: Path
) -> None:
    connector = shapes(page_size=1)
    connector["streams"] = [s for s in connector["streams"] if s["name"] == "tickets"]
    tenants = [tenant["id"] for tenant in simulator.tenants]
    for tenant in tenants:  # a slow vendor: 8 pages take 5 s, so the kill lands inside
        slow = json.dumps({"delay": 0.6}).encode()
        url = f"{simulator.base_url}/_admin/tenants/{tenant}/faults"
        request = urllib.request.Request(url, data=slow, method="POST")
        request.add_header("Content-Type", "application/json")
        urllib.request.urlopen(request, timeout=10).close()
    topic = f"{prefix}.events.saas.tickets"
    runners = []
    for name in ("first", "second"):
        config = runner_config(kafka_bootstrap, prefix, name, example={"pollers": [connector]})
        config["runner"]["session.timeout"] = "3s"  # the dead one's keys move within seconds
        path = write_runner_config(tmp_path / f"{name}.yaml", config)
        runners.append(Runner(name, path, runner_env(simulator.base_url), tmp_path / f"{name}.log"))
    first, second = runners
    first.start()
    try:

        def some_but_not_all() -> bool:
            count = len(read_topic(kafka_bootstrap, topic, idle=0.5).ids())
            return 2 <= count < TENANTS * ITEMS

        wait_for(some_but_not_all, 60, "the first pages of the listings", step=0.2)
        first.kill()  # SIGKILL: the committed cursors point into the listings
        second.start()

        def complete() -> bool:
            read = read_topic(kafka_bootstrap, topic, idle=1.0)
            return all(len(read.by_key.get(f"saas.tickets/{t}", [])) >= ITEMS for t in tenants)

        wait_for(complete, 120, "the second runner to finish the listings", step=1.0)
        time.sleep(3)  # polls after the takeover publish nothing again
        read = read_topic(kafka_bootstrap, topic, idle=1.0)
        for tenant in tenants:
            events = read.by_key[f"saas.tickets/{tenant}"]
            subjects = [e["subject"] for e in events]
            assert sorted(subjects) == sorted(i["id"] for i in held(simulator, tenant))
            assert [e["sequence"] for e in events] == list(range(1, ITEMS + 1))
        assert "listing again from its first page" in second.output()
        written = read_to_end(kafka_bootstrap, [f"{prefix}.state"], committed=False)
        host = simulator.base_url.split("//", 1)[1].encode()
        slugs = [tenant["slug"].encode() for tenant in simulator.tenants]  # in the next URLs
        values = [r.value for r in written if r.value is not None]
        assert any(b'"next_url"' in v for v in values)  # a listing was stored mid-way
        leaks = [
            v for v in values if host in v or b"page[after]" in v or any(s in v for s in slugs)
        ]
        assert not leaks
    finally:
        for runner in runners:
            runner.stop()
