"""Per-partition operations, parked items and offsets over REST.

The operations are the registry's (watukuy.core.operations): the routes pass its names and the
JSON form of the arguments its ``decode`` checked to ``Control.operate``.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.rest.fake_control import FakeControl
from tests.rest.support import PARKED, error_of, rest_client, seed
from watukuy.core.operations import CONNECTOR_OPERATIONS
from watukuy.rest import build_app
from watukuy.rest.port import PARTITION_OPERATIONS, Control


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


def test_the_routes_are_the_registrys_operations() -> None:
    """The contract's verbs, each one of the registry's per-key operations; remove and retry
    have routes of their own, and each connector operation is a route of its name."""
    assert {verb: op.name for verb, op in PARTITION_OPERATIONS.items()} == {
        "trigger": "trigger",
        "pause": "pause",
        "resume": "resume",
        "backfill": "backfill",
        "replay": "replay",
        "reset": "reset_cursor",
    }
    served = {
        (route.method, route.resource.canonical)
        for route in build_app(FakeControl()).router.routes()
        if route.resource is not None
    }
    key_routes = {
        path
        for method, path in served
        if path.startswith("/connectors/{name}/partitions/{key}/") and method == "POST"
    }
    assert key_routes == {
        f"/connectors/{{name}}/partitions/{{key}}/{verb}" for verb in PARTITION_OPERATIONS
    }
    for op in CONNECTOR_OPERATIONS.values():
        assert ("POST" if op.restarts else "PUT", f"/connectors/{{name}}/{op.name}") in served
        assert callable(getattr(Control, op.name)), op.name  # the seam's method of that name


@pytest.mark.parametrize(
    ("verb", "body", "operation", "args"),
    [
        ("trigger", None, "trigger", {}),
        ("trigger", {}, "trigger", {}),
        ("pause", None, "pause", {}),
        ("resume", None, "resume", {}),
        ("backfill", None, "backfill", {"from": None}),
        (
            "backfill",
            {"from": "2026-01-01T00:00:00Z"},
            "backfill",
            {"from": "2026-01-01T00:00:00Z"},
        ),
        (
            "backfill",
            {"from": {"page": 3, "since": "x"}},
            "backfill",
            {"from": {"page": 3, "since": "x"}},
        ),
        ("replay", {"from": 1700000000}, "replay", {"from": 1700000000}),
        ("replay", None, "replay", {"from": None}),
        ("reset", None, "reset_cursor", {"to": None, "clear_snapshot": False}),
        (
            "reset",
            {"to": "tok-9", "clear_snapshot": True},
            "reset_cursor",
            {"to": "tok-9", "clear_snapshot": True},
        ),
        ("reset", {"clear_snapshot": True}, "reset_cursor", {"to": None, "clear_snapshot": True}),
    ],
)
async def test_operations_are_accepted(verb: str, body: Any, operation: str, args: Any) -> None:
    """Control.operate gets the registry's name and every argument in its JSON form."""
    fake = seed(FakeControl())
    async with rest_client(fake) as client:
        response = await client.post(f"/connectors/tenants/partitions/acme/{verb}", json=body)
        assert response.status == 202, await response.text()
        assert await response.read() == b""
    assert fake.accepted == [(operation, "tenants", "acme", args)]


async def test_what_an_operation_changes_is_seen() -> None:
    fake = seed(FakeControl())
    async with rest_client(fake) as client:
        assert (await client.post("/connectors/tenants/partitions/acme/pause")).status == 202
        listed = await (await client.get("/connectors/tenants/partitions")).json()
        assert listed[0] == {"key": "acme", "state": "PAUSED", "owner": "runner-1"}
        body = {"to": "tok-9", "clear_snapshot": True}
        assert (
            await client.post("/connectors/tenants/partitions/acme/reset", json=body)
        ).status == 202
        offsets = await (await client.get("/connectors/tenants/offsets")).json()
        assert offsets["offsets"][0]["offset"]["live"] == "tok-9"


async def test_a_stopped_connector_refuses_key_operations_but_remove() -> None:
    fake = seed(FakeControl())
    async with rest_client(fake) as client:
        assert (await client.put("/connectors/tenants/stop")).status == 202
        refused = await client.post("/connectors/tenants/partitions/acme/trigger")
        assert "is STOPPED" in await error_of(refused, 409)
        retry = await client.post(
            "/connectors/tenants/parked/retry", json={"partition": "acme", "ids": ["p1"]}
        )
        assert "resume it first" in await error_of(retry, 409)
        assert (await client.delete("/connectors/tenants/partitions/acme")).status == 202
    assert [entry[0] for entry in fake.accepted] == ["remove"]


async def test_an_operation_outside_the_contract_has_no_route() -> None:
    async with rest_client() as client:
        for verb in ("reconcile", "reset_cursor", "remove", "retry", "alter_offsets"):
            response = await client.post(f"/connectors/tenants/partitions/acme/{verb}")
            assert (await error_of(response, 404)).startswith("unknown route"), verb


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
        assert fake.accepted[-1] == ("remove", "tenants", "globex", {})
        assert list(fake.connectors_by_name["tenants"].keys) == ["acme"]
        again = await client.delete("/connectors/tenants/partitions/globex")
        assert await error_of(again, 404) == "connector tenants has no partition 'globex'"


@pytest.mark.parametrize(
    ("verb", "body", "message"),
    [
        ("replay", '{"form": "x"}', "form: unknown argument; did you mean 'from'?"),
        ("backfill", '{"from": 1e400}', "from: must be a finite number"),
        ("backfill", '{"from": {"a": [1, -1e999]}}', "from.a[1]: must be a finite number"),
        ("reset", '{"clear_snapshot": "yes"}', "clear_snapshot: must be true or false, got a str"),
        (
            "reset",
            '{"to": null, "clear": true}',
            "clear: unknown argument; expected one of: to, clear_snapshot",
        ),
        ("reset", "[]", "body: must be a JSON object, got an array"),
        ("trigger", '{"now": true}', "now: takes no arguments"),
        ("pause", '"acme"', "body: must be a JSON object, got a string"),
        ("backfill", '{"from": NaN}', "body: is not valid JSON"),
    ],
)
async def test_operation_bodies_name_the_bad_field(verb: str, body: str, message: str) -> None:
    """The registry's checks (a cursor is any finite JSON value), answered as 400s."""
    fake = seed(FakeControl())
    before = fake.snapshot()
    async with rest_client(fake) as client:
        response = await client.post(
            f"/connectors/tenants/partitions/acme/{verb}",
            data=body,
            headers={"Content-Type": "application/json"},
        )
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
        bad_key = await client.get("/connectors/tenants/parked?partition=a//b")
        assert (await error_of(bad_key, 400)).startswith("partition: must match")


async def test_parked_retry() -> None:
    fake = seed(FakeControl())
    async with rest_client(fake) as client:
        body = {"partition": "acme", "ids": ["p1", "p2"]}
        response = await client.post("/connectors/tenants/parked/retry", json=body)
        assert response.status == 202
        assert fake.accepted == [("retry", "tenants", "acme", {"ids": ["p1", "p2"]})]
        left = await (await client.get("/connectors/tenants/parked")).json()
        assert [item["id"] for item in left] == ["p3"]

        for refused_body, message in [
            ({"ids": ["p3"]}, "partition: is required: a string, got null"),
            ({"partition": "globex", "ids": "p3"}, "ids: must be a list of parked item ids"),
            ({"partition": "globex", "ids": ["p3", 4]}, "ids[1]: must be a non-empty string"),
            ({"partition": "globex", "id": ["p3"]}, "id: unknown field; did you mean 'ids'?"),
            ({"partition": "globex", "ids": ["p1"]}, "ids: no parked item 'p1' in tenants/globex"),
            ({"partition": "a b", "ids": ["p3"]}, "partition: must match [A-Za-z0-9._-]+"),
        ]:
            refused = await client.post("/connectors/tenants/parked/retry", json=refused_body)
            assert (await error_of(refused, 400)).startswith(message)
        assert len(fake.accepted) == 1

        # As the registry has it: no ids, nothing to retry (and nothing refused).
        none = await client.post("/connectors/tenants/parked/retry", json={"partition": "globex"})
        assert none.status == 202
        assert fake.accepted[-1] == ("retry", "tenants", "globex", {"ids": []})
        assert len(await (await client.get("/connectors/tenants/parked")).json()) == 1


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


async def test_a_grant_handed_in_is_accepted_and_never_echoed() -> None:
    fake = seed(FakeControl())
    secret = "rt-handed-in-9f3e2c"
    async with rest_client(fake) as client:
        response = await client.put(
            "/connectors/tenants/partitions/acme/credentials", json={"refresh_token": secret}
        )
        assert response.status == 202
        assert secret not in await response.text()
        unknown = await client.put(
            "/connectors/tenants/partitions/nobody/credentials", json={"refresh_token": secret}
        )
        assert secret not in await error_of(unknown, 404)
    assert fake.grants.handed == {("tenants", "acme"): secret}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("{}", "refresh_token: is required: a non-empty string"),
        ('{"refresh_token": ""}', "refresh_token: is required: a non-empty string"),
        ('{"refresh_token": 7}', "refresh_token: is required: a non-empty string"),
        ('{"refresh_token": "x", "access_token": "y"}', "access_token: unknown"),
        ("[]", "body: must be a JSON object, got an array"),
    ],
)
async def test_a_bad_grant_body_names_the_field_and_hands_nothing_in(
    body: str, message: str
) -> None:
    fake = seed(FakeControl())
    async with rest_client(fake) as client:
        response = await client.put(
            "/connectors/tenants/partitions/acme/credentials",
            data=body,
            headers={"Content-Type": "application/json"},
        )
        text = await error_of(response, 400)
        assert text.startswith(message), text
        assert '"y"' not in text
    assert fake.grants.handed == {}
