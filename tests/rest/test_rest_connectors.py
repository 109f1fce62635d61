"""The connector routes, as a Kafka Connect user calls them."""

from __future__ import annotations

import pytest

from tests.rest.fake_control import FakeControl
from tests.rest.support import (
    API,
    config,
    error_of,
    flat_config,
    partitioned,
    rest_client,
    seed,
)

CANARY = "s3cr3t-token-canary-7781"


async def test_root_and_plugins() -> None:
    async with rest_client() as client:
        root = await client.get("/")
        assert await root.json() == {
            "version": "0.1.0",
            "commit": "fake",
            "kafka_cluster_id": "fake-cluster",
        }
        plugins = await client.get("/connector-plugins")
        assert await plugins.json() == [{"class": "http"}, {"class": "python"}]


async def test_list_connectors_names_and_expansions() -> None:
    async with rest_client() as client:
        names = await client.get("/connectors")
        assert await names.json() == ["invoices", "tenants", "tickets"]

        status = await (await client.get("/connectors?expand=status")).json()
        assert set(status) == {"invoices", "tenants", "tickets"}
        assert set(status["tenants"]) == {"status"}
        assert status["tenants"]["status"]["connector"]["state"] == "RUNNING"

        both = await (await client.get("/connectors?expand=status&expand=info")).json()
        assert set(both["tickets"]) == {"status", "info"}
        assert both["tickets"]["info"] == {
            "name": "tickets",
            "config": flat_config("tickets"),
            "tasks": [{"connector": "tickets", "task": 0}],
            "type": "source",
        }

        message = await error_of(await client.get("/connectors?expand=stauts"), 400)
        assert message == "expand: must be status or info"


async def test_create_answers_201_with_the_info_and_a_location() -> None:
    fake = seed(FakeControl())
    async with rest_client(fake) as client:
        body = {"name": "orders", "config": config(), "initial_state": "PAUSED"}
        response = await client.post("/connectors", json=body)
        assert response.status == 201
        assert response.headers["Location"] == "/connectors/orders"
        assert await response.json() == {
            "name": "orders",
            "config": flat_config("orders"),
            "tasks": [{"connector": "orders", "task": 0}],
            "type": "source",
        }
        assert fake.connectors_by_name["orders"].state == "PAUSED"
        status = await (await client.get("/connectors/orders/status")).json()
        assert status["connector"]["state"] == "PAUSED"

        again = await client.post("/connectors", json=body)
        assert await error_of(again, 409) == "connector orders exists already"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"config": config()}, "name: is required: a string, got null"),
        ({"name": "a b", "config": config()}, "name: must match [A-Za-z0-9._-]+"),
        ({"name": "x"}, "config: is required: the connector's config"),
        ({"name": "x", "config": []}, "config: must be a JSON object, got an array"),
        (
            {"name": "x", "config": config(), "initial_state": "PAUSE"},
            "initial_state: must be one of: RUNNING, PAUSED, STOPPED",
        ),
        (
            {"name": "x", "config": config(), "intial_state": "PAUSED"},
            "intial_state: unknown field; did you mean 'initial_state'?",
        ),
        (
            {"name": "x", "config": {**config(), "name": "y"}},
            "config.name: does not match the connector name",
        ),
        (
            {"name": "x", "config": config(request={"url": "ftp://host/items"})},
            "config.request.url: must be an absolute http:// or https:// URL",
        ),
        (
            {"name": "x", "config": config(paginate={"page": {"param": "page", "size": "ten"}})},
            "config.paginate.page.size: must be a positive integer, got a str",
        ),
    ],
)
async def test_create_names_the_bad_field(body: object, message: str) -> None:
    fake = seed(FakeControl())
    before = fake.snapshot()
    async with rest_client(fake) as client:
        got = await error_of(await client.post("/connectors", json=body), 400)
    assert got.startswith(message), got
    assert fake.snapshot() == before


async def test_get_connector_and_config() -> None:
    async with rest_client() as client:
        info = await (await client.get("/connectors/tenants")).json()
        assert info["tasks"] == [
            {"connector": "tenants", "task": 0},
            {"connector": "tenants", "task": 1},
        ]
        flat = await (await client.get("/connectors/tickets/config")).json()
        assert flat == flat_config("tickets")
        nested = await client.get("/connectors/tickets/config?format=nested")
        assert await nested.json() == config()
        info = await (await client.get("/connectors/tickets?format=nested")).json()
        assert info["config"] == config()
        bad = await client.get("/connectors/tickets/config?format=yaml")
        assert await error_of(bad, 400) == "format: must be one of: flat, nested"
        assert await error_of(await client.get("/connectors/nope"), 404) == (
            "connector nope not found"
        )
        assert await error_of(await client.get("/connectors/n%20pe/config"), 400) == (
            "name: must match [A-Za-z0-9._-]+"
        )


async def test_put_config_creates_then_replaces() -> None:
    fake = seed(FakeControl())
    async with rest_client(fake) as client:
        created = await client.put("/connectors/orders/config", json=config())
        assert created.status == 201
        assert created.headers["Location"] == "/connectors/orders"
        replaced = await client.put(
            "/connectors/orders/config", json={**config(records="items"), "name": "orders"}
        )
        assert replaced.status == 200
        assert (await replaced.json())["config"] == flat_config("orders", records="items")
        assert fake.connectors_by_name["orders"].config == config(records="items")

        wrong = await client.put("/connectors/orders/config", json={**config(), "name": "x"})
        assert await error_of(wrong, 400) == "name: does not match the connector name"
        bad = await client.put("/connectors/orders/config", json=config(identity=None))
        assert (await error_of(bad, 400)).startswith("identity:")
        assert fake.connectors_by_name["orders"].config == config(records="items")


async def test_patch_merges_and_null_removes_a_key() -> None:
    fake = seed(FakeControl())
    fake.add("orders", config(version="updated_at") | {"schedule": {"min": "30s"}})
    async with rest_client(fake) as client:
        patch = {"version": None, "schedule": {"max": "5m"}, "records": "items"}
        response = await client.patch("/connectors/orders/config", json=patch)
        assert response.status == 200, await response.text()
        expected = config(records="items") | {"schedule": {"min": "30s", "max": "5m"}}
        assert (await response.json())["config"] == flat_config(
            "orders", records="items", **{"schedule.min": "30s", "schedule.max": "5m"}
        )
        nested = "/connectors/orders/config?format=nested"
        assert await (await client.get(nested)).json() == expected

        refused = await client.patch("/connectors/orders/config", json={"identity": None})
        assert (await error_of(refused, 400)).startswith("identity:")
        assert await (await client.get(nested)).json() == expected


async def test_delete_connector() -> None:
    fake = seed(FakeControl())
    async with rest_client(fake) as client:
        response = await client.delete("/connectors/tickets")
        assert response.status == 204
        assert await response.read() == b""
        assert "tickets" not in fake.connectors_by_name
        assert await error_of(await client.delete("/connectors/tickets"), 404)


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("PUT", "/connectors/invoices/config", config()),
        ("PATCH", "/connectors/invoices/config", {"records": "items"}),
        ("DELETE", "/connectors/invoices", None),
    ],
)
async def test_config_file_connectors_are_not_reconfigured(
    method: str, path: str, body: object
) -> None:
    fake = seed(FakeControl())
    before = fake.snapshot()
    async with rest_client(fake) as client:
        message = await error_of(await client.request(method, path, json=body), 409)
        assert "comes from the config file" in message
        assert "paused, resumed, stopped and operated" in message
        for action in ("pause", "resume", "stop"):
            assert (await client.put(f"/connectors/invoices/{action}")).status == 202
    assert fake.snapshot() != before  # the target state did change
    assert fake.connectors_by_name["invoices"].config == before[0]["invoices"].config


async def test_secrets_are_read_back_as_written() -> None:
    fake = seed(FakeControl(environ={"ACME_TOKEN": CANARY}))
    written = config(request={"url": f"{API}/items", "auth": {"bearer": "${env:ACME_TOKEN}"}})
    async with rest_client(fake) as client:
        created = await client.post("/connectors", json={"name": "orders", "config": written})
        assert created.status == 201
        texts = [await created.text()]
        for path in ("/connectors/orders", "/connectors/orders/config", "/connectors?expand=info"):
            response = await client.get(path)
            texts.append(await response.text())
        nested = await client.get("/connectors/orders/config?format=nested")
        assert await nested.json() == written
        flat = await (await client.get("/connectors/orders/config")).json()
        assert flat["request.auth.bearer"] == "${env:ACME_TOKEN}"
    assert all(CANARY not in text for text in texts)
    assert all("${env:ACME_TOKEN}" in text for text in texts)


async def test_status_pause_resume_stop_restart() -> None:
    fake = seed(FakeControl())
    async with rest_client(fake) as client:
        status = await (await client.get("/connectors/tenants/status")).json()
        assert status == {
            "name": "tenants",
            "connector": {"state": "RUNNING", "worker_id": "runner-1"},
            "type": "source",
            "tasks": [
                {
                    "id": index,
                    "state": "RUNNING",
                    "worker_id": "runner-1",
                    "partition": key,
                    "lag": 1.5,
                    "circuit": "closed",
                    "parked": {"invalid": 0, "poison": 0},
                    "backfill": False,
                }
                for index, key in enumerate(["acme", "globex"])
            ],
        }
        for action, state in (("pause", "PAUSED"), ("stop", "STOPPED"), ("resume", "RUNNING")):
            response = await client.put(f"/connectors/tenants/{action}")
            assert response.status == 202
            status = await (await client.get("/connectors/tenants/status")).json()
            assert status["connector"]["state"] == state

        fake.connectors_by_name["tenants"].keys["acme"].failed = True
        restart = await client.post("/connectors/tenants/restart?includeTasks=true&onlyFailed=TRUE")
        assert restart.status == 202
        assert fake.accepted[-1] == ("restart", "tenants", "", (True, True))
        assert not fake.connectors_by_name["tenants"].keys["acme"].failed

        bad = await client.post("/connectors/tenants/restart?includeTasks=yes")
        assert await error_of(bad, 400) == "includeTasks: must be true or false"
        assert await error_of(await client.put("/connectors/nope/pause"), 404)


async def test_validate_in_connects_shape() -> None:
    async with rest_client() as client:
        good = await client.put("/connector-plugins/http/config/validate", json=config())
        report = await good.json()
        assert (report["name"], report["error_count"]) == ("http", 0)
        entries = {entry["definition"]["name"]: entry for entry in report["configs"]}
        # Every setting a console can draw, by its flat key, with what was given or the default.
        identity = entries["identity"]["definition"]
        assert (identity["required"], identity["importance"]) == (True, "HIGH")
        url = entries["request.url"]
        # Not required: request.base + request.path may stand for it (a connector's streams).
        assert url["definition"]["required"] is False
        assert url["definition"]["group"] == "request"
        assert url["value"] == {
            "name": "request.url",
            "value": f"{API}/items",
            "recommended_values": [],
            "errors": [],
            "visible": True,
        }
        assert entries["paginate.page.size"]["definition"]["type"] == "INT"
        assert entries["request.method"]["value"]["recommended_values"] == ["GET", "POST"]
        assert entries["request.method"]["value"]["value"] == "GET"
        assert entries["request.auth.bearer"]["definition"]["type"] == "PASSWORD"
        assert "request" not in entries  # a section is named by its settings
        assert set(report["groups"]) >= {"Common", "request", "paginate", "schedule"}
        orders = [e["definition"]["order_in_group"] for e in entries.values()]
        assert all(order >= 1 for order in orders)

        bad = partitioned("acme", paginate={"page": {"param": "page", "size": 0}})
        report = await (
            await client.put("/connector-plugins/http/config/validate", json=bad)
        ).json()
        assert report["error_count"] == 1
        errors = {c["value"]["name"]: c["value"]["errors"] for c in report["configs"]}
        assert errors["paginate.page.size"] == ["must be a positive integer, got 0"]
        assert errors["request.url"] == [] and errors["partitions.static"] == []

        flat = {**flat_config("orders"), "schedule.min": "ten", "request.auth.bearer": CANARY}
        response = await client.put("/connector-plugins/http/config/validate", json=flat)
        text = await response.text()
        assert CANARY not in text  # a secret written inline is never echoed
        report = await response.json()
        shown = {c["value"]["name"]: c["value"] for c in report["configs"]}
        assert report["error_count"] == 1
        assert "a duration like" in shown["schedule.min"]["errors"][0]
        assert shown["request.auth.bearer"]["value"] == "[redacted]"

        typo = {**flat_config("orders"), "request.ulr": "x"}
        report = await (
            await client.put("/connector-plugins/http/config/validate", json=typo)
        ).json()
        shown = {c["value"]["name"]: c["value"] for c in report["configs"]}
        assert report["error_count"] == 1
        assert "did you mean" in shown["request.ulr"]["errors"][0]

        other = {**flat_config("orders"), "connector.class": "python"}
        report = await (
            await client.put("/connector-plugins/http/config/validate", json=other)
        ).json()
        shown = {c["value"]["name"]: c["value"] for c in report["configs"]}
        assert shown["connector.class"]["errors"] == [
            "must be http, the class this route validates"
        ]

        unknown = await client.put("/connector-plugins/jdbc/config/validate", json=config())
        assert await error_of(unknown, 404) == (
            "unknown connector class; the classes are: http, python"
        )
