"""Connect's task routes (kc's ``list-tasks``, ``task-status``, ``restart-task``): a task is a
partition key, its id the key's index in key order, the same ids as the status's tasks."""

from __future__ import annotations

import pytest

from tests.rest.fake_control import FakeControl
from tests.rest.support import error_of, rest_client, seed


async def test_tasks_are_the_partitions_in_key_order() -> None:
    async with rest_client() as client:
        listed = await client.get("/connectors/tenants/tasks")
        tasks = await listed.json()
        status = await (await client.get("/connectors/tenants/status")).json()
        single = await (await client.get("/connectors/tickets/tasks")).json()
    assert listed.status == 200
    assert tasks == [
        {"id": {"connector": "tenants", "task": 0}, "config": {"partition": "acme"}},
        {"id": {"connector": "tenants", "task": 1}, "config": {"partition": "globex"}},
    ]
    assert [task["id"] for task in status["tasks"]] == [0, 1]
    assert single == [{"id": {"connector": "tickets", "task": 0}, "config": {"partition": ""}}]


async def test_a_tasks_status_is_its_entry_of_the_status() -> None:
    fake = seed(FakeControl())
    fake.connectors_by_name["tenants"].keys["globex"].failed = True
    async with rest_client(fake) as client:
        status = await (await client.get("/connectors/tenants/status")).json()
        response = await client.get("/connectors/tenants/tasks/1/status")
        body = await response.json()
    assert response.status == 200
    assert body == status["tasks"][1]
    assert body["id"] == 1
    assert body["state"] == "FAILED"
    assert body["worker_id"] == "runner-1"
    assert body["partition"] == "globex"


async def test_restarting_a_task_triggers_its_key() -> None:
    fake = seed(FakeControl())
    async with rest_client(fake) as client:
        response = await client.post("/connectors/tenants/tasks/1/restart")
        assert response.status == 204, await response.text()
        assert await response.read() == b""
        unpartitioned = await client.post("/connectors/tickets/tasks/0/restart")
        assert unpartitioned.status == 204
    assert fake.accepted == [
        ("trigger", "tenants", "globex", {}),
        ("trigger", "tickets", "", {}),
    ]


async def test_a_stopped_connectors_task_is_not_restarted() -> None:
    fake = seed(FakeControl())
    async with rest_client(fake) as client:
        assert (await client.put("/connectors/tenants/stop")).status == 202
        await error_of(await client.post("/connectors/tenants/tasks/0/restart"), 409)
    assert fake.accepted == []


@pytest.mark.parametrize(
    ("path", "status", "said"),
    [
        ("/connectors/nope/tasks", 404, "nope"),
        ("/connectors/nope/tasks/0/status", 404, "nope"),
        ("/connectors/tenants/tasks/2/status", 404, "no task 2"),
        ("/connectors/tenants/tasks/7/restart", 404, "no task 7"),
        ("/connectors/tenants/tasks/x/status", 400, "id: must be a task id"),
        ("/connectors/tenants/tasks/-1/restart", 400, "id: must be a task id"),
        ("/connectors/tenants/tasks/1.0/status", 400, "id: must be a task id"),
    ],
)
async def test_unknown_or_malformed_tasks_are_errors(path: str, status: int, said: str) -> None:
    fake = seed(FakeControl())
    async with rest_client(fake) as client:
        method = client.post if path.endswith("restart") else client.get
        assert said in await error_of(await method(path), status)
    assert fake.accepted == []
