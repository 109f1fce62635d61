"""Pollers for the vendor simulator: what the demo and the runner tests load with
``python: integration.pollers:invoices``.

The simulator's address comes from ``WATUKUY_VENDOR_URL``. Each tenant is a partition whose
``data`` holds its slug and bearer token: the token is a secret, so it must never reach Kafka
(the canary test looks for it in every topic). ``WATUKUY_SCHEDULE_MIN`` and ``_MAX`` bound
how often a tenant is polled (default 1s..10s, so a demo shows changes quickly);
``WATUKUY_PAGE_SIZE`` how many items a page asks for (100).
"""

from __future__ import annotations

import os
from typing import Any

import aiohttp

from watukuy import FetchContext, define_poller


def vendor_url() -> str:
    return os.environ.get("WATUKUY_VENDOR_URL", "http://127.0.0.1:8099").rstrip("/")


def page_size() -> int:
    """Items per page, ``WATUKUY_PAGE_SIZE`` (default 100; the simulator allows 1..500)."""
    return int(os.environ.get("WATUKUY_PAGE_SIZE", "100"))


async def list_tenants() -> list[dict[str, Any]]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{vendor_url()}/tenants") as response,
    ):
        response.raise_for_status()
        body = await response.json()
    return [
        {"key": tenant["id"], "data": {"slug": tenant["slug"], "token": tenant["token"]}}
        for tenant in body["tenants"]
    ]


async def fetch_items(ctx: FetchContext) -> dict[str, Any]:
    tenant = ctx.partition.data
    response = await ctx.http.get(
        f"{vendor_url()}/{tenant['slug']}/items",
        query={"cursor": ctx.cursor.value, "limit": page_size()},
        headers={"Authorization": f"Bearer {tenant['token']}"},
    )
    body = await response.json()
    return {
        "items": body["data"],
        "cursor": body["next"] or body["resume"],
        "has_more": body["next"] is not None,
    }


invoices = define_poller(
    name="invoices",
    partitions=list_tenants,
    partitions_refresh="30s",
    identity=lambda item: item["id"],
    version=lambda item: item["etag"],
    cursor={"strategy": "token", "initial": None},
    fetch=fetch_items,
    schedule={
        "min": os.environ.get("WATUKUY_SCHEDULE_MIN", "1s"),
        "max": os.environ.get("WATUKUY_SCHEDULE_MAX", "10s"),
    },
)
