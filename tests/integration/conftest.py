"""Fixtures the integration tests share: a fresh topics prefix, and the vendor simulator as a
process of its own (runner processes reach it over HTTP; it keeps its own clock)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from integration.demo import Simulator, start_simulator
from tests.integration.kafka_support import delete_prefix, unique_prefix


@pytest.fixture
def prefix(kafka_bootstrap: str) -> Iterator[str]:
    """A topics prefix of this test's own; its topics are deleted afterwards."""
    name = unique_prefix()
    yield name
    delete_prefix(kafka_bootstrap, name)


@pytest.fixture
def simulator_process(tmp_path: Path) -> Iterator[Callable[..., Simulator]]:
    """``start(tenants, items, *options)``: a simulator that changes nothing by itself
    (``--mutate-every 0``), so the items it holds are exactly what must arrive."""
    started: list[Simulator] = []

    def start(tenants: int, items: int, *options: str) -> Simulator:
        sim = start_simulator(
            "--tenants", str(tenants), "--items", str(items), "--mutate-every", "0", *options,
            log=tmp_path / f"simulator-{len(started)}.log",
        )  # fmt: skip
        started.append(sim)
        return sim

    yield start
    for sim in started:
        sim.stop()
