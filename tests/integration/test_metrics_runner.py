"""GET /metrics and /healthz of a real runner process on the real broker: the series exist with
``poller`` and ``partition`` labels, counters move as polls happen, ``metrics.partition_label:
false`` leaves ``partition`` out; and every metric the Grafana dashboard queries is in the
answer."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from integration.demo import Simulator, example_config, runner_config
from integration.demo import write_config as write_runner_config
from tests.integration.runners import ROOT, Runner, free_port, rest_healthy, runner_env, wait_for

TENANTS = 3
ITEMS = 4
DASHBOARD = ROOT / "integration" / "grafana" / "watukuy.json"

Samples = list[tuple[str, dict[str, str], float]]


def get(port: int, path: str) -> tuple[str, bytes]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as response:
        return response.headers.get("Content-Type", ""), response.read()


def scrape(port: int) -> tuple[Samples, dict[str, str]]:
    """The samples of ``/metrics``, and each family's type by name."""
    content_type, body = get(port, "/metrics")
    assert content_type.startswith("text/plain")
    families = list(text_string_to_metric_families(body.decode()))
    samples = [(s.name, dict(s.labels), s.value) for f in families for s in f.samples]
    return samples, {f.name: f.type for f in families}


def total(samples: Samples, name: str, **labels: str) -> float:
    return sum(
        value
        for n, got, value in samples
        if n == name and all(got.get(k) == v for k, v in labels.items())
    )


def create_item(simulator: Simulator, tenant: str) -> None:
    """One new item of ``tenant`` at the vendor (its admin API)."""
    url = f"{simulator.base_url}/_admin/tenants/{tenant}/items"
    request = urllib.request.Request(url, data=b"{}", method="POST")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 201


@pytest.fixture
def simulator(simulator_process: Callable[..., Simulator]) -> Simulator:
    return simulator_process(TENANTS, ITEMS)


@pytest.fixture
def start_runner(
    kafka_bootstrap: str, prefix: str, simulator: Simulator, tmp_path: Path
) -> Iterator[Callable[..., int]]:
    """``start(name, **metrics)``: a runner of the example config with REST on a free port."""
    started: list[Runner] = []

    def start(name: str, **metrics: Any) -> int:
        example = example_config({"min": "1s", "max": "1s"})
        config = runner_config(kafka_bootstrap, prefix, name, example=example)
        port = free_port()
        config["rest"] = {"listen": f"127.0.0.1:{port}"}
        if metrics:
            config["metrics"] = metrics
        path = write_runner_config(tmp_path / f"{name}.yaml", config)
        env = runner_env(simulator.base_url)
        runner = Runner(name, path, env, tmp_path / f"{name}.log").start()
        started.append(runner)
        wait_for(lambda: rest_healthy(port), 60, f"{name}'s /health")
        return port

    yield start
    for runner in started:
        assert runner.stop() == 0, runner.output()


def test_a_runner_serves_metrics_per_tenant_and_counters_move(
    start_runner: Callable[..., int], simulator: Simulator
) -> None:
    port = start_runner("metrics-1")
    tenants = {tenant["id"] for tenant in simulator.tenants}

    def every_tenant_polled() -> Samples | None:
        samples, _ = scrape(port)
        polled = {
            labels["partition"]
            for name, labels, value in samples
            if name == "watukuy_polls_total" and value > 0
        }
        return samples if polled >= tenants else None

    first = wait_for(every_tenant_polled, 60, "a poll of every tenant in /metrics")
    for tenant in tenants:
        key = {"poller": "invoices", "partition": tenant}
        assert total(first, "watukuy_events_total", type="created", lane="live", **key) == ITEMS
        assert total(first, "watukuy_items_fetched_total", **key) >= ITEMS
        assert total(first, "watukuy_http_requests_total", status_class="2xx", **key) >= 1
        assert total(first, "watukuy_lag_seconds", **key) >= 0
        assert total(first, "watukuy_circuit_state", state="closed", **key) == 1
    assert total(first, "watukuy_owned_keys", poller="invoices") == TENANTS
    assert total(first, "watukuy_transactions_total", result="committed") >= 1
    assert total(first, "watukuy_restores_total") >= 1
    assert total(first, "watukuy_rebalances_total", change="assigned") >= 1
    assert total(first, "watukuy_budget_waits_total", budget="vendor", lane="live") >= TENANTS
    assert total(first, "process_resident_memory_bytes") > 0

    polls = total(first, "watukuy_polls_total")
    commits = total(first, "watukuy_transactions_total", result="committed")
    # An idle poll writes nothing, so a commit needs a change at the vendor: without one the
    # counter moved only if the first scrape came before the last first poll's commit.
    changed = sorted(tenants)[0]
    create_item(simulator, changed)

    def moved() -> Samples | None:
        samples, _ = scrape(port)
        later = total(samples, "watukuy_transactions_total", result="committed") > commits
        return samples if total(samples, "watukuy_polls_total") > polls and later else None

    second = wait_for(moved, 30, "the poll and commit counters to move (schedule 1s)")
    created = {"poller": "invoices", "partition": changed, "type": "created", "lane": "live"}
    assert total(second, "watukuy_events_total", **created) == ITEMS + 1
    assert total(second, "watukuy_polls_total", outcome="ok") + total(
        second, "watukuy_polls_total", outcome="not_modified"
    ) == total(second, "watukuy_polls_total")

    content_type, body = get(port, "/healthz")
    assert content_type.startswith("application/json")
    health = json.loads(body)
    assert {key["partition"] for key in health["keys"]} == tenants
    for key in health["keys"]:
        assert key["circuit"] == "closed" and key["lag"] is not None
        assert key["parked"] == {"invalid": 0, "poison": 0}
        assert set(key["lanes"]) == {"live", "backfill", "reconcile"}
        assert key["lanes"]["live"]["cursor"] is not None  # the resume token
        assert key["lanes"]["backfill"]["active"] is False


def test_without_the_partition_label_no_series_carries_one(
    start_runner: Callable[..., int],
) -> None:
    port = start_runner("metrics-agg", partition_label=False)

    def polled() -> Samples | None:
        samples, _ = scrape(port)
        return samples if total(samples, "watukuy_events_total") >= TENANTS * ITEMS else None

    samples = wait_for(polled, 60, "every tenant's events in /metrics")
    assert not [s for s in samples if "partition" in s[1]]
    assert total(samples, "watukuy_events_total", poller="invoices", type="created") == (
        TENANTS * ITEMS
    )
    assert total(samples, "watukuy_circuit_state", poller="invoices", state="closed") == TENANTS


# -- the dashboard ---------------------------------------------------------------------------


def dashboard_queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [
        target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])
    ]
    queries += [v["definition"] for v in dashboard["templating"]["list"] if "definition" in v]
    return queries


def test_every_metric_the_dashboard_queries_is_in_a_live_answer(
    start_runner: Callable[..., int],
) -> None:
    queries = dashboard_queries()
    named = {name for query in queries for name in re.findall(r"\b(?:watukuy|process)_\w+", query)}
    assert len(named) >= 15
    for wanted in ("watukuy_lag_seconds", "watukuy_events_total", "watukuy_circuit_state"):
        assert wanted in named
    port = start_runner("metrics-dash")

    def polled() -> tuple[Samples, dict[str, str]] | None:
        got = scrape(port)
        return got if total(got[0], "watukuy_transactions_total") > 0 else None

    samples, types = wait_for(polled, 60, "a committed poll in /metrics")
    served: set[str] = set()
    for family, kind in types.items():
        suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"]}
        served |= {family + suffix for suffix in suffixes.get(kind, [""])}
    assert named <= served, f"queried but not served: {sorted(named - served)}"
    # and most of them with samples already (labelled counters appear once they move; this
    # runner's config has no webhook block, so the webhook panels' series never move here)
    hooked = {"watukuy_webhooks_total", "watukuy_webhook_wake_seconds_bucket"}
    assert hooked <= named
    with_samples = {name for name, _, _ in samples}
    expected = named - hooked
    assert len(expected & with_samples) >= len(expected) - 3, sorted(expected - with_samples)
