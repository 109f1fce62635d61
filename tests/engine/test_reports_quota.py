"""The simulator's reports endpoint (Harvest-like: a quota of its own), and a stream reading it
paced by two budgets so that the vendor never refuses it (issue 44)."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from integration.simulator import VendorSimulator, running_simulator
from integration.simulator.quotas import HARVEST_REPORTS
from watukuy import Engine
from watukuy.config import parse_config
from watukuy.config.budgets import engine_budgets

pytestmark = pytest.mark.unit


async def get(session: aiohttp.ClientSession, url: str, **options: Any) -> tuple[int, Any]:
    async with session.get(url, **options) as response:
        return response.status, await response.json(), response.headers  # type: ignore[return-value]


async def test_reports_have_their_own_quota_and_say_when_to_come_back() -> None:
    sim = VendorSimulator(tenants=2, items_per_tenant=5, seed=1)
    acme, beta = sim.tenants
    async with running_simulator(sim) as base, aiohttp.ClientSession() as session:
        status, shown, _ = await get(session, f"{base}/_admin/reports-quota")
        assert (shown["limit"], shown["window"]) == HARVEST_REPORTS
        async with session.post(f"{base}/_admin/reports-quota", json={"limit": 2}) as answer:
            assert answer.status == 200
        auth = {"Authorization": f"Bearer {acme.token}"}
        url = f"{base}/{acme.slug}/reports/time"
        answers = [await get(session, url, headers=auth) for _ in range(3)]
        assert [status for status, _, _ in answers] == [200, 200, 429]
        assert len(answers[0][1]["results"]) == 5 and answers[0][1]["next_page"] is None
        assert answers[1][2]["X-Reports-Remaining"] == "0"
        assert int(answers[2][2]["Retry-After"]) > 800  # the rest of a 15-minute window
        # Another account's quota is its own; the items listing is not a report.
        other = {"Authorization": f"Bearer {beta.token}"}
        assert (await get(session, f"{base}/{beta.slug}/reports/time", headers=other))[0] == 200
        assert (await get(session, f"{base}/{acme.slug}/items", headers=auth))[0] == 200
        status, _, _ = await get(session, f"{base}/{acme.slug}/reports/time")
        assert status == 401
        _, shown, _ = await get(session, f"{base}/_admin/reports-quota")
        counts = {slug: (t["served"], t["refused"]) for slug, t in shown["tenants"].items()}
        assert counts == {acme.slug: (2, 1), beta.slug: (1, 0)}


def harvest(base: str, sim: VendorSimulator, reports_budget: object) -> dict[str, Any]:
    """A runner config of a Harvest-like connector: items and reports of two accounts, the
    second on a plan of half the rate."""
    plans = ["20/s", "10/s"]
    tenants = [
        {"key": t.id, "data": {"slug": t.slug, "token": t.token, "rate_limit": plan}}
        for t, plan in zip(sim.tenants, plans, strict=True)
    ]
    connector = {
        "name": "harvest",
        "partitions": {"static": tenants},
        "defaults": {
            "request": {
                "base": f"{base}/{{partition.data.slug}}",
                "auth": {"bearer": "{partition.data.token}"},
            },
            "identity": "id",
            "budget": "vendor",
        },
        "streams": [
            {
                "name": "items",
                "request": {"path": "/items", "query": {"limit": 2}},
                "records": "data",
                "paginate": {"next_token": {"path": "next", "param": "cursor"}},
            },
            {
                "name": "reports",
                "request": {"path": "/reports/time", "query": {"per_page": 2}},
                "records": "results",
                "paginate": {"next_token": {"path": "next_page", "param": "page"}},
                "budget": reports_budget,
            },
        ],
    }
    return {
        "kafka": {"bootstrap.servers": "127.0.0.1:9092"},
        "runner": {"id": "runner-1"},
        "budgets": {
            "vendor": {"rate": "{partition.data.rate_limit}", "burst": 1, "per": "tenant"},
            "reports": {"rate": "3/2s", "burst": 1, "per": "tenant"},
        },
        "pollers": [connector],
    }


async def poll_once(base: str, sim: VendorSimulator, reports_budget: object) -> Engine:
    config = parse_config(harvest(base, sim, reports_budget))
    engine = Engine(config.pollers, budgets=engine_budgets(config.budgets))
    await asyncio.wait_for(engine.tick(), timeout=20)
    return engine


def report_statuses(sim: VendorSimulator) -> list[int]:
    return [e.status for t in sim.tenants for e in sim.log(t.id) if "/reports/" in e.path]


async def test_a_stream_naming_the_reports_budget_too_is_never_refused() -> None:
    """The vendor allows 2 report requests a second per account; the reports budget (3 per
    2 s per tenant) keeps each tenant under it, whatever its plan's rate for the rest."""
    sim = VendorSimulator(tenants=2, items_per_tenant=5, seed=1)
    async with running_simulator(sim) as base, aiohttp.ClientSession() as session:
        await session.post(f"{base}/_admin/reports-quota", json={"limit": 2, "window": 1})
        engine = await poll_once(base, sim, ["vendor", "reports"])
        await engine.close()
    assert report_statuses(sim) == [200] * 6  # 3 pages of 5 items, two accounts


async def test_without_the_reports_budget_the_vendor_refuses_reports() -> None:
    """The control of the test above: paced by each plan's rate alone, reports are refused."""
    sim = VendorSimulator(tenants=2, items_per_tenant=5, seed=1)
    async with running_simulator(sim) as base, aiohttp.ClientSession() as session:
        await session.post(f"{base}/_admin/reports-quota", json={"limit": 2, "window": 1})
        engine = await poll_once(base, sim, "vendor")
        await engine.close()
    assert 429 in report_statuses(sim)
