"""An operation on a key that moves to another runner while this one applies it (the store
fences the commit) is a 503 to retry, like Kafka out of reach: nothing was committed, and a
retry reaches the new owner. It was a 500 "internal error" (found by the fault suite's REST
scenario, integration/faults/scenarios/s09_rest_fire.py, while a runner was killed). The
runner's control now sends the operation to the new owner at once when the key is no longer
its own."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.rest.fake_control import FakeControl
from tests.rest.support import error_of, rest_client, runner_control, seed
from watukuy.control.service import RunnerControl
from watukuy.core.errors import ConfigError, Fenced, Retriable


async def test_a_key_fenced_meanwhile_is_503_to_retry() -> None:
    fake = seed(FakeControl())
    fake.fail_with = Fenced("tenants/acme: epoch 3 is stale (store has 4)")
    async with rest_client(fake) as client:
        response = await client.post("/connectors/tenants/partitions/acme/resume")
        message = await error_of(response, 503)
    assert message == "temporarily unavailable: try again shortly"
    assert response.headers["Retry-After"] == "5"


class MovingEngine:
    """Just what ``RunnerControl.operate`` asks of an engine. The first ``operate`` finds the
    key fenced (another runner took it over); from then on the store says it is another's,
    and ``operate`` sends the operation to it (here: records it)."""

    def __init__(self) -> None:
        self.store = self
        self.moved = False
        self.sent: list[tuple[str, str, str | None, object]] = []

    def listed(self, name: str) -> list[str]:
        return ["acme"]

    def owns(self, poller: str, partition: str) -> bool:
        return not self.moved

    async def operate(
        self, operation: str, poller: str, *, partition: str | None = None, args: object = None
    ) -> None:
        if not self.moved:
            self.moved = True
            raise Fenced(f"{poller}/{partition}: owned by another instance")
        self.sent.append((operation, poller, partition, args))

    @property
    def pollers(self) -> dict[str, object]:
        return {}


class NoConfigs:
    def get(self, name: str) -> None:
        return None


async def test_an_operation_fenced_meanwhile_goes_to_the_new_owner(tmp_path: Path) -> None:
    engine = MovingEngine()
    control = control_over(engine, tmp_path)
    await control.operate("invoices", "acme", "trigger", {})
    assert engine.sent == [("trigger", "invoices", "acme", {})]


class RestartingEngine(MovingEngine):
    """A key listed and owned here, but not held while its connector is redefined: the
    first ``operate`` finds no active partition; the key is held again soon after."""

    def __init__(self, held_again: bool) -> None:
        super().__init__()
        self.held_again = held_again
        self.tries = 0

    def owns(self, poller: str, partition: str) -> bool:
        return True

    def inspect(self) -> list[SimpleNamespace]:
        held = self.held_again and self.tries > 0
        return [SimpleNamespace(poller="invoices", partition="acme")] if held else []

    async def operate(
        self, operation: str, poller: str, *, partition: str | None = None, args: object = None
    ) -> None:
        self.tries += 1
        if self.tries == 1:
            raise ConfigError(f"poller '{poller}' has no active partition 'acme'", "partition")
        self.sent.append((operation, poller, partition, args))


def control_over(engine: MovingEngine, tmp_path: Path) -> RunnerControl:
    return runner_control(
        engine,
        tmp_path,
        configs=NoConfigs(),
        file_pollers={"invoices": "mypackage.pollers:invoices"},
    )


async def test_an_operation_on_a_key_being_restarted_waits_for_it(tmp_path: Path) -> None:
    """It was a 400 "has no active partition" while a PUT redefined the connector."""
    engine = RestartingEngine(held_again=True)
    await control_over(engine, tmp_path).operate("invoices", "acme", "trigger", {})
    assert engine.sent == [("trigger", "invoices", "acme", {})]


async def test_a_key_that_stays_away_is_503(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("watukuy.control.keyops.APPLY_WAIT", 0.2)
    engine = RestartingEngine(held_again=False)
    with pytest.raises(Retriable, match="is restarting here; try again"):
        await control_over(engine, tmp_path).operate("invoices", "acme", "trigger", {})
    assert engine.sent == []
