"""``cursor.timestamp`` as vendors define incremental reads (issue 44): windows in epoch seconds
from a tenant's start date, a maximum span stepped oldest first, a window's end fixed while its
listing goes on, a failed window read again, and items on a window's edge published once.

The vendor here answers like Stripe's list endpoints: ``created[gte]`` and ``created[lt]`` in
epoch seconds (https://docs.stripe.com/api/pagination and the ``created`` filter of each list
endpoint), or with an inclusive end when ``inclusive`` is set, as some vendors' ``end_time``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.declarative.helpers import API, Driver, compile_spec, query_of, spec
from watukuy import Engine, FakeClock, MemoryStore, Partition, Poller
from watukuy.core.errors import ConfigError
from watukuy.http import HttpClient, Request, ScriptedTransport, VendorError, reply

CHARGES = f"{API}/v1/charges"
DAY = 86_400
NOW = 1_800_000_000  # FakeClock's start: 2027-01-15T08:00:00Z


def epoch(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


@dataclass
class Vendor:
    """Items with an epoch ``created``; a window's start is ``>=``, its end ``<`` (or ``<=``
    with ``inclusive``); two items a page, the next page by a token."""

    items: list[dict[str, Any]] = field(default_factory=list)
    inclusive: bool = False
    fail_from: int | None = None  # answer 500 to a window that starts here
    windows: list[tuple[int | None, int | None]] = field(default_factory=list)

    def __call__(self, request: Request) -> Any:
        query = query_of(request)
        start = int(query["created[gte]"]) if "created[gte]" in query else None
        end = int(query["created[lt]"]) if "created[lt]" in query else None
        if "page" not in query:
            self.windows.append((start, end))
        if self.fail_from is not None and start == self.fail_from:
            return reply(500, json={"error": "try again"})
        found = [
            item
            for item in sorted(self.items, key=lambda i: (i["created"], i["id"]))
            if (start is None or item["created"] >= start)
            and (
                end is None or item["created"] < end or (self.inclusive and item["created"] == end)
            )
        ]
        at = int(query.get("page", "0"))
        page = found[at : at + 2]
        more = at + 2 < len(found)
        return reply(json={"data": page, "has_more": more, "next": str(at + 2) if more else None})


def charges(**timestamp: Any) -> Poller:
    cursor = {
        "field": "created",
        "field_format": "epoch",
        "param": "created[gte]",
        "end_param": "created[lt]",
        "format": "epoch",
        **timestamp,
    }
    return compile_spec(
        spec(
            partitions={"static": [{"key": "acme", "data": {"start_date": "2027-01-01"}}]},
            request={"url": CHARGES},
            version="rev",
            paginate={"next_token": {"path": "next", "param": "page"}},
            cursor={"timestamp": {k: v for k, v in cursor.items() if v is not None}},
            schedule={"min": "1m", "max": "1m"},
        )
    )


def driver(poller: Poller, vendor: Vendor) -> Driver:
    found = Driver(poller, partition=Partition(key="acme", data={"start_date": "2027-01-01"}))
    found.transport.add("GET", CHARGES, handler=vendor)
    return found


async def test_a_stepped_backfill_reads_each_window_from_the_tenants_start_date_once() -> None:
    vendor = Vendor(
        [
            {"id": f"ch_{d}", "rev": 1, "created": epoch(f"2027-01-{d:02}T12:00:00")}
            for d in (2, 9, 14)
        ]
    )
    run = driver(charges(step="7d", start="{partition.data.start_date}"), vendor)
    found = await run.poll()
    assert [item["id"] for item in found] == ["ch_2", "ch_9", "ch_14"]
    start = epoch("2027-01-01T00:00:00")
    assert vendor.windows == [
        (start, start + 7 * DAY),
        (start + 7 * DAY, start + 14 * DAY),
        (start + 14 * DAY, NOW),
    ]
    # every window's last page hands the engine its end to commit, the last one with no more
    assert [(page.cursor, page.has_more) for page in run.pages] == [
        ("2027-01-08T00:00:00Z", True),
        ("2027-01-15T00:00:00Z", True),
        ("2027-01-15T08:00:00Z", False),
    ]
    run.clock.advance(60)
    await run.poll()
    assert vendor.windows[-1] == (NOW, NOW + 60)  # the next poll starts where the last ended


async def test_a_window_the_vendor_fails_is_read_again_never_skipped() -> None:
    start = epoch("2027-01-01T00:00:00")
    vendor = Vendor(
        [{"id": "ch_9", "rev": 1, "created": epoch("2027-01-09T00:00:00")}],
        fail_from=start + 7 * DAY,
    )
    run = driver(charges(step="7d", start="2027-01-01"), vendor)
    with pytest.raises(VendorError):
        await run.poll()
    assert run.cursor == "2027-01-08T00:00:00Z"  # the first window committed, not the second
    vendor.fail_from = None
    assert [item["id"] for item in await run.poll()] == ["ch_9"]
    assert vendor.windows[1:] == [(start + 7 * DAY, start + 14 * DAY)] * 2 + [
        (start + 14 * DAY, NOW)
    ]


async def test_a_listing_cut_in_the_middle_of_a_window_goes_on_in_the_same_window() -> None:
    vendor = Vendor([{"id": f"ch_{i}", "rev": 1, "created": NOW - 600 + i} for i in range(5)])
    run = driver(charges(start="1h"), vendor)
    first = await run.page()  # then the runner stops: the stored cursor is all that is kept
    assert first.has_more
    later = driver(run.poller, vendor)
    later.cursor = run.cursor
    later.clock.advance(300)
    rest = await later.poll()
    assert [item["id"] for item in first.items + rest] == [f"ch_{i}" for i in range(5)]
    ends = {
        query_of(r).get("created[lt]") for r in run.transport.requests + later.transport.requests
    }
    assert ends == {str(NOW)}  # the window's end was fixed at its first page
    assert later.cursor == "2027-01-15T08:00:00Z"


async def test_a_window_not_open_yet_asks_nothing() -> None:
    vendor = Vendor()
    run = driver(charges(end="now-10m"), vendor)
    run.cursor = "2027-01-15T07:55:00Z"  # past now-10m: the vendor's recent writes settle late
    assert await run.poll() == []
    assert run.transport.requests == [] and run.cursor == "2027-01-15T07:55:00Z"
    run.clock.advance(600)
    await run.poll()
    assert vendor.windows == [(epoch("2027-01-15T07:55:00"), NOW)]


async def test_templates_carry_the_window_in_its_format_and_the_body_takes_numbers() -> None:
    poller = compile_spec(
        spec(
            request={
                "url": f"{API}/search",
                "method": "POST",
                "query": {"filter": "greater-than(updated,{cursor.start})"},
                "headers": {"X-Until": "{cursor.end}"},
                "body": {"query": {"kind": "issue"}},
            },
            cursor={
                "timestamp": {
                    "field": "updated",
                    "body": "query.updated.gte",
                    "end_body": "query.updated.lt",
                    "format": "%Y%m%d",
                    "start": "2027-01-10",
                }
            },
        )
    )
    run = Driver(poller)
    run.transport.add("POST", f"{API}/search", json={"data": []})
    await run.poll()
    sent = run.transport.requests[0]
    assert json.loads(sent.body or b"") == {
        "query": {"kind": "issue", "updated": {"gte": "20270110", "lt": "20270115"}}
    }
    assert query_of(sent) == {"filter": "greater-than(updated,20270110)"}
    assert sent.headers["X-Until"] == "20270115"


async def test_an_item_time_the_declared_format_cannot_read_is_parked_with_the_field() -> None:
    transport, clock = ScriptedTransport(), FakeClock()
    transport.add(
        "GET",
        CHARGES,
        json={
            "data": [
                {"id": "a", "rev": 1, "created": "yesterday"},
                {"id": "b", "rev": 1, "created": NOW - 5},
            ]
        },
    )
    engine = Engine(
        [charges()], store=MemoryStore(), clock=clock, http=HttpClient(transport=transport)
    )
    seen: list[Any] = []

    async def record(event: Any, ctx: Any) -> None:
        seen.append(event.subject)

    engine.on("tickets", record)
    try:
        await engine.tick()
        parked = await engine.parked.list("tickets", partition="acme", kind="invalid")
        store = engine.store
        assert isinstance(store, MemoryStore)
        state = store.states["tickets/acme"]
    finally:
        await engine.close()
    assert seen == ["b"]
    [item] = parked
    assert item.item == {"id": "a", "rev": 1, "created": "yesterday"}
    assert "'created'" in item.error and "epoch" in item.error
    assert state.live.cursor == "2027-01-15T08:00:00Z"


@pytest.mark.parametrize("lookback", [None, "1h"])
@pytest.mark.parametrize("inclusive", [False, True])
async def test_items_on_a_windows_edge_are_published_once(lookback: Any, inclusive: bool) -> None:
    start = epoch("2027-01-01T00:00:00")
    edges = [start + k * DAY for k in range(15)]
    items = [{"id": f"e{k}", "rev": 1, "created": at} for k, at in enumerate(edges)]
    items += [{"id": f"m{k}", "rev": 1, "created": at + DAY // 2} for k, at in enumerate(edges)]
    vendor = Vendor(items, inclusive=inclusive)
    transport, clock = ScriptedTransport(), FakeClock()
    transport.add("GET", CHARGES, handler=vendor)
    engine = Engine(
        [charges(step="1d", start="2027-01-01", lookback=lookback)],
        store=MemoryStore(),
        clock=clock,
        http=HttpClient(transport=transport),
    )
    created: list[str] = []

    async def record(event: Any, ctx: Any) -> None:
        assert event.type == "created", event
        created.append(event.subject)

    engine.on("tickets", record)
    try:
        for _ in range(30):  # polls until the backfill reaches now
            await engine.tick()
            clock.advance(60)
    finally:
        await engine.close()
    wanted = {item["id"] for item in items if item["created"] < NOW}
    assert sorted(created) == sorted(wanted)  # each once: none lost, none twice
    assert len(vendor.windows) > 15


@pytest.mark.parametrize(
    ("timestamp", "path", "words"),
    [
        ({"field_format": "epochs"}, "field_format", "strftime pattern"),
        ({"format": 5}, "format", "iso, epoch"),
        ({"end": "later"}, "end", "now or now-DURATION"),
        ({"end": "now-soon"}, "end", ""),
        ({"start": "last tuesday"}, "start", "ISO-8601 date or a duration"),
        ({"step": "0s"}, "step", ""),
        ({"end_param": None, "step": "1d"}, "step", "end_param"),
        ({"param": "a", "body": "b"}, "timestamp", "exactly one of: param, body"),
        ({"start": "{partition.data.start_date"}, "start", "template"),
    ],
)
def test_a_mistake_in_a_time_window_names_its_key(
    timestamp: dict[str, Any], path: str, words: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        charges(**timestamp)
    assert caught.value.path == f"pollers[0].cursor.timestamp.{path}".removesuffix(".timestamp")
    assert words in str(caught.value)


def test_a_window_in_the_body_needs_a_post_and_cursor_ends_need_a_timestamp_cursor() -> None:
    with pytest.raises(ConfigError) as caught:
        compile_spec(spec(cursor={"timestamp": {"field": "t", "body": "q.gte"}}))
    assert caught.value.path == "pollers[0].request.method"
    with pytest.raises(ConfigError) as caught:
        compile_spec(
            spec(
                request={"url": f"{API}/x", "query": {"to": "{cursor.end}", "c": "{cursor}"}},
                cursor={"token": {"path": "next"}},
            )
        )
    assert caught.value.path == "pollers[0].request.query.to"
    assert "needs a timestamp cursor" in str(caught.value)


async def test_a_start_date_the_key_cannot_read_fails_it_naming_the_template_not_the_value() -> (
    None
):
    poller = charges(start="{partition.data.start_date}")
    run = Driver(poller, partition=Partition(key="acme", data={"start_date": "01/02/2027 secret"}))
    run.transport.add("GET", CHARGES, handler=Vendor())
    with pytest.raises(Exception) as caught:
        await run.poll()
    message = str(caught.value)
    assert "cursor.timestamp.start" in message and "{partition.data.start_date}" in message
    assert "epoch" in message and "secret" not in message
    assert run.transport.requests == []


async def test_a_window_within_one_epoch_second_waits_to_grow_instead_of_asking_x_to_x() -> None:
    vendor = Vendor()
    run = driver(charges(), vendor)
    run.cursor = "2027-01-15T07:59:59.700000Z"
    run.clock.advance(0.2)  # now is 08:00:00.2: the window [07:59:59.7, 08:00:00.2) is asked
    await run.poll()
    run.clock.advance(0.5)  # [08:00:00.2, 08:00:00.7) would be [1800000000, 1800000000)
    await run.poll()
    assert vendor.windows == [(NOW - 1, NOW)]
    assert run.cursor == "2027-01-15T08:00:00.200000Z"
    run.clock.advance(1)
    await run.poll()
    assert vendor.windows[-1] == (NOW, NOW + 1)
