"""A compiled declarative poller run by the engine unchanged: events, stored cursors, parked
items and a poll that stops at ``max_pages`` and goes on at the next."""

from __future__ import annotations

from typing import Any

from tests.declarative.helpers import API, compile_spec, query_of, spec
from watukuy import Engine, FakeClock, MemoryStore, Poller
from watukuy.http import HttpClient, ScriptedTransport, reply

TENANTS = {
    "static": [
        {"key": "acme", "data": {"slug": "acme", "token": "tok-acme"}},
        {"key": "globex", "data": {"slug": "globex", "token": "tok-globex"}},
    ]
}


def tickets(**overrides: Any) -> Poller:
    entry: dict[str, Any] = {
        "partitions": TENANTS,
        "request": {
            "url": API + "/{partition.data.slug}/tickets",
            "query": {"limit": 2},
            "auth": {"bearer": "{partition.data.token}"},
        },
        "records": "data",
        "identity": "id",
        "version": "rev",
        "paginate": {"next_token": {"path": "next", "param": "cursor"}},
        "cursor": {"token": {"path": "resume", "param": "cursor"}},
        "schedule": {"min": "30s", "max": "5m"},
    }
    return compile_spec(spec(**(entry | overrides)))


def engine_for(poller: Poller, transport: ScriptedTransport, clock: FakeClock) -> Engine:
    return Engine([poller], store=MemoryStore(), clock=clock, http=HttpClient(transport=transport))


async def test_two_polls_create_then_update_and_keep_the_cursor() -> None:
    transport, clock = ScriptedTransport(), FakeClock()
    transport.add(
        "GET",
        f"{API}/acme/tickets",
        reply(json={"data": [{"id": "a", "rev": 1}, {"id": "b", "rev": 1}], "next": "n1"}),
        reply(json={"data": [{"id": "c", "rev": 1}], "next": None, "resume": "r1"}),
        reply(json={"data": [{"id": "a", "rev": 2}, {"id": "c", "rev": 1}], "resume": "r2"}),
    )
    transport.add("GET", f"{API}/globex/tickets", json={"data": [], "resume": "g1"})
    engine = engine_for(tickets(), transport, clock)
    seen: list[Any] = []

    async def record(event: Any, ctx: Any) -> None:
        seen.append(event)

    engine.on("tickets", record)
    try:
        await engine.tick()
        first = [(e.partition, e.subject, e.type, e.version, e.sequence) for e in seen]
        clock.advance(30)
        await engine.tick()
        second = [(e.partition, e.subject, e.type, e.version, e.sequence) for e in seen[3:]]
        store = engine.store
        assert isinstance(store, MemoryStore)
        cursors = {key: state.live.cursor for key, state in store.states.items()}
    finally:
        await engine.close()

    assert first == [
        ("acme", "a", "created", "1", 1),
        ("acme", "b", "created", "1", 2),
        ("acme", "c", "created", "1", 3),
    ]
    assert second == [("acme", "a", "updated", "2", 4)]
    assert seen[3].data == {"id": "a", "rev": 2}
    assert cursors == {"tickets/acme": "r2", "tickets/globex": "g1"}
    acme = [r for r in transport.requests if r.url.path == "/acme/tickets"]
    assert [query_of(r) for r in acme] == [
        {"limit": "2"},
        {"limit": "2", "cursor": "n1"},
        {"limit": "2", "cursor": "r1"},
    ]
    assert {r.headers["Authorization"] for r in acme} == {"Bearer tok-acme"}


async def test_an_item_without_identity_is_parked_and_the_rest_goes_on() -> None:
    transport, clock = ScriptedTransport(), FakeClock()
    transport.add(
        "GET",
        f"{API}/acme/tickets",
        json={
            "data": [{"meta": {"ref": "pers0nal"}, "rev": 1}, {"meta": {"id": "b"}, "rev": 1}],
            "resume": "r1",
        },
    )
    transport.add("GET", f"{API}/globex/tickets", json={"data": [], "resume": "g1"})
    engine = engine_for(tickets(identity="meta.id"), transport, clock)
    seen: list[Any] = []

    async def record(event: Any, ctx: Any) -> None:
        seen.append(event)

    engine.on("tickets", record)
    try:
        await engine.tick()
        parked = await engine.parked.list("tickets", partition="acme", kind="invalid")
        [inspect] = [i for i in engine.inspect() if i.partition == "acme"]
    finally:
        await engine.close()

    assert [(e.subject, e.type) for e in seen] == [("b", "created")]
    [item] = parked
    assert item.error == "identity() raised PathMissing: no value at identity 'meta.id'"
    assert item.item == {"meta": {"ref": "pers0nal"}, "rev": 1}
    assert inspect.last_error is None


async def test_a_poll_stopped_by_max_pages_goes_on_at_the_next() -> None:
    transport, clock = ScriptedTransport(), FakeClock()
    pages = [
        reply(
            json={
                "data": [{"id": f"i{n}", "rev": 1}],
                "next": f"n{n}" if n < 3 else None,
                "resume": f"r{n}",
            }
        )
        for n in (1, 2, 3)
    ]
    transport.add("GET", f"{API}/acme/tickets", *pages)
    transport.add("GET", f"{API}/globex/tickets", json={"data": [], "resume": "g1"})
    engine = engine_for(tickets(max_pages=2), transport, clock)
    try:
        await engine.tick()
        store = engine.store
        assert isinstance(store, MemoryStore)
        midway = store.states["tickets/acme"].live.cursor
        clock.advance(30)
        await engine.tick()
        done = store.states["tickets/acme"].live.cursor
    finally:
        await engine.close()

    assert midway == {"page": "n2", "resume": None}
    assert done == "r3"
    acme = [query_of(r) for r in transport.requests if r.url.path == "/acme/tickets"]
    assert [q.get("cursor") for q in acme] == [None, "n1", "n2"]
