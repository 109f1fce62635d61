"""One budget across two runner replicas on the real broker: together they spend it once.

Two ``watukuy.cli`` processes run the declarative example (config/invoices.yaml) against the
vendor simulator, under ``budgets: {vendor: {rate: 5/s, burst: 5}}``, with every tenant due
every 100 ms: far more demand than the budget allows, so the budget alone sets the pace. The
vendor's own request counter (``GET /_admin/stats``) is the measure, as a vendor enforcing the
quota would count: over a window, the requests of both runners together stay within
``rate x window + burst``. Each runner's bucket holds the share of the tenants it owns (the
Kafka partitions of the state topic assigned to it); a bucket each would spend about twice.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.demo import Simulator, example_config, runner_config, start_simulator
from integration.demo import write_config as write_runner_config
from tests.integration.runners import Runner, assignments, runner_env, wait_for
from watukuy.store.kafka.partitioner import partition_for

TENANTS = 8
PARTITIONS = 8
RATE, BURST = 5.0, 5
WINDOW = 10.0  # seconds the pair is measured
SLACK = 4
"""Requests beyond ``rate x window + burst`` the bound allows: requests granted just before
the window opened but counted in it, and a bucket of at least one token for a runner whose
share of the burst is below one."""


@pytest.fixture
def simulator(tmp_path: Path) -> Iterator[Simulator]:
    sim = start_simulator(
        "--tenants", str(TENANTS), "--items", "3", "--mutate-every", "0",
        "--quota", "1000000", log=tmp_path / "simulator.log",
    )  # fmt: skip
    yield sim
    sim.stop()


def counts(sim: Simulator) -> dict[str, int]:
    """API requests the vendor has answered, per tenant (``/tenants`` listings left out: they
    take no token)."""
    with urllib.request.urlopen(f"{sim.base_url}/_admin/stats", timeout=10) as response:
        tenants: dict[str, int] = json.load(response)["tenants"]
    return tenants


def measure(sim: Simulator, seconds: float) -> tuple[dict[str, int], float]:
    """Requests per tenant over about ``seconds``, and the seconds actually measured."""
    before, started = counts(sim), time.monotonic()
    time.sleep(seconds)
    after, ended = counts(sim), time.monotonic()
    return {t: after[t] - before.get(t, 0) for t in after}, ended - started


def test_two_replicas_together_stay_within_one_budget(
    kafka_bootstrap: str, prefix: str, simulator: Simulator, tmp_path: Path
) -> None:
    example = example_config({"min": "100ms", "max": "100ms"})
    example["budgets"] = {"vendor": {"rate": f"{RATE:g}/s", "burst": BURST}}
    runners: list[Runner] = []
    for name in ("budget-1", "budget-2"):
        config = runner_config(
            kafka_bootstrap, prefix, name, partitions=PARTITIONS, example=example
        )
        config["runner"]["session.timeout"] = "6s"
        path = write_runner_config(tmp_path / f"{name}.yaml", config)
        env = runner_env(simulator.base_url)
        runners.append(Runner(name, path, env, tmp_path / f"{name}.log"))
    group = f"{prefix}.runners"
    tenants = [tenant["id"] for tenant in simulator.tenants]

    def held() -> dict[str, set[int]]:
        return {k: v for k, v in assignments(kafka_bootstrap, group).items() if v}

    def everyone_polled(since: dict[str, int]) -> bool:
        now = counts(simulator)
        return all(now[t] > since.get(t, 0) for t in tenants)

    first, second = runners
    exits: list[int | None] = []
    try:
        first.start()
        wait_for(lambda: len(held()) == 1, 90, "the first runner holding every partition")
        wait_for(lambda: everyone_polled({}), 60, "the first runner polling every tenant")
        alone, alone_seconds = measure(simulator, 5.0)
        alone_rate = sum(alone.values()) / alone_seconds

        second.start()
        wait_for(lambda: len(held()) == 2, 90, "two runners sharing the partitions")
        ownership = held()
        mark = counts(simulator)
        wait_for(lambda: everyone_polled(mark), 60, "every tenant polled after the rebalance")
        time.sleep(1.0)  # let the last restores settle; shares were set on the rebalance
        assert held() == ownership, "the group rebalanced again: measure a stable split"

        pair, pair_seconds = measure(simulator, WINDOW)
        for runner in runners:
            assert runner.process is not None and runner.process.poll() is None, runner.output()
    finally:
        exits = [runner.stop(30) for runner in runners]
    assert exits == [0, 0], [runner.output()[-2000:] for runner in runners]

    total = sum(pair.values())
    bound = RATE * pair_seconds + BURST + SLACK
    by_runner = {
        name: sum(
            pair[t] for t in tenants if partition_for(f"invoices/{t}", PARTITIONS) in partitions
        )
        for name, partitions in ownership.items()
    }
    print(
        f"\nbudget {RATE:g}/s burst {BURST}: one runner {alone_rate:.2f} req/s; "
        f"two runners {total / pair_seconds:.2f} req/s together ({total} requests in "
        f"{pair_seconds:.1f}s, bound {bound:.1f}; per runner {by_runner})"
    )
    assert total <= bound, (total, bound, by_runner)
    # Both polled their own tenants (the 8 tenants sit on 6 of the 8 partitions, so any
    # balanced assignment gives each runner some): a bucket each would have spent twice.
    assert all(by_runner.values()) and len(by_runner) == 2, by_runner
    # The budget is what held them back: alone, one runner spends it all.
    assert alone_rate >= 0.7 * RATE, alone_rate
    # ...and together they still spend most of it: the split is the budget, not a stall.
    assert total >= 0.6 * RATE * pair_seconds, (total, by_runner)
