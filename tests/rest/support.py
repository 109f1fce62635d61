"""What the REST tests share: a client over the app with a FakeControl, seed data, and the
real RunnerControl over stand-ins."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

from aiohttp.test_utils import TestClient, TestServer

from tests.rest.fake_control import FakeControl
from watukuy.config.model import RestAuth
from watukuy.control.configs import ConfigTopic
from watukuy.control.loggers import LoggerLevels
from watukuy.control.service import RunnerControl
from watukuy.control.status import StatusTopic
from watukuy.control.stored import StoredKeys
from watukuy.engine.engine import Engine
from watukuy.rest import build_app
from watukuy.store.kafka.topics import TopicLayout

API = "https://api.test"


def config(**overrides: Any) -> dict[str, Any]:
    """A minimal declarative connector config; ``overrides`` replace top-level keys."""
    base: dict[str, Any] = {"request": {"url": f"{API}/items"}, "records": "data", "identity": "id"}
    base.update(overrides)
    return base


def flat_config(name: str, **settings: str) -> dict[str, str]:
    """:func:`config` as Connect's clients see it: the class, the name, a string per setting."""
    return {
        "connector.class": "http",
        "name": name,
        "request.url": f"{API}/items",
        "records": "data",
        "identity": "id",
        **settings,
    }


def partitioned(*keys: str, **overrides: Any) -> dict[str, Any]:
    static = [{"key": key, "data": {"slug": key}} for key in keys]
    return config(
        partitions={"static": static},
        request={"url": f"{API}/{{partition.data.slug}}/items"},
        **overrides,
    )


PARKED = [
    {"id": "p1", "partition": "acme", "kind": "poison", "error": "boom", "attempts": 3},
    {"id": "p2", "partition": "acme", "kind": "invalid", "error": "no id", "attempts": 1},
    {"id": "p3", "partition": "globex", "kind": "poison", "error": "boom", "attempts": 2},
]


def seed(fake: FakeControl) -> FakeControl:
    """``tickets`` (REST, unpartitioned), ``tenants`` (REST, keys acme and globex, parked
    items) and ``invoices`` (from the config file)."""
    fake.connectors_by_name.clear()
    fake.accepted.clear()
    fake.add("tickets", config())
    fake.add("tenants", partitioned("acme", "globex"), parked=[dict(p) for p in PARKED])
    fake.add("invoices", {"python": "mypackage.pollers:invoices"}, origin="config-file")
    return fake


@asynccontextmanager
async def rest_client(
    fake: FakeControl | None = None, auth: RestAuth | None = None, **options: Any
) -> AsyncIterator[TestClient[Any, Any]]:
    app = build_app(fake if fake is not None else seed(FakeControl()), auth, **options)
    async with TestClient(TestServer(app)) as client:
        yield client


async def error_of(response: Any, status: int) -> str:
    """The message of an error answer, after checking its status and shape."""
    assert response.status == status, await response.text()
    assert response.content_type == "application/json"
    body = await response.json()
    assert set(body) == {"error_code", "message"}
    assert body["error_code"] == status
    message: str = body["message"]
    return message


def runner_control(
    engine: object,
    base_dir: Path,
    *,
    configs: object = None,
    status: object = None,
    stored: object = None,
    file_pollers: Mapping[str, str] | None = None,
    loggers: LoggerLevels | None = None,
) -> RunnerControl:
    """The real ``RunnerControl`` over stand-ins for what a test does not exercise (runner
    ``runner-1``, topics prefix ``p``, started and never broken); ``stored`` stands in for the
    state topics."""
    return RunnerControl(
        engine=cast(Engine, engine),
        configs=cast(ConfigTopic, configs),
        status=cast(StatusTopic, status),
        file_pollers=dict(file_pollers or {}),
        kafka={},
        layout=TopicLayout("p", 1, 1),
        runner_id="runner-1",
        base_dir=base_dir,
        started=lambda: True,
        broken=lambda: None,
        stored=cast(StoredKeys | None, stored),
        loggers=loggers,
    )
