"""The REST examples of docs/rest.md, run as written (curl) against a real runner on the real
broker."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from integration.demo import Simulator, example_config, runner_config
from integration.demo import write_config as write_runner_config
from tests.integration.kafka_support import delete_prefix, unique_prefix
from tests.integration.runners import ROOT, Runner, free_port, runner_env, wait_for

BLOCK = re.compile(
    r"<!-- rest-examples:start -->\n```sh\n(.*?)```\n<!-- rest-examples:end -->", re.S
)


def example_commands() -> list[str]:
    found = BLOCK.search((ROOT / "docs" / "rest.md").read_text(encoding="utf-8"))
    assert found, "the REST examples block of docs/rest.md is missing"
    return [line for line in found.group(1).splitlines() if line.startswith("curl ")]


@pytest.fixture
def simulator(simulator_process: Callable[..., Simulator]) -> Simulator:
    return simulator_process(2, 3)


def test_the_rest_examples_run(kafka_bootstrap: str, simulator: Simulator, tmp_path: Path) -> None:
    curl = shutil.which("curl")
    assert curl is not None, "curl is needed to run the REST examples"
    commands = example_commands()
    assert len(commands) >= 10
    prefix = unique_prefix()
    port = free_port()
    config = runner_config(kafka_bootstrap, prefix, "readme", example=example_config())
    config["rest"] = {"listen": f"127.0.0.1:{port}"}
    path = write_runner_config(tmp_path / "runner.yaml", config)
    runner = Runner("readme", path, runner_env(simulator.base_url), tmp_path / "r.log").start()
    try:
        wait_for(lambda: _ok(f"curl -sf localhost:{port}/health"), 60, "the runner's REST API")
        for command in commands:
            shell = command.replace("localhost:8083", f"localhost:{port}")
            # A created connector lists its partitions a moment later: give each step a while.
            deadline = time.monotonic() + 30
            while not _ok(shell):
                assert time.monotonic() < deadline, f"{command!r} failed: {_run(shell).stderr}"
                time.sleep(0.5)
    finally:
        assert runner.stop() == 0, runner.output()
        delete_prefix(kafka_bootstrap, prefix)


def _run(shell: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", shell], capture_output=True, text=True, timeout=60, cwd=ROOT
    )


def _ok(shell: str) -> bool:
    return _run(shell).returncode == 0
