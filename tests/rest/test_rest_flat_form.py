"""Connect's config form over REST, as a Connect client uses it: GET the flat config, edit it,
PUT or PATCH it back (CONTRACT.md, "Connect's config form"). Every declarative example of
``config/`` is driven through the routes and compiled by the real compiler."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.rest.fake_control import FakeControl
from tests.rest.support import error_of, rest_client, seed

REPO = Path(__file__).resolve().parents[2]
CANARY = "tok-canary-5521"


def _examples() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted((REPO / "config").glob("*.yaml")):
        for entry in yaml.safe_load(path.read_text())["pollers"]:
            if "python" not in entry:
                body = {key: value for key, value in entry.items() if key != "name"}
                found.append((f"{path.name}:{entry['name']}", json.loads(json.dumps(body))))
    return found


EXAMPLES = _examples()


def _fake() -> FakeControl:
    """The examples read ``${env:...}`` secrets (all set, to the canary) and files beside them."""
    text = "".join(path.read_text() for path in (REPO / "config").glob("*.yaml"))
    names = {"ACME_TOKEN", *re.findall(r"\$\{env:([A-Za-z0-9_]+)", text)}
    environ = {name: "https://vendor.test" if name.endswith("URL") else CANARY for name in names}
    return seed(FakeControl(environ=environ, base_dir=REPO / "config"))


@pytest.mark.parametrize("nested", [body for _, body in EXAMPLES], ids=[n for n, _ in EXAMPLES])
async def test_get_flat_put_it_back_and_the_config_is_unchanged(nested: dict[str, Any]) -> None:
    async with rest_client(_fake()) as client:
        created = await client.put("/connectors/example/config", json=nested)
        assert created.status == 201, await created.text()
        flat = await (await client.get("/connectors/example/config")).json()
        assert flat["connector.class"] == "http" and flat["name"] == "example"
        assert all(isinstance(value, str) for value in flat.values())
        assert CANARY not in json.dumps(flat)

        again = await client.put("/connectors/example/config", json=flat)
        assert again.status == 200, await again.text()
        assert (await again.json())["config"] == flat
        shown = await client.get("/connectors/example/config?format=nested")
        assert await shown.json() == nested


async def test_create_from_a_flat_config_and_patch_one_key() -> None:
    fake = _fake()
    flat = {
        "connector.class": "http",
        "request.url": "https://api.test/{partition.key}/items",
        "request.auth.bearer": "${env:ACME_TOKEN}",
        "partitions.static": '[{"key":"acme"},{"key":"globex"}]',
        "records": "data",
        "identity": "id",
        "schedule.min": "30s",
        "max_pages": "5",
    }
    async with rest_client(fake) as client:
        created = await client.post("/connectors", json={"name": "orders", "config": flat})
        assert created.status == 201, await created.text()
        stored = fake.connectors_by_name["orders"].config
        assert stored["max_pages"] == 5
        assert stored["partitions"] == {"static": [{"key": "acme"}, {"key": "globex"}]}
        assert stored["request"]["auth"] == {"bearer": "${env:ACME_TOKEN}"}

        patched = await client.patch("/connectors/orders/config", json={"schedule.max": "10m"})
        assert patched.status == 200, await patched.text()
        after = fake.connectors_by_name["orders"].config
        assert after == stored | {"schedule": {"min": "30s", "max": "10m"}}

        removed = await client.patch("/connectors/orders/config", json={"max_pages": None})
        assert removed.status == 200
        assert "max_pages" not in fake.connectors_by_name["orders"].config
        shown = await (await client.get("/connectors/orders/config")).json()
        assert shown["request.auth.bearer"] == "${env:ACME_TOKEN}"
        assert "max_pages" not in shown


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"schedule.mni": "5s"}, "config.schedule.mni: unknown key; did you mean 'schedule.min'?"),
        ({"max_pages": "many"}, "config.max_pages: must be an integer, got 'many'"),
        ({"connector.class": "jdbc"}, "config.connector.class: must be one of http, python"),
    ],
)
async def test_a_bad_flat_config_is_a_400_naming_the_key(
    change: dict[str, str], message: str
) -> None:
    fake = _fake()
    before = fake.snapshot()
    flat = {"connector.class": "http", "request.url": "https://api.test/items", **change}
    flat |= {"records": "data", "identity": "id"}
    async with rest_client(fake) as client:
        response = await client.post("/connectors", json={"name": "orders", "config": flat})
        assert await error_of(response, 400) == message
        put = await client.put("/connectors/tickets/config", json=flat)
        assert (await error_of(put, 400)).endswith(message.removeprefix("config."))
        patch = await client.patch("/connectors/tickets/config", json=change)
        assert (await error_of(patch, 400)).endswith(message.removeprefix("config."))
    assert fake.snapshot() == before
