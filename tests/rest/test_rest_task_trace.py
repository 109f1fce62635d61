"""A task's ``trace`` says why it is FAILED or UNASSIGNED, as Kafka Connect's task status does;
a task that runs has none."""

from __future__ import annotations

from pathlib import Path

from tests.rest.support import runner_control
from watukuy.control.configs import Connector
from watukuy.control.keystatus import KeyStatus
from watukuy.core.errors import Conflict

WAITING = "waits for a newer release: its state was written by state format 3"


class Statuses:
    def view(self, name: str) -> list[KeyStatus]:
        def key(partition: str, state: str, error: str | None) -> KeyStatus:
            return KeyStatus(
                "orders",
                partition,
                state,
                "runner-2",
                1.0,
                "closed",
                last_error=error,  # type: ignore[arg-type]
            )

        return [
            key("acme", "FAILED", "GET {base}/items -> 503"),
            key("globex", "UNASSIGNED", WAITING),
            key("initech", "RUNNING", "GET {base}/items -> 503"),  # an old error, since healed
        ]


class Engine_:
    def listed(self, name: str) -> list[str]:
        return []


class Configs:
    def get(self, name: str) -> Connector | None:
        return Connector(name, {"request": {}}, "RUNNING", 1) if name == "orders" else None


async def test_a_task_says_why_it_is_failed_or_unassigned_and_nothing_when_running(
    tmp_path: Path,
) -> None:
    control = runner_control(Engine_(), tmp_path, configs=Configs(), status=Statuses())
    tasks = {task["partition"]: task for task in (await control.status("orders"))["tasks"]}
    assert tasks["acme"]["state"] == "FAILED"
    assert tasks["acme"].get("trace") == "GET {base}/items -> 503"
    assert tasks["globex"]["state"] == "UNASSIGNED"
    assert tasks["globex"].get("trace") == WAITING
    assert tasks["initech"]["state"] == "RUNNING" and "trace" not in tasks["initech"]


class Refusing(Engine_):
    """Triggers every listed key but one, which waits for a newer release."""

    def __init__(self) -> None:
        self.triggered: list[str] = []
        self.pollers: dict[str, object] = {}  # not taken yet: keys are named as they are

    def listed(self, name: str) -> list[str]:
        return ["acme", "globex", "initech"]

    async def restart(self, name: str) -> None:
        pass

    async def operate(
        self, operation: str, poller: str, *, partition: str | None = None, args: object = None
    ) -> None:
        if partition == "globex":
            raise Conflict(f"orders/globex {WAITING}")
        self.triggered.append(str(partition))


async def test_a_restart_with_its_tasks_skips_a_key_that_cannot_run_here(tmp_path: Path) -> None:
    # It answered 409 and left the keys after the waiting one untriggered.
    engine = Refusing()
    control = runner_control(engine, tmp_path, configs=Configs(), status=Statuses())
    await control.restart("orders", include_tasks=True, only_failed=False)
    assert engine.triggered == ["acme", "initech"]
