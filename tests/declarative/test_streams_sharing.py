"""What the streams of one connector share per tenant, run by the engine on the memory store:
one tenant listing per refresh, one OAuth2 token per tenant, and the vendor's pacing (a 429
for one stream of a tenant holds that tenant's other streams, not other tenants)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.declarative.helpers import API, WHERE
from watukuy import Engine, FakeClock, MemoryStore
from watukuy.declarative import compile_connector_entry
from watukuy.http import HttpClient, ScriptedTransport, reply

TENANTS = f"{API}/tenants"
TOKEN = f"{API}/oauth/token"
STREAMS = ("projects", "users", "labels")


def connector(transport: Vendor, auth: dict[str, Any] | None = None) -> Engine:
    """The engine polls through ``transport``; the tenants endpoint is listed through
    ``transport.tenants`` (a listing closes its own client, as with aiohttp)."""
    entry = {
        "name": "tracker",
        "partitions": {
            "http": {"url": TENANTS, "key": "id", "data": {"slug": "slug", "client": "client"}},
            "refresh": "5m",
        },
        "defaults": {
            "request": {
                "base": API + "/{partition.data.slug}",
                "auth": auth or {"bearer": "static-token"},
            },
            "records": "data",
            "identity": "id",
            "schedule": {"min": "30s", "max": "30s"},
        },
        "streams": [{"name": name, "request": {"path": name}} for name in STREAMS],
    }
    pollers = compile_connector_entry(
        entry, where=WHERE, base_dir=Path("."), transport=transport.tenants
    )
    return Engine(
        pollers, store=MemoryStore(), clock=FakeClock(), http=HttpClient(transport=transport)
    )


class Vendor(ScriptedTransport):
    def __init__(self) -> None:
        super().__init__()
        self.tenants = ScriptedTransport()


def vendor() -> Vendor:
    transport = Vendor()
    transport.tenants.add(
        "GET",
        TENANTS,
        json=[
            {"id": "acme", "slug": "acme", "client": "c-acme"},
            {"id": "globex", "slug": "globex", "client": "c-globex"},
        ],
    )
    for slug in ("acme", "globex"):
        for name in STREAMS:
            transport.add("GET", f"{API}/{slug}/{name}", json={"data": [{"id": f"{slug}-{name}"}]})
    return transport


def served(transport: ScriptedTransport, slug: str, name: str) -> int:
    return transport.served("GET", f"{API}/{slug}/{name}")


async def test_one_tenant_listing_per_refresh_for_every_stream() -> None:
    transport = vendor()
    engine = connector(transport)
    clock = engine.clock
    assert isinstance(clock, FakeClock)
    try:
        await engine.tick()
        first = transport.tenants.served("GET", TENANTS)
        polled = {
            (slug, name): served(transport, slug, name)
            for slug in ("acme", "globex")
            for name in STREAMS
        }
        for _ in range(2):  # two more refreshes
            clock.advance(300)
            await engine.tick()
        keys = sorted(f"{i.poller}/{i.partition}" for i in engine.inspect())
    finally:
        await engine.close()

    assert first == 1  # three streams, one listing
    assert set(polled.values()) == {1}  # and every stream polled both tenants
    assert transport.tenants.served("GET", TENANTS) == 3
    assert keys == sorted(
        f"tracker.{name}/{slug}" for name in STREAMS for slug in ("acme", "globex")
    )


async def test_one_oauth2_token_per_tenant_for_every_stream() -> None:
    transport = vendor()
    clients: list[str] = []

    def token(request: Any) -> Any:
        clients.append(request.headers["Authorization"])
        return reply(json={"access_token": f"tok-{len(clients)}", "expires_in": 3600})

    transport.add("POST", TOKEN, handler=token)
    auth = {
        "oauth2": {
            "token_url": TOKEN,
            "client_id": "{partition.data.client}",
            "client_secret": "sh",
        }
    }
    engine = connector(transport, auth=auth)
    try:
        await engine.tick()
    finally:
        await engine.close()

    assert len(clients) == 2  # acme's and globex's, not one per stream and tenant
    assert len(set(clients)) == 2
    sent = [r.headers["Authorization"] for r in transport.requests if r.url.path.endswith("/users")]
    assert sorted(sent) == ["Bearer tok-1", "Bearer tok-2"]


async def test_a_429_on_one_stream_holds_that_tenants_other_streams_only() -> None:
    transport = vendor()
    engine = connector(transport)
    clock = engine.clock
    assert isinstance(clock, FakeClock)
    try:
        await engine.tick()
        transport.add("GET", f"{API}/acme/projects", reply(429, headers={"Retry-After": "600"}))
        await engine.trigger("tracker.projects", partition="acme")
        await engine.tick()
        before = {(s, n): served(transport, s, n) for s in ("acme", "globex") for n in STREAMS}
        clock.advance(60)  # the others are due again; acme is paced for 10 minutes
        await engine.tick()
        after = {(s, n): served(transport, s, n) for s in ("acme", "globex") for n in STREAMS}
        state = {
            f"{i.poller}/{i.partition}": (i.throttled_until is not None, i.last_error)
            for i in engine.inspect()
        }
    finally:
        await engine.close()

    asked = {key: after[key] - before[key] for key in after}
    assert asked[("acme", "users")] == asked[("acme", "labels")] == 0
    assert asked[("acme", "projects")] == 0  # its own throttle window
    assert asked[("globex", "users")] == asked[("globex", "labels")] == 1
    assert asked[("globex", "projects")] == 1
    paced, error = state["tracker.users/acme"]
    assert paced
    assert error is not None and "rate-limited (seen by another stream)" in error
    assert state["tracker.users/globex"] == (False, None)
