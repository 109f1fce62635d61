"""Per-partition operations, parked items and offsets over REST."""

from __future__ import annotations

from typing import Any

import pytest

from tests.rest.fake_control import FakeControl
from tests.rest.support import PARKED, error_of, rest_client, seed
from watukuy.rest.control import (
    Backfill,
    PausePartition,
    RemovePartition,
    Replay,
    ResetCursor,
    ResumePartition,
    Trigger,
)


async def test_partitions_are_listed() -> None:
    fake = seed(FakeControl())
    fake.connectors_by_name["tenants"].keys["globex"].paused = True
    async with rest_client(fake) as client:
        listed = await (await client.get("/connectors/tenants/partitions")).json()
        unpartitioned = await (await client.get("/connectors/tickets/partitions")).json()
    assert listed == [
        {"key": "acme", "state": "RUNNING", "owner": "runner-1"},
        {"key": "globex", "state": "PAUSED", "owner": "runner-1"},
    ]
    assert unpartitioned == [{"key": "", "state": "RUNNING", "owner": "runner-1"}]


@pytest.mark.parametrize(
    ("op", "body", "operation"),
    [
        ("trigger", None, Trigger()),
        ("pause", None, PausePartition()),
        ("resume", None, ResumePartition()),
        ("backfill", None, Backfill(from_=None)),
        ("backfill", {"from": "2026-01-01T00:00:00Z"}, Backfill(from_="2026-01-01T00:00:00Z")),
        ("replay", {"from": 1700000000}, Replay(from_=1700000000)),
        ("replay", {"from": None}, Replay(from_=None)),
        ("reset", None, ResetCursor(to=None, clear_snapshot=False)),
        ("reset", {"to": "tok-9", "clear_snapshot": True}, ResetCursor("tok-9", True)),
    ],
)
async def test_operations_are_accepted(op: str, body: Any, operation: object) -> None:
    fake = seed(FakeControl())
    async with rest_client(fake) as client:
        response = await client.post(f"/connectors/tenants/partitions/acme/{op}", json=body)
        assert response.status == 202, await response.text()
        assert await response.read() == b""
    assert fake.accepted == [(type(operation).__name__, "tenants", "acme", operation)]


async def test_the_unpartitioned_key_is_addressed_as_tilde() -> None:
    fake = seed(FakeControl())
    async with rest_client(fake) as client:
        paused = await client.post("/connectors/tickets/partitions/~/pause")
        assert paused.status == 202
        assert fake.connectors_by_name["tickets"].keys[""].paused
        # an empty segment is no route, and '~' is not a key of a partitioned connector
        assert await error_of(await client.post("/connectors/tickets/partitions//pause"), 404)
        missing = await client.post("/connectors/tenants/partitions/~/trigger")
        assert await error_of(missing, 404) == "connector tenants has no partition ''"


async def test_delete_partition() -> None:
    fake = seed(FakeControl())
    async with rest_client(fake) as client:
        response = await client.delete("/connectors/tenants/partitions/globex")
        assert response.status == 202
        assert fake.accepted[-1][0] == RemovePartition.__name__
        assert list(fake.connectors_by_name["tenants"].keys) == ["acme"]
        again = await client.delete("/connectors/tenants/partitions/globex")
        assert await error_of(again, 404) == "connector tenants has no partition 'globex'"


@pytest.mark.parametrize(
    ("op", "body", "message"),
    [
        ("replay", None, "body: is required: a JSON object"),
        ("replay", {}, "from: is required: the cursor to replay from"),
        ("replay", {"form": "x"}, "form: unknown field; did you mean 'from'?"),
        (
            "backfill",
            {"from": {"a": 1}},
            "from: must be a cursor value (a string, a number or null), got an object",
        ),
        ("backfill", {"from": True}, "from: must be a cursor value"),
        ("reset", {"clear_snapshot": "yes"}, "clear_snapshot: must be true or false, got a string"),
        (
            "reset",
            {"to": None, "clear": True},
            "clear: unknown field; expected one of: to, clear_snapshot",
        ),
        ("reset", [], "body: must be a JSON object, got an array"),
    ],
)
async def test_operation_bodies_name_the_bad_field(op: str, body: Any, message: str) -> None:
    fake = seed(FakeControl())
    before = fake.snapshot()
    async with rest_client(fake) as client:
        response = await client.post(f"/connectors/tenants/partitions/acme/{op}", json=body)
        assert (await error_of(response, 400)).startswith(message)
    assert fake.snapshot() == before


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/connectors/tenants/partitions/a%20b/trigger", "key: must match [A-Za-z0-9._-]+"),
        ("/connectors/t%C3%A9/partitions/acme/trigger", "name: must match [A-Za-z0-9._-]+"),
    ],
)
async def test_bad_names_in_paths(path: str, message: str) -> None:
    async with rest_client() as client:
        assert (await error_of(await client.post(path), 400)).startswith(message)


async def test_parked_items_filtered_by_partition_and_kind() -> None:
    async with rest_client() as client:
        every = await (await client.get("/connectors/tenants/parked")).json()
        assert every == PARKED
        acme_poison = await client.get("/connectors/tenants/parked?partition=acme&kind=poison")
        assert [item["id"] for item in await acme_poison.json()] == ["p1"]
        unpartitioned = await client.get("/connectors/tickets/parked?partition=~")
        assert await unpartitioned.json() == []
        bad_kind = await client.get("/connectors/tenants/parked?kind=broken")
        assert await error_of(bad_kind, 400) == "kind: must be one of: invalid, poison"
        bad_key = await client.get("/connectors/tenants/parked?partition=a/b")
        assert (await error_of(bad_key, 400)).startswith("partition: must match")


async def test_parked_retry() -> None:
    fake = seed(FakeControl())
    async with rest_client(fake) as client:
        body = {"partition": "acme", "ids": ["p1", "p2"]}
        response = await client.post("/connectors/tenants/parked/retry", json=body)
        assert response.status == 202
        assert fake.accepted == [("retry", "tenants", "acme", ("p1", "p2"))]
        left = await (await client.get("/connectors/tenants/parked")).json()
        assert [item["id"] for item in left] == ["p3"]

        for body, message in [
            ({"ids": ["p3"]}, "partition: is required: a string, got null"),
            ({"partition": "globex", "ids": []}, "ids: must be a non-empty list of ids"),
            ({"partition": "globex", "ids": ["p3", 4]}, "ids[1]: must be a non-empty string"),
            ({"partition": "globex", "id": ["p3"]}, "id: unknown field; did you mean 'ids'?"),
        ]:
            refused = await client.post("/connectors/tenants/parked/retry", json=body)
            assert (await error_of(refused, 400)).startswith(message)
        assert len(fake.accepted) == 1


async def test_offsets_read_and_changed_only_while_stopped() -> None:
    fake = seed(FakeControl())
    fake.connectors_by_name["tenants"].keys["acme"].offset["live"] = "tok-1"
    async with rest_client(fake) as client:
        got = await (await client.get("/connectors/tenants/offsets")).json()
        assert got == {
            "offsets": [
                {
                    "partition": {"key": "acme"},
                    "offset": {"live": "tok-1", "backfill": None, "reconcile": None},
                },
                {
                    "partition": {"key": "globex"},
                    "offset": {"live": None, "backfill": None, "reconcile": None},
                },
            ]
        }
        patch = {
            "offsets": [
                {"partition": {"key": "acme"}, "offset": None},
                {"partition": {"key": "globex"}, "offset": {"live": "tok-7"}},
            ]
        }
        running = await client.patch("/connectors/tenants/offsets", json=patch)
        assert "stop it" in await error_of(running, 409)
        assert "stop it" in await error_of(await client.delete("/connectors/tenants/offsets"), 409)

        assert (await client.put("/connectors/tenants/stop")).status == 202
        altered = await client.patch("/connectors/tenants/offsets", json=patch)
        assert altered.status == 200
        assert await altered.json() == {"message": "the offsets of connector tenants were altered"}
        keys = fake.connectors_by_name["tenants"].keys
        assert keys["acme"].offset == {"live": None, "backfill": None, "reconcile": None}
        assert keys["globex"].offset["live"] == "tok-7"

        reset = await client.delete("/connectors/tenants/offsets")
        assert await reset.json() == {"message": "the offsets of connector tenants were reset"}
        assert keys["globex"].offset["live"] is None


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"offsets": []}, "offsets: must be a non-empty list, got an array"),
        ({"offset": []}, "offset: unknown field; did you mean 'offsets'?"),
        ({"offsets": [{"partition": {"key": "acme"}}]}, "offsets[0].offset: is required"),
        (
            {"offsets": [{"partition": {"key": 3}, "offset": None}]},
            "offsets[0].partition.key: must be a string, got a number",
        ),
        (
            {"offsets": [{"partition": {"key": "acme"}, "offset": {"lve": 1}}]},
            "offsets[0].offset.lve: unknown field; did you mean 'live'?",
        ),
        (
            {"offsets": [{"partition": "acme", "offset": None}]},
            "offsets[0].partition: must be a JSON object, got a string",
        ),
    ],
)
async def test_offset_bodies_name_the_bad_field(body: Any, message: str) -> None:
    fake = seed(FakeControl())
    fake.connectors_by_name["tenants"].state = "STOPPED"
    before = fake.snapshot()
    async with rest_client(fake) as client:
        response = await client.patch("/connectors/tenants/offsets", json=body)
        assert (await error_of(response, 400)).startswith(message)
    assert fake.snapshot() == before
