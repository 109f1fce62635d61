"""Real APIs' answers (issue 43): one object per answer (``record``), wrapped records
(``records: "list[*].customer"``, an element without it parked with the reason) and items
identified by several fields, run by the engine on the memory store."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.declarative.helpers import API, Driver, compile_spec, spec
from watukuy import Engine, FakeClock, MemoryStore, Poller
from watukuy.core.errors import ConfigError
from watukuy.declarative.errors import BadBody
from watukuy.http import HttpClient, ScriptedTransport, reply
from watukuy.options.flat import flatten, unflatten


async def run_once(poller: Poller, url: str, *answers: Any) -> tuple[list[Any], Engine]:
    transport, clock = ScriptedTransport(), FakeClock()
    transport.add("GET", url, *[reply(json=answer) for answer in answers])
    engine = Engine(
        [poller], store=MemoryStore(), clock=clock, http=HttpClient(transport=transport)
    )
    seen: list[Any] = []

    async def record(event: Any, ctx: Any) -> None:
        seen.append(event)

    engine.on(poller.name, record)
    await engine.__aenter__()
    await engine.tick()
    return seen, engine


async def test_one_object_is_the_pages_one_item() -> None:
    poller = compile_spec(spec(request={"url": f"{API}/users/me"}, records=None, record="user"))
    seen, engine = await run_once(poller, f"{API}/users/me", {"user": {"id": "u1", "name": "Ada"}})
    try:
        assert [(e.subject, e.type, e.data["name"]) for e in seen] == [("u1", "created", "Ada")]
    finally:
        await engine.close()


async def test_a_null_or_absent_record_is_no_item_and_a_list_is_a_bad_body() -> None:
    driver = Driver(compile_spec(spec(records=None, record="user")))
    driver.transport.add("GET", f"{API}/items", reply(json={"user": None}), reply(json={}))
    assert await driver.poll() == [] and await driver.poll() == []
    driver.transport.add("GET", f"{API}/items", reply(json={"user": [{"id": 1}]}))
    with pytest.raises(BadBody, match="record at 'user' is a list"):
        await driver.poll()


async def test_wrapped_records_are_unwrapped_and_an_element_without_its_object_is_parked() -> None:
    poller = compile_spec(spec(records="list[*].customer"))
    body = {
        "list": [
            {"customer": {"id": "c1"}},
            {"invoice": {"id": "i9", "email": "ada@example.com"}},  # no customer in it
            {"customer": {"id": "c2"}},
        ]
    }
    seen, engine = await run_once(poller, f"{API}/items", body)
    try:
        assert sorted(e.subject for e in seen) == ["c1", "c2"]
        (parked,) = await engine.parked.list("tickets", kind="invalid")
        assert parked.item == {"invoice": {"id": "i9", "email": "ada@example.com"}}
        assert parked.error == "records 'list[*].customer': element 1 has no 'customer'"
    finally:
        await engine.close()


async def test_wrapped_records_with_a_filter_park_the_element_before_the_filter_sees_it() -> None:
    transform = {"filter": {"path": "status", "equals": "active"}}
    poller = compile_spec(spec(records="list[*].customer", transform=transform))
    body = {"list": [{"customer": {"id": "c1", "status": "active"}}, {"other": 1}]}
    seen, engine = await run_once(poller, f"{API}/items", body)
    try:
        assert [e.subject for e in seen] == ["c1"]
        assert len(await engine.parked.list("tickets", kind="invalid")) == 1
    finally:
        await engine.close()


async def test_items_identified_by_several_fields_get_one_stable_identity() -> None:
    poller = compile_spec(spec(identity=["actor.id", "created_at"], version=None))
    rows = [
        {"actor": {"id": "u1"}, "created_at": "2026-12-01T10:00:00Z", "action": "login"},
        {"actor": {"id": "u1"}, "created_at": "2026-12-01T10:05:00Z", "action": "logout"},
        {"actor": {"id": "u2"}, "created_at": "2026-12-01T10:00:00Z", "action": "login"},
    ]
    seen, engine = await run_once(poller, f"{API}/items", {"data": rows})
    try:
        assert [e.subject for e in seen] == [
            json.dumps(["u1", "2026-12-01T10:00:00Z"], separators=(",", ":")),
            json.dumps(["u1", "2026-12-01T10:05:00Z"], separators=(",", ":")),
            json.dumps(["u2", "2026-12-01T10:00:00Z"], separators=(",", ":")),
        ]
    finally:
        await engine.close()


@pytest.mark.parametrize(
    ("overrides", "path", "says"),
    [
        ({"record": "user"}, "pollers[0].record", "not both"),
        ({"records": "a[*].b[*]"}, "pollers[0].records", "at most one"),
        ({"identity": "a[*].id"}, "pollers[0].identity", "records only"),
        ({"identity": ["id"]}, "pollers[0].identity", "two or more"),
        ({"identity": ["id", "a..b"]}, "pollers[0].identity[1]", "invalid path"),
    ],
)
def test_a_shape_mistake_names_its_field(overrides: dict[str, Any], path: str, says: str) -> None:
    with pytest.raises(ConfigError) as raised:
        compile_spec(spec(**overrides))
    assert raised.value.path == path
    assert says in str(raised.value)


@pytest.mark.parametrize(
    "nested",
    [
        spec(records=None, record="user"),
        spec(records="list[*].customer", identity=["actor.id", "created_at"]),
        spec(identity='["@odata.id"]'),
    ],
)
def test_the_new_keys_round_trip_through_connects_flat_form(nested: dict[str, Any]) -> None:
    flat = flatten(nested, "http")
    assert all(isinstance(value, str) for value in flat.values())
    assert unflatten(flat) == ("http", nested)
