"""The vendor simulator behaves like the vendor the engine tests rely on.

Each test pins one promise (pagination, resume cursors, validators, rate limits, faults,
admin control, determinism) so that breaking the feature breaks the test, through HTTP as a
poller sees it unless the promise is about the Python model itself.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import fastavro
import pytest
from aiohttp import ClientSession
from fastavro.validation import validate

from integration.simulator import (
    POISON_KINDS,
    Faults,
    NotFound,
    Tenant,
    VendorSimulator,
    decode_cursor,
    encode_cursor,
    from_iso,
    running_simulator,
    to_iso,
)
from integration.simulator.__main__ import parse_duration
from integration.simulator.paging import BadRequest, select_page

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self, start: float = 1_750_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sim(clock: FakeClock) -> VendorSimulator:
    return VendorSimulator(tenants=3, items_per_tenant=12, seed=7, now=clock)


@pytest.fixture
async def http(sim: VendorSimulator) -> AsyncIterator[ClientSession]:
    async with running_simulator(sim) as base_url, ClientSession(base_url=base_url) as session:
        yield session


def bearer(tenant: Tenant) -> dict[str, str]:
    return {"Authorization": f"Bearer {tenant.token}"}


async def get_items(
    http: ClientSession, tenant: Tenant, headers: dict[str, str] | None = None, **params: Any
) -> tuple[int, dict[str, Any] | None, Mapping[str, str]]:
    """One listing request: status, parsed body (None without one), case-insensitive headers."""
    query = {key: str(value) for key, value in params.items() if value is not None}
    async with http.get(
        f"/{tenant.slug}/items", params=query, headers=bearer(tenant) | (headers or {})
    ) as resp:
        text = await resp.text()
        return resp.status, json.loads(text) if text else None, resp.headers


async def scan(
    http: ClientSession, tenant: Tenant, cursor: str | None = None, limit: int = 5
) -> tuple[list[dict[str, Any]], str]:
    """Follow ``next`` to the end; return every item and the last ``resume`` token."""
    items: list[dict[str, Any]] = []
    while True:
        status, body, _ = await get_items(http, tenant, cursor=cursor, limit=limit)
        assert status == 200 and body is not None
        items.extend(body["data"])
        if body["next"] is None:
            return items, body["resume"]
        cursor = body["next"]


def ids(items: list[dict[str, Any]]) -> list[str]:
    return [item["id"] for item in items]


# -- listing ------------------------------------------------------------------------------


async def test_tenants_listing_gives_ids_slugs_and_tokens(
    http: ClientSession, sim: VendorSimulator
) -> None:
    async with http.get("/tenants") as resp:
        assert resp.status == 200
        body = await resp.json()
    assert body == {"tenants": [t.to_json() for t in sim.tenants]}
    assert [t["id"] for t in body["tenants"]] == ["t_0001", "t_0002", "t_0003"]


async def test_pagination_covers_every_item_exactly_once_in_order(
    http: ClientSession, sim: VendorSimulator
) -> None:
    tenant = sim.tenants[0]
    pages = []
    cursor = None
    while True:
        status, body, _ = await get_items(http, tenant, cursor=cursor, limit=5)
        assert status == 200 and body is not None
        pages.append(body["data"])
        if body["next"] is None:
            break
        assert body["resume"] == body["next"]
        cursor = body["next"]
    assert [len(page) for page in pages] == [5, 5, 2]
    seen = [item for page in pages for item in page]
    assert ids(seen) == ids(sim.items(tenant.id))
    assert len(set(ids(seen))) == 12
    keys = [(item["updated_at"], item["id"]) for item in seen]
    assert keys == sorted(keys)
    assert all(item["updated_at"].endswith("Z") for item in seen)


async def test_a_page_that_ends_exactly_at_the_last_item_is_the_last(
    http: ClientSession, sim: VendorSimulator
) -> None:
    tenant = sim.tenants[0]
    _, body, _ = await get_items(http, tenant, limit=12)
    assert body is not None and len(body["data"]) == 12 and body["next"] is None
    _, body, _ = await get_items(http, tenant, limit=6)
    assert body is not None and body["next"] is not None
    _, body, _ = await get_items(http, tenant, limit=6, cursor=body["next"])
    assert body is not None and len(body["data"]) == 6 and body["next"] is None


async def test_default_limit_is_50(http: ClientSession, sim: VendorSimulator) -> None:
    tenant = sim.add_tenant(items=60)
    status, body, _ = await get_items(http, tenant)
    assert status == 200 and body is not None
    assert len(body["data"]) == 50 and body["next"] is not None


async def test_resume_returns_only_changes_made_after_it(
    http: ClientSession, sim: VendorSimulator, clock: FakeClock
) -> None:
    tenant = sim.tenants[1]
    _, resume = await scan(http, tenant)
    assert (await scan(http, tenant, cursor=resume))[0] == []

    clock.advance(5)
    first = sim.items(tenant.id)[0]["id"]
    updated = sim.update_item(tenant.id, first, amount=1.5)
    created = sim.create_item(tenant.id, name="fresh")
    changes, resume = await scan(http, tenant, cursor=resume)

    assert ids(changes) == [first, created["id"]]
    assert changes[0]["etag"] == updated["etag"] and changes[0]["amount"] == 1.5
    assert (await scan(http, tenant, cursor=resume))[0] == []


async def test_resume_sees_changes_when_the_clock_stands_still_or_goes_back(
    http: ClientSession, sim: VendorSimulator, clock: FakeClock
) -> None:
    tenant = sim.tenants[0]
    _, resume = await scan(http, tenant)
    clock.now = 0.0  # before the generated history: stamps must still move forward
    last = sim.items(tenant.id)[-1]["id"]
    sim.update_item(tenant.id, last, status="archived")
    sim.update_item(tenant.id, sim.items(tenant.id)[0]["id"], status="archived")
    changes, _ = await scan(http, tenant, cursor=resume)
    assert len(changes) == 2 and last in ids(changes)
    assert changes[0]["updated_at"] < changes[1]["updated_at"]


async def test_updated_since_keeps_items_at_or_after_it(
    http: ClientSession, sim: VendorSimulator
) -> None:
    tenant = sim.tenants[2]
    everything = sim.items(tenant.id)
    since = everything[4]["updated_at"]
    status, body, _ = await get_items(http, tenant, updated_since=since, limit=500)
    assert status == 200 and body is not None
    assert ids(body["data"]) == [i["id"] for i in everything if i["updated_at"] >= since]
    assert everything[4]["id"] in ids(body["data"])
    assert everything[3]["id"] not in ids(body["data"])


async def test_deleted_items_vanish_from_a_full_scan(
    http: ClientSession, sim: VendorSimulator
) -> None:
    tenant = sim.tenants[0]
    victim = sim.items(tenant.id)[3]["id"]
    sim.delete_item(tenant.id, victim)
    seen, _ = await scan(http, tenant)
    assert victim not in ids(seen) and len(seen) == 11
    with pytest.raises(NotFound):
        sim.item(tenant.id, victim)


# -- validators, auth, bad requests -------------------------------------------------------


async def test_if_none_match_gives_304_until_the_page_changes(
    http: ClientSession, sim: VendorSimulator
) -> None:
    tenant = sim.tenants[0]
    status, _, headers = await get_items(http, tenant, limit=100)
    etag = headers["ETag"]
    assert status == 200 and etag.startswith('"')

    status, body, headers = await get_items(http, tenant, {"If-None-Match": etag}, limit=100)
    assert (status, body, headers["ETag"]) == (304, None, etag)
    assert "RateLimit-Remaining" in headers

    sim.update_item(tenant.id, sim.items(tenant.id)[0]["id"], name="renamed")
    status, body, headers = await get_items(http, tenant, {"If-None-Match": etag}, limit=100)
    assert status == 200 and body is not None and headers["ETag"] != etag


async def test_wrong_or_missing_token_is_401_and_unknown_slug_404(
    http: ClientSession, sim: VendorSimulator
) -> None:
    tenant, other = sim.tenants[0], sim.tenants[1]
    async with http.get(f"/{tenant.slug}/items", headers=bearer(other)) as resp:
        assert resp.status == 401 and "error" in await resp.json()
    async with http.get(f"/{tenant.slug}/items") as resp:
        assert resp.status == 401
        assert resp.headers["RateLimit-Remaining"] == "1000"  # refused calls cost no quota
    async with http.get("/no-such-tenant/items", headers=bearer(tenant)) as resp:
        assert resp.status == 404 and "error" in await resp.json()


@pytest.mark.parametrize(
    "params",
    [
        {"limit": "0"},
        {"limit": "501"},
        {"limit": "ten"},
        {"cursor": "garbage"},
        {"cursor": "c1.!!!"},
        {"cursor": encode_cursor((1, "x"))[:-2] + "xx"},
        {"updated_since": "yesterday"},
    ],
)
async def test_bad_parameters_are_400_with_a_json_error(
    http: ClientSession, sim: VendorSimulator, params: dict[str, str]
) -> None:
    status, body, _ = await get_items(http, sim.tenants[0], None, **params)
    assert status == 400 and body is not None and isinstance(body["error"], str)


# -- rate limits ----------------------------------------------------------------------------


async def test_quota_headers_count_down_then_429_with_retry_after(clock: FakeClock) -> None:
    sim = VendorSimulator(tenants=2, items_per_tenant=2, seed=1, quota=3, window=10, now=clock)
    tenant = sim.tenants[0]
    async with running_simulator(sim) as url, ClientSession(base_url=url) as http:
        remaining = []
        for _ in range(3):
            status, _, headers = await get_items(http, tenant)
            assert status == 200 and headers["RateLimit-Limit"] == "3"
            remaining.append(headers["RateLimit-Remaining"])
        assert remaining == ["2", "1", "0"]

        clock.advance(4)
        status, body, headers = await get_items(http, tenant)
        assert status == 429 and body is not None and "error" in body
        assert headers["Retry-After"] == "6" and headers["RateLimit-Reset"] == "6"

        status, _, _ = await get_items(http, sim.tenants[1])
        assert status == 200  # the quota is per tenant

        clock.advance(6)
        status, _, headers = await get_items(http, tenant)
        assert status == 200 and headers["RateLimit-Remaining"] == "2"
        assert "Retry-After" not in headers


# -- faults ---------------------------------------------------------------------------------


async def test_fail_next_gives_503_then_recovers(http: ClientSession, sim: VendorSimulator) -> None:
    tenant = sim.tenants[0]
    sim.faults(tenant.id).fail_next = 2
    statuses = [(await get_items(http, tenant))[0] for _ in range(3)]
    assert statuses == [503, 503, 200]
    assert [entry.status for entry in sim.log(tenant.id)] == statuses
    assert sim.request_count(tenant.id) == 3 and sim.request_count(sim.tenants[1].id) == 0


async def test_error_rate_fails_with_the_chosen_status(
    http: ClientSession, sim: VendorSimulator
) -> None:
    tenant = sim.tenants[0]
    sim.set_faults(tenant.id, error_rate=1.0, fail_status=500)
    assert [(await get_items(http, tenant))[0] for _ in range(3)] == [500, 500, 500]
    sim.set_faults(tenant.id)
    assert (await get_items(http, tenant))[0] == 200


async def test_malformed_json_body_does_not_parse(
    http: ClientSession, sim: VendorSimulator
) -> None:
    tenant = sim.tenants[0]
    sim.faults(tenant.id).malformed_json = True
    async with http.get(f"/{tenant.slug}/items", headers=bearer(tenant)) as resp:
        assert resp.status == 200 and resp.content_type == "application/json"
        text = await resp.text()
    assert text.startswith("{")
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)


async def test_drop_id_serves_items_without_id(http: ClientSession, sim: VendorSimulator) -> None:
    tenant = sim.tenants[0]
    sim.faults(tenant.id).drop_id = True
    _, body, _ = await get_items(http, tenant, limit=100)
    assert body is not None and len(body["data"]) == 12
    assert all("id" not in item and "etag" in item for item in body["data"])
    assert [entry["kind"] for entry in sim.poisoned(tenant.id)] == ["malformed"] * 12


async def test_delay_slows_the_answer(http: ClientSession, sim: VendorSimulator) -> None:
    tenant = sim.tenants[0]
    sim.faults(tenant.id).delay = 0.2
    started = time.monotonic()
    assert (await get_items(http, tenant))[0] == 200
    assert time.monotonic() - started >= 0.2


def test_faults_refuse_nonsense(sim: VendorSimulator) -> None:
    bad_faults: list[dict[str, Any]] = [
        {"error_rate": 2},
        {"fail_next": -1},
        {"fail_status": 200},
        {"oops": True},
        {"retry_after": -1},
        {"poison_rate": 1.5},
        {"poison_kinds": ["schema", "nope"]},
        {"poison_kinds": []},
        {"poison_bytes": 0},
        {"heals_at": "soon"},
        {"echo_request": "yes"},
    ]
    for bad in bad_faults:
        with pytest.raises(ValueError):
            Faults.from_json(bad)
    with pytest.raises(ValueError, match="heal_after"):
        sim.set_faults(sim.tenants[0].id, error_rate=1.0, heal_after=0)


async def test_a_storm_heals_after_its_time(
    http: ClientSession, sim: VendorSimulator, clock: FakeClock
) -> None:
    tenant, other = sim.tenants[0], sim.tenants[1]
    storm = {"error_rate": 1.0, "fail_status": 502, "heal_after": 10}
    async with http.post(f"/_admin/tenants/{tenant.id}/faults", json=storm) as resp:
        assert resp.status == 200 and (await resp.json())["heals_at"] == clock.now + 10
    clock.advance(9.9)
    assert [(await get_items(http, t))[0] for t in (tenant, tenant, other)] == [502, 502, 200]
    clock.advance(0.1)
    assert (await get_items(http, tenant))[0] == 200
    assert sim.faults(tenant.id) == Faults()


async def test_an_injected_429_says_when_to_retry(
    http: ClientSession, sim: VendorSimulator
) -> None:
    tenant = sim.tenants[0]
    sim.set_faults(tenant.id, fail_next=1, fail_status=429, retry_after=7)
    status, body, headers = await get_items(http, tenant)
    assert status == 429 and headers["Retry-After"] == "7" and body is not None
    assert (await get_items(http, tenant))[0] == 200


async def test_an_echoing_failure_quotes_the_request(
    http: ClientSession, sim: VendorSimulator
) -> None:
    tenant = sim.tenants[0]
    sim.set_faults(tenant.id, fail_next=1, fail_status=500, echo_request=True)
    status, body, _ = await get_items(http, tenant, limit=3)
    assert status == 500 and body is not None
    assert body["request"]["authorization"] == f"Bearer {tenant.token}"
    assert tenant.slug in body["error"] and "limit=3" in body["request"]["path"]
    assert (await get_items(http, tenant))[0] == 200


def invoice_schema() -> Any:
    return fastavro.parse_schema(json.loads((ROOT / "schemas/examples/invoice.avsc").read_text()))


def valid_invoice(item: dict[str, Any]) -> bool:
    return bool(validate(item, invoice_schema(), raise_errors=False))


async def test_poison_items_are_chosen_by_id_and_broken_their_way(
    http: ClientSession, sim: VendorSimulator
) -> None:
    tenant = sim.add_tenant(items=400)
    sim.set_faults(tenant.id, poison_rate=0.1, poison_bytes=5000)
    served, _ = await scan(http, tenant, limit=100)
    assert len(served) == 400
    by_etag = {item["etag"]: item for item in served}
    poisoned = sim.poisoned(tenant.id)
    assert 20 <= len(poisoned) <= 60  # about a tenth
    assert {entry["kind"] for entry in poisoned} == set(POISON_KINDS)
    for entry in poisoned:
        item = by_etag[entry["version"]]
        kind = entry["kind"]
        assert ("id" not in item) == (kind in ("malformed", "oversized_malformed"))
        assert (len(item["name"]) > 5000) == (kind in ("oversized", "oversized_malformed"))
        if kind == "schema":
            assert item["id"] == entry["id"] and not valid_invoice(item)
        if kind == "oversized":
            assert valid_invoice(item)
    intact = [item for item in served if item["etag"] not in {p["version"] for p in poisoned}]
    assert all(valid_invoice(item) for item in intact)
    assert sim.served(tenant.id) == [{"id": i["id"], "version": i["etag"]} for i in intact]

    # The same items again, and a new version of a poisoned one is poisoned as well.
    again, resume = await scan(http, tenant, limit=100)
    assert again == served
    victim = poisoned[0]
    sim.update_item(tenant.id, victim["id"], amount=2.5)
    await scan(http, tenant, cursor=resume)
    assert len(sim.poisoned(tenant.id)) == len(poisoned) + 1
    assert sim.poisoned(tenant.id)[-1]["id"] == victim["id"]
    assert sim.poisoned(tenant.id)[-1]["kind"] == victim["kind"]


async def test_oversized_poison_exceeds_a_kafka_record_by_default(
    http: ClientSession, sim: VendorSimulator
) -> None:
    tenant = sim.tenants[0]
    sim.set_faults(tenant.id, poison_rate=1.0, poison_kinds=["oversized"])
    _, body, _ = await get_items(http, tenant, limit=1)
    assert body is not None
    assert len(json.dumps(body["data"][0])) > 1_048_588  # Kafka's default max.message.bytes
    assert valid_invoice(body["data"][0])


# -- accounting -----------------------------------------------------------------------------


async def test_request_counts_and_log(http: ClientSession, sim: VendorSimulator) -> None:
    first, second = sim.tenants[0], sim.tenants[1]
    await get_items(http, first, limit=3)
    await get_items(http, first, limit="x")
    await get_items(http, second)
    async with http.get("/tenants"):
        pass
    assert sim.request_count(first.id) == 2 and sim.request_count(second.id) == 1
    assert sim.request_count() == 4
    assert [tuple(entry) for entry in sim.log(first.id)] == [
        (f"/{first.slug}/items", {"limit": "3"}, 200),
        (f"/{first.slug}/items", {"limit": "x"}, 400),
    ]
    async with http.get(f"/_admin/tenants/{first.id}/log") as resp:
        assert await resp.json() == [
            {"path": f"/{first.slug}/items", "query": {"limit": "3"}, "status": 200},
            {"path": f"/{first.slug}/items", "query": {"limit": "x"}, "status": 400},
        ]
    sim.reset_stats()
    assert sim.request_count() == 0 and sim.log(first.id) == []


async def test_served_lists_each_version_handed_out_intact_once(
    http: ClientSession, sim: VendorSimulator
) -> None:
    tenant, other = sim.tenants[0], sim.tenants[1]
    first, resume = await scan(http, tenant, limit=5)
    await scan(http, tenant, limit=5)  # served again: listed once
    changed = sim.update_item(tenant.id, first[0]["id"], amount=1.5)
    sim.faults(tenant.id).malformed_json = True  # a page the client cannot read is not served
    async with http.get(f"/{tenant.slug}/items", params={"cursor": resume}, headers=bearer(tenant)):
        pass
    sim.set_faults(tenant.id, drop_id=True)
    assert (await get_items(http, tenant, cursor=resume))[0] == 200
    async with http.get(f"/_admin/tenants/{tenant.id}/served") as resp:
        assert resp.status == 200
        assert await resp.json() == [{"id": i["id"], "version": i["etag"]} for i in first]
    sim.set_faults(tenant.id)
    assert (await get_items(http, tenant, cursor=resume))[0] == 200
    latest = {"id": changed["id"], "version": changed["etag"]}
    assert sim.served(tenant.id)[-1] == latest and len(sim.served(tenant.id)) == 13
    assert sim.served(other.id) == []

    sim.remove_tenant(tenant.id)  # the ground truth outlives the tenant
    async with http.get(f"/_admin/tenants/{tenant.id}/served") as resp:
        assert resp.status == 200 and len(await resp.json()) == 13
    async with http.get("/_admin/tenants/t_0404/served") as resp:
        assert resp.status == 404


# -- admin API ------------------------------------------------------------------------------


async def test_admin_items_create_update_delete(http: ClientSession, sim: VendorSimulator) -> None:
    tenant = sim.tenants[0]
    base = f"/_admin/tenants/{tenant.id}/items"
    async with http.post(base, json={"id": "custom-1", "name": "made by admin"}) as resp:
        assert resp.status == 201
        created = await resp.json()
    assert created["id"] == "custom-1" and sim.item(tenant.id, "custom-1") == created
    async with http.post(base, json={"id": "custom-1"}) as resp:
        assert resp.status == 409

    for method in ("PATCH", "PUT"):
        async with http.request(method, f"{base}/custom-1", json={"amount": 9.99}) as resp:
            assert resp.status == 200
            updated = await resp.json()
        assert updated["etag"] != created["etag"] and updated["updated_at"] > created["updated_at"]
        assert updated["name"] == "made by admin" and updated["amount"] == 9.99
        created = updated

    async with http.get(base) as resp:
        assert "custom-1" in ids((await resp.json())["data"])
    async with http.delete(f"{base}/custom-1") as resp:
        assert resp.status == 204
    async with http.delete(f"{base}/custom-1") as resp:
        assert resp.status == 404
    assert "custom-1" not in ids((await scan(http, tenant))[0])
    assert sim.request_count(tenant.id) == 3  # the scan only: admin calls are not counted


async def test_admin_tenants_and_faults(http: ClientSession, sim: VendorSimulator) -> None:
    async with http.post("/_admin/tenants", json={"slug": "newco", "items": 2}) as resp:
        assert resp.status == 201
        added = Tenant(**await resp.json())
    async with http.get("/tenants") as resp:
        assert added.to_json() in (await resp.json())["tenants"]
    assert len((await scan(http, added))[0]) == 2

    async with http.post(f"/_admin/tenants/{added.id}/faults", json={"fail_next": 1}) as resp:
        assert resp.status == 200 and (await resp.json())["fail_next"] == 1
    assert (await get_items(http, added))[0] == 503
    async with http.get(f"/_admin/tenants/{added.id}/faults") as resp:
        assert (await resp.json()) == Faults().to_json()
    async with http.post(f"/_admin/tenants/{added.id}/faults", json={"error_rate": 7}) as resp:
        assert resp.status == 400

    async with http.get("/_admin/stats") as resp:
        stats = await resp.json()
    assert stats["tenants"][added.id] == 2 and stats["total"] == sim.request_count()

    async with http.delete(f"/_admin/tenants/{added.id}") as resp:
        assert resp.status == 204
    assert (await get_items(http, added))[0] == 404
    async with http.post(f"/_admin/tenants/{added.id}/items", json={}) as resp:
        assert resp.status == 404
    async with http.post("/_admin/tenants", json={"slug": "Bad Slug"}) as resp:
        assert resp.status == 400
    async with http.post("/_admin/tenants", data="not json") as resp:
        assert resp.status == 400


async def test_first_requests_say_when_every_tenant_was_polled_once(
    http: ClientSession, sim: VendorSimulator, clock: FakeClock
) -> None:
    async def first() -> dict[str, Any]:
        async with http.get("/_admin/first-requests") as resp:
            body: dict[str, Any] = await resp.json()
            return body

    none = {"tenants": 3, "requested": 0, "earliest": None, "latest": None}
    async with http.get("/tenants") as resp:  # not a tenant's request
        assert resp.status == 200
    assert await first() == none
    one, two, three = sim.tenants
    await get_items(http, two)
    clock.advance(5)
    await get_items(http, one)
    clock.advance(5)
    await get_items(http, two)  # its second: its first stays
    start = clock.now - 10
    assert await first() == {"tenants": 3, "requested": 2, "earliest": start, "latest": start + 5}
    await get_items(http, three)
    assert (await first())["latest"] == start + 10
    sim.reset_stats()
    assert await first() == none


# -- determinism and building blocks ----------------------------------------------------------


def test_same_seed_same_data_whatever_the_clock() -> None:
    def snapshot(sim: VendorSimulator) -> list[Any]:
        return [(t, sim.items(t.id)) for t in sim.tenants]

    one = VendorSimulator(tenants=4, items_per_tenant=5, seed=42, now=FakeClock(1.0))
    two = VendorSimulator(tenants=4, items_per_tenant=5, seed=42, now=FakeClock(2e9))
    other = VendorSimulator(tenants=4, items_per_tenant=5, seed=43)
    assert snapshot(one) == snapshot(two)
    assert snapshot(one) != snapshot(other)
    assert len({t.token for t in one.tenants}) == 4

    def content(item: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in item.items() if k not in ("etag", "updated_at", "created_at")}

    assert content(one.create_item("t_0002")) == content(two.create_item("t_0002"))


def test_ties_on_updated_at_page_by_id() -> None:
    class Stub:
        def __init__(self, stamp: int, item_id: str) -> None:
            self.position = (stamp, item_id)

    items = [Stub(5, "b"), Stub(5, "a"), Stub(3, "z"), Stub(5, "c")]
    seen: list[tuple[int, str]] = []
    after = (-1, "")
    while True:
        page = select_page(items, after, 1)
        seen.extend(item.position for item in page.items)
        if page.next is None:
            break
        after = decode_cursor(page.next)
    assert seen == [(3, "z"), (5, "a"), (5, "b"), (5, "c")]


def test_cursor_and_timestamp_round_trips() -> None:
    assert decode_cursor(encode_cursor((1_700_000_000_123_456, "it_1"))) == (
        1_700_000_000_123_456,
        "it_1",
    )
    assert to_iso(1_700_000_000_123_456) == "2023-11-14T22:13:20.123456Z"
    assert from_iso("2023-11-14T22:13:20.123456Z") == 1_700_000_000_123_456
    assert from_iso("2023-11-14T23:13:20.123456+01:00") == 1_700_000_000_123_456
    with pytest.raises(BadRequest):
        decode_cursor(encode_cursor((1, "x")).replace("c1.", "c2."))


def test_parse_duration() -> None:
    assert parse_duration("500ms") == 0.5
    assert parse_duration("2s") == 2.0
    assert parse_duration("1m") == 60.0
    assert parse_duration("1.5") == 1.5


async def test_cli_prints_url_and_tenants_then_stops_on_sigterm() -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "integration.simulator",
        "--tenants=2",
        "--items=3",
        "--seed=7",
        "--port=0",
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        first_line = await asyncio.wait_for(proc.stdout.readline(), timeout=10)
        info = json.loads(first_line)
        expected = VendorSimulator(tenants=2, items_per_tenant=3, seed=7).tenants
        assert info["tenants"] == [t.to_json() for t in expected]
        async with ClientSession() as http, http.get(f"{info['base_url']}/tenants") as resp:
            assert resp.status == 200
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), timeout=10) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
