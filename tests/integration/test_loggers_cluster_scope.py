"""KIP-495's ``/admin/loggers`` on live runner processes: a worker-scoped level stays on the
runner it was sent to, a cluster-scoped one reaches every runner through ``<prefix>.configs``,
one started afterwards included."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from integration.demo import Simulator
from tests.integration.runners import (
    Runner,
    free_port,
    rest_healthy,
    runner_env,
    wait_for,
    write_config,
)
from tests.integration.test_rest_runners import call

LOGGER = "watukuy.engine"


@pytest.fixture
def start_runner(
    kafka_bootstrap: str,
    prefix: str,
    simulator_process: Callable[..., Simulator],
    tmp_path: Path,
) -> Iterator[Callable[[str], int]]:
    """``start(name)``: a runner of the shared group, healthy, its REST port returned."""
    simulator = simulator_process(1, 1)
    runners: list[Runner] = []

    def start(name: str) -> int:
        port = free_port()
        path = write_config(tmp_path / f"{name}.yaml", kafka_bootstrap, prefix, name)
        path.write_text(path.read_text() + f"rest:\n  listen: 127.0.0.1:{port}\n")
        env = runner_env(simulator.base_url)
        runners.append(Runner(name, path, env, tmp_path / f"{name}.log").start())
        wait_for(lambda: rest_healthy(port), 60, f"{name}'s /health")
        return port

    try:
        yield start
    finally:
        for runner in runners:
            assert runner.stop() == 0, runner.output()


def test_worker_scope_stays_here_and_cluster_scope_reaches_every_runner(
    start_runner: Callable[[str], int],
) -> None:
    a, b = start_runner("logs-1"), start_runner("logs-2")

    code, listed = call(a, "GET", "/admin/loggers")
    assert code == 200 and listed["watukuy"]["last_modified"] is None
    assert listed["watukuy"]["level"] == "DEBUG"  # the tests run runners with --debug
    assert set(listed["root"]) == {"level", "last_modified"}

    # Worker scope: this runner alone.
    code, changed = call(a, "PUT", f"/admin/loggers/{LOGGER}", {"level": "WARN"})
    assert code == 200 and LOGGER in changed
    code, level = call(a, "GET", f"/admin/loggers/{LOGGER}")
    assert code == 200 and level["level"] == "WARN" and isinstance(level["last_modified"], int)
    assert call(b, "GET", f"/admin/loggers/{LOGGER}")[0] == 404

    # Cluster scope, sent to the other runner: both apply it.
    code, _ = call(b, "PUT", f"/admin/loggers/{LOGGER}?scope=cluster", {"level": "error"})
    assert code == 204
    assert call(b, "GET", f"/admin/loggers/{LOGGER}")[1]["level"] == "ERROR"  # read back first
    wait_for(
        lambda: call(a, "GET", f"/admin/loggers/{LOGGER}")[1]["level"] == "ERROR",
        30,
        "the cluster-scoped level on the other runner",
    )

    # A runner started afterwards reads it from the configs topic.
    c = start_runner("logs-3")
    assert call(c, "GET", f"/admin/loggers/{LOGGER}")[1]["level"] == "ERROR"
    assert call(c, "GET", "/admin/loggers")[1]["watukuy"]["level"] == "DEBUG"  # not below it
