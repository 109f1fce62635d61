"""A connector with ``streams:`` over REST (CONTRACT.md, "Several streams"): listed once, its
status every stream's tasks with a ``stream`` field, its target and restart for all its
streams; per-key routes take ``{connector}.{stream}``, and a child key's ``/`` is ``%2F``.

Over the real RunnerControl and ConfigApplier, with an engine on the memory store; the
configs and status topics are stood in for."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from tests.rest.support import API, error_of, runner_control
from watukuy import Engine, MemoryStore, define_poller
from watukuy.control.applier import ConfigApplier
from watukuy.control.configs import Connector
from watukuy.control.keystatus import KeyStatus
from watukuy.core.lifecycle import Target, TaskState
from watukuy.rest import build_app

TRACKER: dict[str, Any] = {
    "partitions": {
        "static": [
            {"key": "acme", "data": {"slug": "acme"}},
            {"key": "acme/P1", "data": {"slug": "acme"}},
            {"key": "globex", "data": {"slug": "globex"}},
        ]
    },
    "defaults": {"records": "data", "identity": "id", "schedule": {"min": "30s"}},
    "streams": [
        {"name": "projects", "request": {"url": f"{API}/{{partition.data.slug}}/projects"}},
        {"name": "issues", "request": {"url": f"{API}/{{partition.data.slug}}/issues"}},
    ],
}
"""Two streams; the same static keys for both (a child key among them, as a child stream's
partitions are named), which is enough for what REST shows."""


@dataclass
class Configs:
    """``<prefix>.configs`` as the control reads and writes it; writes go to the applier, as
    the topic's listener would hand them over."""

    applier: ConfigApplier
    records: dict[str, Connector] = field(default_factory=dict)
    targets: list[tuple[str, str]] = field(default_factory=list)

    def get(self, name: str) -> Connector | None:
        return self.records.get(name)

    def view(self) -> dict[str, tuple[Mapping[str, Any] | None, Target]]:
        return {name: (c.config, c.target) for name, c in self.records.items()}

    async def set_target(self, name: str, target: Target) -> None:
        found = self.records[name]
        self.records[name] = Connector(name, found.config, target, found.version + 1)
        self.targets.append((name, target.value))
        await self.applier.apply(name, found.config, target)

    async def put_target(self, name: str, target: Target) -> int:
        self.targets.append((name, target.value))
        await self.applier.apply(name, None, target)
        return 1


class Status:
    """``<prefix>.status``: the owners' last records, by poller."""

    def __init__(self) -> None:
        self.records: dict[str, list[KeyStatus]] = {}

    def view(self, poller: str | None = None) -> list[KeyStatus]:
        return list(self.records.get(poller or "", []))

    def active_topics(self, connector: str) -> list[str]:
        return [f"p.events.{connector}"] if connector.startswith("tracker.") else []


def running(poller: str, partition: str) -> KeyStatus:
    return KeyStatus(poller, partition, TaskState.RUNNING, "runner-1", 0.5, "closed")


@dataclass
class Cluster:
    client: TestClient[Any, Any]
    engine: Engine
    configs: Configs
    status: Status


@asynccontextmanager
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    """``tracker`` (REST, two streams) and ``tickets`` (config file, one poller)."""
    tickets = define_poller(name="tickets", fetch=lambda ctx: [], identity=lambda item: item)
    async with Engine([tickets], store=MemoryStore()) as engine:
        applier = ConfigApplier(engine, ["tickets"], tmp_path)
        configs = Configs(applier)
        configs.records["tracker"] = Connector("tracker", TRACKER, Target.RUNNING, 1)
        await applier.apply_view(configs.view())
        status = Status()
        status.records["tracker.issues"] = [running("tracker.issues", "acme/P1")]
        control = runner_control(
            engine,
            tmp_path,
            configs=configs,
            status=status,
            file_pollers={"tickets": "mypackage.pollers:tickets"},
        )
        async with TestClient(TestServer(build_app(control))) as client:
            yield Cluster(client, engine, configs, status)


async def test_a_connector_is_listed_once_and_runs_a_poller_per_stream(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        assert await (await c.client.get("/connectors")).json() == ["tickets", "tracker"]
        expanded = await (await c.client.get("/connectors?expand=status")).json()
        assert sorted(expanded) == ["tickets", "tracker"]
        assert sorted(c.engine.pollers) == ["tickets", "tracker.issues", "tracker.projects"]


async def test_the_status_lists_every_streams_tasks_with_its_stream(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        body = await (await c.client.get("/connectors/tracker/status")).json()
        shown = [(t["id"], t["stream"], t["partition"], t["state"]) for t in body["tasks"]]
        assert shown == [  # listed by both; only one key has its owner's record yet
            (0, "issues", "acme", "UNASSIGNED"),
            (1, "issues", "acme/P1", "RUNNING"),
            (2, "issues", "globex", "UNASSIGNED"),
            (3, "projects", "acme", "UNASSIGNED"),
            (4, "projects", "acme/P1", "UNASSIGNED"),
            (5, "projects", "globex", "UNASSIGNED"),
        ]
        alone = await (await c.client.get("/connectors/tracker.issues/status")).json()
        assert alone["name"] == "tracker.issues"
        assert [(t["id"], t["partition"]) for t in alone["tasks"]] == [
            (0, "acme"),
            (1, "acme/P1"),
            (2, "globex"),
        ]
        assert all("stream" not in t for t in alone["tasks"])  # the name says which
        tasks = await (await c.client.get("/connectors/tracker/tasks")).json()
        assert tasks[4]["config"] == {"partition": "acme/P1", "stream": "projects"}
        plain = await (await c.client.get("/connectors/tickets/status")).json()
        assert all("stream" not in t for t in plain["tasks"])


async def test_pause_resume_and_stop_apply_to_every_stream(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        for verb, state in (("pause", "PAUSED"), ("stop", "STOPPED"), ("resume", "RUNNING")):
            assert (await c.client.put(f"/connectors/tracker/{verb}")).status == 202
            targets = {c.engine.target(p) for p in ("tracker.projects", "tracker.issues")}
            assert targets == {state}
            body = await (await c.client.get("/connectors/tracker/status")).json()
            assert body["connector"]["state"] == state
        assert c.configs.targets == [
            ("tracker", "PAUSED"),
            ("tracker", "STOPPED"),
            ("tracker", "RUNNING"),
        ]


async def test_a_stream_follows_its_connectors_target(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        message = await error_of(await c.client.put("/connectors/tracker.issues/pause"), 409)
        assert "stream issues of connector tracker" in message
        assert "PUT /connectors/tracker/" in message
        assert c.configs.targets == []


async def test_per_key_routes_take_the_streams_name(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        listed = await (await c.client.get("/connectors/tracker.projects/partitions")).json()
        assert [p["key"] for p in listed] == ["acme", "acme/P1", "globex"]
        whole = await c.client.get("/connectors/tracker/partitions")
        message = await error_of(whole, 404)
        assert message == (
            "connector tracker has streams (issues, projects), each with keys of its own: "
            "name one, as tracker.issues"
        )
        unknown = await c.client.get("/connectors/tracker.nope/partitions")
        assert await error_of(unknown, 404) == "connector tracker.nope not found"


async def test_a_child_key_is_written_with_2f_in_a_path(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        path = "/connectors/tracker.projects/partitions/acme%2FP1/pause"
        assert (await c.client.post(path)).status == 202
        paused = [
            e.partition for e in c.engine.inspect() if e.poller == "tracker.projects" and e.paused
        ]
        assert paused == ["acme/P1"]
        slash = await c.client.post("/connectors/tracker.projects/partitions/acme/P1/pause")
        assert slash.status == 404  # a raw '/' is another route: none


async def test_a_task_restart_triggers_the_key_of_its_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with cluster(tmp_path) as c:
        triggered: list[tuple[str, str | None]] = []

        async def trigger(op: str, poller: str, *, partition: str | None = None, **_: Any) -> None:
            triggered.append((poller, partition))

        monkeypatch.setattr(c.engine, "operate", trigger)
        assert (await c.client.post("/connectors/tracker/tasks/4/restart")).status == 204
        assert triggered == [("tracker.projects", "acme/P1")]


async def test_topics_are_every_streams(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        body = await (await c.client.get("/connectors/tracker/topics")).json()
        assert body == {
            "tracker": {"topics": ["p.events.tracker.issues", "p.events.tracker.projects"]}
        }


async def test_a_stream_dropped_from_the_config_stops_and_deleting_stops_all(
    tmp_path: Path,
) -> None:
    async with cluster(tmp_path) as c:
        applier = c.configs.applier
        fewer = {**TRACKER, "streams": TRACKER["streams"][:1]}
        await applier.apply("tracker", fewer, Target.RUNNING)
        assert sorted(c.engine.pollers) == ["tickets", "tracker.projects"]
        await applier.apply("tracker", None, None)
        assert sorted(c.engine.pollers) == ["tickets"]


async def test_a_streams_name_is_not_a_connector_to_configure(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        got = await c.client.get("/connectors/tracker.issues")
        assert (await error_of(got, 404)).startswith(
            "connector tracker.issues not found: it is stream issues of connector tracker"
        )
        body = {"name": "tracker.issues", "config": {"request": {"url": f"{API}/x"}}}
        taken = await c.client.post("/connectors", json=body)
        assert "a connector cannot take its name" in await error_of(taken, 409)


async def test_a_child_streams_partitions_are_every_owners(tmp_path: Path) -> None:
    # A child stream's keys are created by its parent's commits where their Kafka partition
    # lives: the runner answering holds none of them here, its peers do.
    board = {
        "partitions": {"static": [{"key": "acme", "data": {"slug": "acme"}}]},
        "defaults": {"records": "data", "identity": "id", "schedule": {"min": "30s"}},
        "streams": [
            {"name": "projects", "request": {"url": f"{API}/{{partition.data.slug}}/projects"}},
            {
                "name": "issues",
                "parent": {"stream": "projects", "key": "id"},
                "request": {"url": f"{API}/{{partition.data.slug}}/{{parent.key}}/issues"},
            },
        ],
    }
    async with cluster(tmp_path) as c:
        c.configs.records["board"] = Connector("board", board, Target.RUNNING, 1)
        await c.configs.applier.apply_view(c.configs.view())
        status = c.status
        status.records["board.issues"] = [
            running("board.issues", "acme/P1"),
            replace(running("board.issues", "acme/P2"), owner="runner-2"),
        ]
        listed = await (await c.client.get("/connectors/board.issues/partitions")).json()
        assert [(p["key"], p["state"], p["owner"]) for p in listed] == [
            ("acme/P1", "RUNNING", "runner-1"),
            ("acme/P2", "RUNNING", "runner-2"),
        ]
        # A tenant stream lists its tenants, not whatever the status topic remembers.
        status.records["board.projects"] = [running("board.projects", "gone")]
        roots = await (await c.client.get("/connectors/board.projects/partitions")).json()
        assert [p["key"] for p in roots] == ["acme"]
