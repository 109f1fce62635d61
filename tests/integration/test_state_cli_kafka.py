"""``watukuy-source state info`` against the real broker: once a runner with a local state store
has stopped, its store is level with the topics (lag 0); once another runner id has polled and
written to the topics, the stopped runner's store shows it behind (a positive lag)."""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.engine.support import Env, simulated
from tests.integration.kafka_support import make_store, wait_owned
from tests.integration.runners import ROOT, runner_env
from watukuy import Engine
from watukuy.config import load_config
from watukuy.state_cli import info

PARTITIONS = 4


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    async with simulated(3, 5, 3) as environment:
        yield environment


async def _run_once(env: Env, bootstrap: str, prefix: str, runner: str, state_dir: Path) -> None:
    """Start a runner, let every key poll once, stop it."""
    store = make_store(bootstrap, prefix, runner, state_dir=str(state_dir), partitions=PARTITIONS)
    engine: Engine = env.make_engine(env.make_poller(limit=10), store=store)
    await engine.__aenter__()
    try:
        await wait_owned(store, PARTITIONS)
        await engine.tick()
    finally:
        await engine.close()


def _info(
    tmp_path: Path, bootstrap: str, prefix: str, runner: str, *, process: bool = False
) -> dict[str, Any]:
    """``state info --format json`` of ``runner``: in a process of its own as an operator runs
    it (``process``), else in this one (faster)."""
    config = {
        "kafka": {"bootstrap.servers": bootstrap},
        "topics": {"prefix": prefix, "partitions": PARTITIONS},
        "runner": {"id": runner, "state.dir": str(tmp_path / "state")},
        "pollers": [{"python": "integration.pollers:invoices"}],
    }
    path = tmp_path / f"{runner}.yaml"
    path.write_text(yaml.safe_dump(config))
    if not process:
        out = io.StringIO()
        info(load_config(path), fmt="json", out=out)
        found: dict[str, Any] = json.loads(out.getvalue())
        return found
    command = ["state", "info", "--format", "json", "--config", str(path)]
    done = subprocess.run(
        [sys.executable, "-m", "watukuy.cli", *command],
        cwd=ROOT,
        env=runner_env("http://127.0.0.1:9"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    shown: dict[str, Any] = json.loads(done.stdout)
    return shown


def _lag(shown: dict[str, Any]) -> dict[int, int]:
    assert shown["lag_known"], shown
    return {p["partition"]: sum(p["lag"].values()) for p in shown["partitions"]}


async def test_state_info_shows_lag_0_after_a_stop_and_a_lag_once_another_runner_wrote(
    env: Env, kafka_bootstrap: str, prefix: str, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    await _run_once(env, kafka_bootstrap, prefix, "r1", state)
    # Its last commit's state records (and commit markers) are not in the store yet: the tail
    # had not read them back when it stopped. A few offsets; a restart reads only those.
    first = _lag(await asyncio.to_thread(_info, tmp_path, kafka_bootstrap, prefix, "r1"))
    assert sorted(first) == list(range(PARTITIONS))
    assert all(0 <= lag <= 4 for lag in first.values()), first

    # Started again with nothing due, it reads them, and stops level with the topics.
    await _run_once(env, kafka_bootstrap, prefix, "r1", state)
    shown = await asyncio.to_thread(_info, tmp_path, kafka_bootstrap, prefix, "r1")
    assert set(_lag(shown).values()) == {0}, shown
    assert sum(p["keys"] for p in shown["partitions"]) == 3  # one per tenant
    assert sum(p["records"] for p in shown["partitions"]) == 3 + 15  # states and items

    # Another runner id takes the keys over and writes new items and states.
    for tenant in env.tenants:
        env.sim.create_item(tenant.id)
    env.clock.advance(60)
    await _run_once(env, kafka_bootstrap, prefix, "r2", state)
    shown = await asyncio.to_thread(_info, tmp_path, kafka_bootstrap, prefix, "r1", process=True)
    behind = _lag(shown)
    assert sum(behind.values()) >= 3 + 3, behind  # at least the new items and states
