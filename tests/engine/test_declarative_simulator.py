"""A declarative poller against the real vendor simulator (over HTTP, in-process): the YAML
equivalent of ``integration/pollers.py:invoices`` behaves like the Python reference poller."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.engine.support import Env
from watukuy import Event, Poller
from watukuy.declarative import compile_poller


def invoices_spec(env: Env, *, limit: int = 50) -> dict[str, Any]:
    """``invoices`` as data: tenants from ``GET /tenants``, a bearer token per tenant, ``next``
    for paging and the last ``resume`` kept between polls."""
    return {
        "name": "invoices",
        "partitions": {
            "http": {
                "url": f"{env.base_url}/tenants",
                "records": "tenants",
                "key": "id",
                "data": {"slug": "slug", "token": "token"},
            },
            "refresh": "30s",
        },
        "request": {
            "url": env.base_url + "/{partition.data.slug}/items",
            "query": {"limit": limit},
            "auth": {"bearer": "{partition.data.token}"},
        },
        "records": "data",
        "identity": "id",
        "version": "etag",
        "paginate": {"next_token": {"path": "next", "param": "cursor"}},
        "cursor": {"token": {"path": "resume", "param": "cursor"}},
        "schedule": {"min": "30s", "max": "15m"},
    }


def declarative(env: Env, **options: Any) -> Poller:
    return compile_poller(invoices_spec(env, **options), where="pollers[0]", base_dir=Path("."))


def ordered(events: list[Event]) -> list[Event]:
    return sorted(events, key=lambda e: (e.partition, e.sequence))


async def test_the_declarative_invoices_emit_what_the_python_poller_emits(env: Env) -> None:
    python_engine = env.make_engine(env.make_poller(limit=3))
    python_events = env.recorder(python_engine)
    yaml_engine = env.make_engine(declarative(env, limit=3))
    yaml_events = env.recorder(yaml_engine)

    await python_engine.tick()
    await yaml_engine.tick()

    assert len(yaml_events.events) == 30  # 3 tenants x 10 items, each once
    assert ordered(yaml_events.events) == ordered(python_events.events)  # ids, data, sequences
    # The same requests too: per tenant 4 pages of 3, following ``next``.
    for tenant in env.tenants:
        log = env.sim.log(tenant.id)
        halves = log[: len(log) // 2], log[len(log) // 2 :]
        assert [e.query for e in halves[0]] == [e.query for e in halves[1]]
        assert [e.query.get("limit") for e in halves[1]] == ["3"] * 4


async def test_an_update_is_one_event_polled_from_the_resume_token(env: Env) -> None:
    engine = env.make_engine(declarative(env))
    recorder = env.recorder(engine)
    await engine.tick()
    recorder.take()
    tenant = env.tid(1)
    resume = engine.store.states[f"invoices/{tenant}"].live.cursor  # type: ignore[attr-defined]
    item = env.sim.items(tenant)[4]
    updated = env.sim.update_item(tenant, item["id"], amount=12.5)

    env.clock.advance(30)
    await engine.tick()

    assert [(e.partition, e.subject, e.type, e.version) for e in recorder.events] == [
        (tenant, item["id"], "updated", updated["etag"])
    ]
    assert recorder.events[0].data == updated
    assert isinstance(resume, str)
    assert env.sim.log(tenant)[-1].query == {"cursor": resume, "limit": "50"}


async def test_a_new_tenant_is_polled_and_items_without_id_are_parked(env: Env) -> None:
    engine = env.make_engine(declarative(env))
    recorder = env.recorder(engine)
    await engine.tick()
    recorder.take()
    added = env.sim.add_tenant(items=2)
    env.sim.set_faults(env.tid(0), drop_id=True)
    env.sim.update_item(env.tid(0), env.sim.items(env.tid(0))[0]["id"], amount=3.0)

    env.clock.advance(30)  # the partitions refresh and every tenant's next poll are due
    await engine.tick()

    assert [(e.partition, e.type) for e in recorder.events] == [(added.id, "created")] * 2
    parked = await engine.parked.list("invoices", partition=env.tid(0), kind="invalid")
    assert [p.error for p in parked] == ["identity() raised PathMissing: no value at identity 'id'"]
    assert {i.partition for i in engine.inspect()} == {t.id for t in env.tenants}
