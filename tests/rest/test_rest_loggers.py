"""KIP-495's ``/admin/loggers`` over the fake control: Connect's shapes and statuses, worker
scope answered with the loggers set, cluster scope handed to the control plane (204), and bad
input named without anything being set."""

from __future__ import annotations

from typing import Any

import pytest

from tests.rest.fake_control import NOW_MS, FakeControl
from tests.rest.support import error_of, rest_client, seed


def fake_with_loggers() -> FakeControl:
    fake = seed(FakeControl())
    fake.loggers.known["watukuy.engine"] = {"level": "WARN", "last_modified": None}
    fake.loggers.known["watukuyx"] = {"level": "ERROR", "last_modified": None}
    return fake


async def test_the_loggers_are_listed_and_read_one_by_one() -> None:
    fake = fake_with_loggers()
    async with rest_client(fake) as client:
        listed = await client.get("/admin/loggers")
        one = await client.get("/admin/loggers/watukuy.engine")
        root = await client.get("/admin/loggers/root")
        assert listed.status == one.status == root.status == 200
        assert await listed.json() == {
            "root": {"level": "INFO", "last_modified": None},
            "watukuy": {"level": "INFO", "last_modified": None},
            "watukuy.engine": {"level": "WARN", "last_modified": None},
            "watukuyx": {"level": "ERROR", "last_modified": None},
        }
        assert await one.json() == {"level": "WARN", "last_modified": None}
        assert await root.json() == {"level": "INFO", "last_modified": None}


async def test_an_unknown_logger_is_connects_404() -> None:
    async with rest_client(fake_with_loggers()) as client:
        message = await error_of(await client.get("/admin/loggers/nobody.here"), 404)
    assert "nobody.here" in message


async def test_worker_scope_sets_the_logger_and_those_below_it() -> None:
    fake = fake_with_loggers()
    async with rest_client(fake) as client:
        response = await client.put("/admin/loggers/watukuy", json={"level": "debug"})
        assert response.status == 200, await response.text()
        assert await response.json() == ["watukuy", "watukuy.engine"]
        engine = await (await client.get("/admin/loggers/watukuy.engine")).json()
        sibling = await (await client.get("/admin/loggers/watukuyx")).json()
        explicit = await client.put("/admin/loggers/watukuy?scope=WORKER", json={"level": "INFO"})
        assert explicit.status == 200
    assert engine == {"level": "DEBUG", "last_modified": NOW_MS}
    assert sibling == {"level": "ERROR", "last_modified": None}  # not below: a name apart
    assert fake.loggers.cluster_levels == []


async def test_a_new_logger_can_be_set_and_read_back() -> None:
    async with rest_client(fake_with_loggers()) as client:
        response = await client.put("/admin/loggers/aiohttp.access", json={"level": "TRACE"})
        assert await response.json() == ["aiohttp.access"]
        read = await (await client.get("/admin/loggers/aiohttp.access")).json()
    assert read == {"level": "TRACE", "last_modified": NOW_MS}


async def test_cluster_scope_is_written_for_every_instance_and_answers_204() -> None:
    fake = fake_with_loggers()
    async with rest_client(fake) as client:
        response = await client.put(
            "/admin/loggers/watukuy.engine?scope=cluster", json={"level": "Warn"}
        )
        assert response.status == 204, await response.text()
        assert await response.read() == b""
    assert fake.loggers.cluster_levels == [("watukuy.engine", "WARN")]


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/admin/loggers/watukuy", {"level": "LOUD"}, "level"),
        ("/admin/loggers/watukuy", {"level": 10}, "level"),
        ("/admin/loggers/watukuy", {"levle": "DEBUG"}, "level"),
        ("/admin/loggers/watukuy", ["DEBUG"], "body"),
        ("/admin/loggers/watukuy?scope=everywhere", {"level": "DEBUG"}, "scope"),
        ("/admin/loggers/bad%20name", {"level": "DEBUG"}, "logger"),
    ],
)
async def test_bad_input_is_named_and_sets_nothing(path: str, body: Any, field: str) -> None:
    fake = fake_with_loggers()
    before = fake.snapshot()
    async with rest_client(fake) as client:
        message = await error_of(await client.put(path, json=body), 400)
    assert message.startswith(f"{field}: "), message
    assert "LOUD" not in message and "everywhere" not in message  # what was sent is not echoed
    assert fake.snapshot() == before


async def test_a_level_needs_a_body() -> None:
    async with rest_client(fake_with_loggers()) as client:
        message = await error_of(await client.put("/admin/loggers/watukuy"), 400)
        not_json = await client.put(
            "/admin/loggers/watukuy", data="level=DEBUG", headers={"Content-Type": "text/plain"}
        )
        await error_of(not_json, 415)
    assert message.startswith("body: ")
