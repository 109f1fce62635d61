"""Runner instances as real processes for the integration tests: those of
:mod:`integration.runners` (which the fault suite runs too), with the tests' defaults."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from integration import runners
from integration.demo_pieces import Simulator, runner_config
from integration.demo_pieces import write_config as write_yaml
from integration.processes import free_port
from integration.runners import ROOT, RunnerProcess, assignments, runner_env

__all__ = [
    "ROOT",
    "Runner",
    "admin",
    "assignments",
    "free_port",
    "runner_env",
    "wait_for",
    "write_config",
]

T = TypeVar("T")


def write_config(
    path: Path, bootstrap: str, prefix: str, runner: str, **runner_options: Any
) -> Path:
    """A runner config of the Python poller ``integration.pollers:invoices``, 8 partitions."""
    config = runner_config(bootstrap, prefix, runner, partitions=8)
    # Shorter than the 10s default so the suite stays quick; set it to measure defaults.
    timeout = os.environ.get("WATUKUY_TEST_SESSION_TIMEOUT", "6s")
    config["runner"] |= {"session.timeout": timeout, **runner_options}
    return write_yaml(path, config)


@dataclass
class Runner(RunnerProcess):
    """A runner with ``--debug``; ``Runner(name, config, env, log, faults=[...])`` runs the
    fault-injecting one. Nothing but the runner writes its log: tests parse it line by line."""

    debug: bool = True
    start_lines: bool = False


def wait_for(predicate: Callable[[], T | None], timeout: float, what: str, step: float = 0.2) -> T:
    """:func:`integration.runners.wait_for`, its timeout a test failure (AssertionError)."""
    try:
        return runners.wait_for(predicate, timeout, what, step)
    except TimeoutError as exc:
        raise AssertionError(str(exc)) from None


def rest_healthy(port: int) -> bool:
    """Whether a runner's REST API on ``port`` answers ``GET /health`` with 200 (KIP-1017:
    started and polling); ``False`` while it is not listening yet or still starting."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as answer:
            return bool(answer.status == 200)
    except (OSError, urllib.error.HTTPError):
        return False


def admin(simulator: Simulator, path: str, body: Any = None, method: str = "GET") -> Any:
    """The simulator's admin API (``/_admin`` + ``path``): its JSON answer, ``None`` if empty."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{simulator.base_url}/_admin{path}", data, method=method)
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=10) as answer:
        text = answer.read()
    return json.loads(text) if text else None
