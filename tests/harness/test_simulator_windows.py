"""The simulator's windowed endpoints (issue 44), through HTTP as a poller sees them: a window in
epoch seconds answers exactly the items updated in ``[gte, lt)``, a missing start or a window
over 31 days is a 400, and Zendesk's incremental export pages to ``end_of_stream``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp import ClientSession

from integration.simulator import VendorSimulator, running_simulator
from integration.simulator.windows import MAX_SPAN

pytestmark = pytest.mark.unit

NOW = 1_750_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def sim(clock: Clock) -> VendorSimulator:
    return VendorSimulator(tenants=1, items_per_tenant=6, seed=3, now=clock)


@pytest.fixture
async def http(sim: VendorSimulator) -> AsyncIterator[ClientSession]:
    async with running_simulator(sim) as base_url, ClientSession(base_url=base_url) as session:
        yield session


async def get(
    http: ClientSession, sim: VendorSimulator, path: str, **query: Any
) -> tuple[int, Any]:
    tenant = sim.tenants[0]
    auth = {"Authorization": f"Bearer {tenant.token}"}
    params = {k: str(v) for k, v in query.items()}
    async with http.get(f"/{tenant.slug}{path}", params=params, headers=auth) as answer:
        return answer.status, json.loads(await answer.text())


async def charges(http: ClientSession, sim: VendorSimulator, **query: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    page = None
    while True:
        extra = {} if page is None else {"page": page}
        status, body = await get(http, sim, "/v1/charges", limit=2, **query, **extra)
        assert status == 200, body
        found += body["data"]
        if not body["has_more"]:
            return found
        page = body["next_page"]


async def test_a_window_answers_the_items_updated_in_it_in_epoch_seconds(
    http: ClientSession, sim: VendorSimulator, clock: Clock
) -> None:
    tenant = sim.tenants[0].id
    ids = [item["id"] for item in sim.records(tenant, "items")]
    clock.now = NOW + 100
    sim.update_item(tenant, ids[0], status="moved")
    clock.now = NOW + 200
    sim.update_item(tenant, ids[1], status="moved")
    inside = await charges(
        http, sim, **{"created[gte]": int(NOW + 100), "created[lt]": int(NOW + 200)}
    )
    assert [item["id"] for item in inside] == [ids[0]]
    assert inside[0]["updated"] == int(NOW + 100)
    since = await charges(http, sim, **{"created[gte]": int(NOW + 100)})
    assert [item["id"] for item in since] == [ids[0], ids[1]]
    december = int(datetime(2023, 12, 1, tzinfo=UTC).timestamp())  # the seeded items' month
    before = await charges(
        http, sim, **{"created[gte]": december, "created[lt]": december + MAX_SPAN}
    )
    assert sorted(item["id"] for item in before) == sorted(ids[2:])  # not moved since


async def test_a_window_without_a_start_or_over_31_days_is_refused(
    http: ClientSession, sim: VendorSimulator
) -> None:
    status, body = await get(http, sim, "/v1/charges")
    assert status == 400 and "created[gte]" in body["error"]["message"]
    start = int(NOW) - MAX_SPAN - 1
    status, body = await get(
        http, sim, "/v1/charges", **{"created[gte]": start, "created[lt]": int(NOW)}
    )
    assert status == 400 and "31 days" in body["error"]["message"]


async def test_zendesks_incremental_export_needs_a_start_and_pages_to_the_end_of_stream(
    http: ClientSession, sim: VendorSimulator
) -> None:
    status, body = await get(http, sim, "/incremental/tickets.json")
    assert status == 400 and "start_time" in body["error"]["message"]
    status, body = await get(http, sim, "/incremental/tickets.json", start_time=0)
    assert status == 200 and body["end_of_stream"] is True
    assert body["count"] == 6 and body["end_time"] == max(t["updated"] for t in body["tickets"])
    assert "start_time=0" in body["next_page"]
