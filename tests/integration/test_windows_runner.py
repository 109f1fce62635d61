"""Time windows (issue 44) read by a real runner process on the real broker: ``config/windows.yaml``
publishes each tenant's items once from both windowed endpoints and then each change; and a
runner SIGKILLed in the middle of a stepped backfill is taken over from its last committed
window: the windows the vendor was asked tile the span from the start to now, none skipped,
and no item is published twice."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from integration.demo import Simulator, runner_config
from integration.demo import write_config as write_runner_config
from tests.integration.kafka_support import read_topic
from tests.integration.runners import Runner, admin, runner_env, wait_for

REPO = Path(__file__).resolve().parents[2]
TENANTS = 2
ITEMS = 6
CHARGES = "/v1/charges"


@pytest.fixture
def simulator(simulator_process: Callable[..., Simulator]) -> Simulator:
    return simulator_process(TENANTS, ITEMS)


def windows(page_size: int = 2) -> dict[str, Any]:
    """``config/windows.yaml``'s connector, with small pages and quick polls."""
    (connector,) = yaml.safe_load((REPO / "config" / "windows.yaml").read_text())["pollers"]
    for stream in connector["streams"]:
        if "limit" in stream["request"].get("query", {}):
            stream["request"]["query"]["limit"] = page_size
    connector["defaults"]["schedule"] = {"min": "1s", "max": "2s"}
    return connector


def runner(
    kafka_bootstrap: str,
    prefix: str,
    simulator: Simulator,
    tmp: Path,
    name: str,
    connector: dict[str, Any],
) -> Runner:
    config = runner_config(kafka_bootstrap, prefix, name, example={"pollers": [connector]})
    config["runner"]["session.timeout"] = "3s"  # a dead runner's keys move within seconds
    path = write_runner_config(tmp / f"{name}.yaml", config)
    return Runner(name, path, runner_env(simulator.base_url), tmp / f"{name}.log")


def test_both_windowed_streams_publish_each_item_once_then_each_change(
    kafka_bootstrap: str, prefix: str, simulator: Simulator, tmp_path: Path
) -> None:
    tenants = [tenant["id"] for tenant in simulator.tenants]
    items = {
        t: sorted(i["id"] for i in admin(simulator, f"/tenants/{t}/items")["data"]) for t in tenants
    }
    started = runner(kafka_bootstrap, prefix, simulator, tmp_path, "windows-1", windows()).start()

    def events(stream: str) -> dict[str, list[dict[str, Any]]]:
        return read_topic(kafka_bootstrap, f"{prefix}.events.windows.{stream}", idle=1.0).by_key

    def subjects(stream: str) -> dict[str, list[str]]:
        return {key: sorted(e["subject"] for e in found) for key, found in events(stream).items()}

    try:
        wanted = {
            stream: {f"windows.{stream}/{t}": items[t] for t in tenants}
            for stream in ("charges", "tickets")
        }
        wait_for(
            lambda: all(subjects(s) == w for s, w in wanted.items()), 120, "every item", step=1.0
        )
        tenant, item = tenants[0], items[tenants[0]][0]
        admin(simulator, f"/tenants/{tenant}/items/{item}", {"status": "moved"}, method="PATCH")

        def changed(stream: str) -> bool:
            found = events(stream).get(f"windows.{stream}/{tenant}", [])
            return [e["subject"] for e in found if e["type"] == "updated"] == [item]

        wait_for(lambda: changed("charges") and changed("tickets"), 60, "the change", step=1.0)
        time.sleep(3)  # more polls, more windows: nothing again
        for stream in ("charges", "tickets"):
            for key, found in events(stream).items():
                assert [e["sequence"] for e in found] == list(range(1, len(found) + 1)), key
                moved = 1 if key.endswith(f"/{tenant}") else 0
                assert len(found) == len(items[key.split("/")[1]]) + moved, key
    finally:
        started.stop()


def test_a_runner_killed_mid_backfill_goes_on_from_its_last_committed_window(
    kafka_bootstrap: str, prefix: str, simulator: Simulator, tmp_path: Path
) -> None:
    connector = windows()
    connector["streams"] = [s for s in connector["streams"] if s["name"] == "charges"]
    tenants = [tenant["id"] for tenant in simulator.tenants]
    for tenant in tenants:  # a slow vendor: 40 windows take 12 s, so the kill lands inside
        admin(simulator, f"/tenants/{tenant}/faults", {"delay": 0.3}, method="POST")

    def asked(tenant: str) -> list[tuple[int, int]]:
        return [
            (int(e["query"]["created[gte]"]), int(e["query"]["created[lt]"]))
            for e in admin(simulator, f"/tenants/{tenant}/log")
            if e["path"].endswith(CHARGES) and "page" not in e["query"] and e["status"] == 200
        ]

    first = runner(kafka_bootstrap, prefix, simulator, tmp_path, "first", connector)
    second = runner(kafka_bootstrap, prefix, simulator, tmp_path, "second", connector)
    first.start()
    try:
        wait_for(lambda: all(len(asked(t)) >= 6 for t in tenants), 60, "six windows", step=0.2)
        first.kill()  # SIGKILL: the committed cursors are window ends inside the backfill
        before = {t: len(asked(t)) for t in tenants}
        second.start()
        topic = f"{prefix}.events.windows.charges"

        def complete() -> bool:
            by_key = read_topic(kafka_bootstrap, topic, idle=1.0).by_key
            return all(len(by_key.get(f"windows.charges/{t}", [])) >= ITEMS for t in tenants)

        wait_for(complete, 120, "the second runner to finish the backfill", step=1.0)
        time.sleep(2)
        by_key = read_topic(kafka_bootstrap, topic, idle=1.0).by_key
        for tenant in tenants:
            events = by_key[f"windows.charges/{tenant}"]
            held = admin(simulator, f"/tenants/{tenant}/items")["data"]
            assert sorted(e["subject"] for e in events) == sorted(i["id"] for i in held)
            assert [e["sequence"] for e in events] == list(range(1, ITEMS + 1))
            windows_asked = asked(tenant)
            resumed = windows_asked[before[tenant]][0]
            assert resumed != windows_asked[0][0]  # not from the start again
            assert resumed in {end for _, end in windows_asked[: before[tenant]]}
            spans = sorted(set(windows_asked))
            for (_, end), (start, _) in itertools.pairwise(spans):
                assert start <= end, f"a gap between windows: {end} .. {start}"
            assert all(end - start <= 31 * 86_400 for start, end in spans)
    finally:
        first.stop()
        second.stop()
