"""``parent.poll: on_change`` on real runner processes and the real broker, against the
simulator's tracker: a child is polled once when its project appears, once more when the
project is updated, never on its (one-second) timer; and a SIGKILL right after the parent's
update committed (the commit that carries the child's trigger) loses no trigger and publishes
nothing twice: the next runner polls the child if its poll had not committed, and every issue
is on the topic exactly once (read_committed).

The victim's every transaction is held open five seconds before its commit
(``--hold-transaction``), so the kill mostly lands while the child's trigger or its poll is in
a transaction not committed yet; where exactly varies with the machine, and the test holds
either way."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from integration.demo import Simulator, runner_config
from integration.demo import write_config as write_runner_config
from tests.integration.kafka_support import read_topic
from tests.integration.runners import Runner, free_port, rest_healthy, runner_env, wait_for
from tests.integration.test_child_streams_kill import Vendor, tracker

PARTITIONS = 2
PARENT, CHILD = "tracker.projects", "tracker.issues"
HOLD = 5.0  # seconds each of the victim's transactions stays open before its commit


def on_change_tracker() -> dict[str, Any]:
    """The kill test's tracker, its issues stream polled on change, with a one-second
    schedule that would poll each child every second if a timer applied."""
    config = tracker()
    issues = config["streams"][1]
    issues["parent"]["poll"] = "on_change"
    issues["schedule"] = {"min": "1s", "max": "1s"}
    return config


class One:
    """One runner at a time (a restart reuses its name, so its static membership)."""

    def __init__(self, bootstrap: str, prefix: str, vendor_url: str, tmp: Path) -> None:
        self.bootstrap, self.prefix, self.vendor_url, self.tmp = bootstrap, prefix, vendor_url, tmp
        self.runner: Runner | None = None
        self.starts = 0

    def start(self, faults: list[str] | None = None) -> Runner:
        port = free_port()
        example = {"pollers": [on_change_tracker()]}
        config = runner_config(
            self.bootstrap, self.prefix, "onchange", partitions=PARTITIONS, example=example
        )
        config["runner"]["session.timeout"] = "20s"  # longer than a held transaction
        config["rest"] = {"listen": f"127.0.0.1:{port}"}
        self.starts += 1
        path = write_runner_config(self.tmp / f"onchange-{self.starts}.yaml", config)
        log = self.tmp / f"onchange-{self.starts}.log"
        runner = Runner("onchange", path, runner_env(self.vendor_url), log, faults=faults)
        self.runner = runner
        runner.start()
        wait_for(lambda: rest_healthy(port), 90, "the runner healthy")
        return runner


@pytest.fixture
def simulator(simulator_process: Callable[..., Simulator]) -> Simulator:
    return simulator_process(1, 0, "--projects", "0", "--users", "0", "--quota", "100000")


@pytest.fixture
def one(kafka_bootstrap: str, prefix: str, simulator: Simulator, tmp_path: Path) -> Iterator[One]:
    made = One(kafka_bootstrap, prefix, simulator.base_url, tmp_path)
    try:
        yield made
    finally:
        if made.runner is not None:
            made.runner.stop(30)


def issues_by_subject(bootstrap: str, topic: str) -> dict[str, int]:
    read = read_topic(bootstrap, topic, idle=1.0)
    counts: dict[str, int] = {}
    for events in read.by_key.values():
        for event in events:
            counts[event["subject"]] = counts.get(event["subject"], 0) + 1
    return counts


def parent_updates(bootstrap: str, topic: str) -> int:
    read = read_topic(bootstrap, topic, idle=0.3)
    return sum(1 for events in read.by_key.values() for e in events if e["type"] == "updated")


def test_a_child_polls_on_its_parents_changes_and_a_trigger_survives_a_kill(
    one: One, simulator: Simulator
) -> None:
    vendor = Vendor(simulator)
    (tenant,) = vendor.slugs
    issues_topic = f"{one.prefix}.events.{CHILD}"
    projects_topic = f"{one.prefix}.events.{PARENT}"
    one.start(faults=["--hold-transaction", str(HOLD)])

    first = vendor.add_project(tenant, "p1")
    vendor.publish(tenant, "p1")
    wait_for(lambda: vendor.fetches(tenant, "p1") >= 1, 120, "the child's first poll")
    wait_for(
        lambda: set(issues_by_subject(one.bootstrap, issues_topic)) >= set(first) or None,
        60,
        "the first issues published",
    )
    time.sleep(5)  # a child on a one-second timer would be polled five times
    assert vendor.fetches(tenant, "p1") == 1

    # The project changes: its update's commit carries the child's trigger. The runner is
    # killed once that commit is on the topic, while the trigger's own commit is held open.
    later = vendor.send("POST", f"/tenants/{tenant}/issues", {"project": "p1"})["id"]
    vendor.send("PATCH", f"/tenants/{tenant}/projects/p1", {"name": "renamed"})
    wait_for(lambda: parent_updates(one.bootstrap, projects_topic) >= 1 or None, 90,
             "the parent's update committed", step=0.05)  # fmt: skip
    assert one.runner is not None
    one.runner.kill()
    # Where the kill lands in the child's trigger (its apply, its poll, its commit) varies
    # with the machine; each way, no trigger is lost and nothing is published twice. When the
    # child's poll had not committed, the restart polls it once for the surviving trigger.
    at_kill = vendor.fetches(tenant, "p1")
    committed = later in issues_by_subject(one.bootstrap, issues_topic)

    one.start()
    wait_for(
        lambda: later in issues_by_subject(one.bootstrap, issues_topic) or None,
        60,
        "the later issue published",
    )
    time.sleep(3)
    assert vendor.fetches(tenant, "p1") == at_kill + (0 if committed else 1)  # then waiting
    counts = issues_by_subject(one.bootstrap, issues_topic)
    assert counts == dict.fromkeys([*first, later], 1), counts
