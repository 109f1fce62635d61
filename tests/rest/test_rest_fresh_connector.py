"""An operation on a partition of a connector written moments ago is accepted, not a 404: the
runner that answered the write (or another) takes the connector into its engine apart from the
request, so the operation waits for the engine to have it and to have listed its partitions.
Found by the fault suite's REST scenario (integration/faults/scenarios/s09_rest_fire.py): a
pause sent right after the 201 of ``POST /connectors`` was a 404 for a while."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.rest.support import runner_control
from watukuy.control.configs import Connector
from watukuy.control.service import RunnerControl
from watukuy.core.poller import Partition
from watukuy.rest.errors import NotFound


class LateEngine:
    """Just what ``RunnerControl.operate`` asks of an engine, for a connector it does not have
    yet: ``take()`` installs it (its partitions not listed until a refresh)."""

    def __init__(self) -> None:
        self.pollers: dict[str, object] = {}
        self.partitions = self
        self.refreshed = False
        self.sent: list[tuple[str, str, str | None]] = []

    def take(self) -> None:
        self.pollers["orders"] = SimpleNamespace(partitioned=True)

    def listed(self, name: str) -> list[str]:
        return ["acme", "globex"] if self.refreshed else []

    async def list(self, name: str) -> list[Partition]:
        assert name in self.pollers
        self.refreshed = True
        return [Partition("acme"), Partition("globex")]

    async def operate(
        self, operation: str, poller: str, *, partition: str | None = None, args: object = None
    ) -> None:
        self.sent.append((operation, poller, partition))


class Configs:
    """The configs topic's view: ``orders`` is written (as ``POST /connectors`` leaves it)."""

    def get(self, name: str) -> Connector | None:
        return Connector(name, {"request": {}}, "RUNNING", 1) if name == "orders" else None


def control_over(engine: LateEngine, tmp_path: Path) -> RunnerControl:
    return runner_control(engine, tmp_path, configs=Configs())


async def test_an_operation_waits_for_the_engine_to_take_the_connector(tmp_path: Path) -> None:
    engine = LateEngine()
    control = control_over(engine, tmp_path)
    asyncio.get_running_loop().call_later(0.2, engine.take)
    await control.operate("orders", "acme", "pause", {})
    assert engine.sent == [("pause", "orders", "acme")]


async def test_an_unknown_partition_is_still_404(tmp_path: Path) -> None:
    engine = LateEngine()
    engine.take()
    control = control_over(engine, tmp_path)
    with pytest.raises(NotFound, match="connector orders has no partition 'nope'"):
        await control.operate("orders", "nope", "pause", {})
    assert engine.sent == []
