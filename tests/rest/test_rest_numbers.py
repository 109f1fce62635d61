"""A number too large for a float (``1e999``) is JSON to the letter, but Python reads it as
``inf``, which has no JSON form: a config holding one is refused (400, naming the field)
before anything stores it. Found by the REST fuzz of the fault suite
(integration/faults/scenarios/s09_rest_fire.py): such a PUT wrote the connector and answered
500, as did every later answer showing its config; ``validate`` answered 500 too."""

from __future__ import annotations

import pytest

from tests.rest.fake_control import FakeControl
from tests.rest.support import error_of, partitioned, rest_client, seed

CONFIG = '{"request": {"url": "https://a.test/x"}, "records": "d", "identity": "id", '


@pytest.mark.parametrize(
    ("method", "path", "body", "message"),
    [
        ("PUT", "/connectors/orders/config", CONFIG + '"budget_weight": 1e999}', "budget_weight"),
        (
            "POST",
            "/connectors",
            '{"name": "orders", "config": ' + CONFIG + '"circuit": {"multiplier": 1e999}}}',
            "config.circuit.multiplier",
        ),
        (
            "PUT",
            "/connectors/orders/config",
            '{"request": {"url": "https://a.test/x", "query": {"a": [1, -1.5e400]}}, '
            '"records": "d", "identity": "id"}',
            "request.query.a[1]",
        ),
        ("PATCH", "/connectors/tickets/config", '{"budget_weight": 1e999}', "budget_weight"),
        (
            "PUT",
            "/connector-plugins/http/config/validate",
            CONFIG + '"circuit": {"multiplier": 1e999}}',
            "circuit.multiplier",
        ),
    ],
)
async def test_an_infinite_number_in_a_config_is_refused(
    method: str, path: str, body: str, message: str
) -> None:
    fake = seed(FakeControl())
    before = fake.snapshot()
    async with rest_client(fake) as client:
        response = await client.request(
            method, path, data=body.encode(), headers={"Content-Type": "application/json"}
        )
        assert await error_of(response, 400) == f"{message}: must be a finite number"
        shown = await client.get("/connectors?expand=info")
        assert shown.status == 200
        assert sorted(await shown.json()) == ["invoices", "tenants", "tickets"]
    assert fake.snapshot() == before


async def test_large_finite_numbers_are_kept() -> None:
    async with rest_client(seed(FakeControl())) as client:
        response = await client.put(
            "/connectors/orders/config", json=partitioned("acme", budget_weight=1e300)
        )
        assert response.status == 201, await response.text()
        shown = await client.get("/connectors/orders/config?format=nested")
        assert (await shown.json())["budget_weight"] == 1e300
        flat = await client.get("/connectors/orders/config")
        assert float((await flat.json())["budget_weight"]) == 1e300
