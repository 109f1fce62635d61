"""Transforms in the engine, on the memory store: what subscribers receive when a Python poller
has ``transform=`` (the declarative ``transform:`` key compiles to the same thing)."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from watukuy import Engine, Event, FakeClock, FetchResult, MemoryStore, define_poller

KEY = b"tenant-pii-key"


class Vendor:
    """A vendor whose one listing the test edits between polls."""

    def __init__(self, *items: dict[str, Any]) -> None:
        self.items = [dict(item) for item in items]
        self.cursors: list[Any] = []

    async def fetch(self, ctx: Any) -> FetchResult:
        self.cursors.append(ctx.cursor.value)
        return FetchResult(items=[dict(item) for item in self.items], cursor="end")

    def edit(self, identity: str, **fields: Any) -> None:
        for item in self.items:
            if item["id"] == identity:
                item.update(fields)


async def polled(engine: Engine, clock: FakeClock, events: list[Event]) -> list[tuple[str, ...]]:
    """One due poll; the events it published, as (subject, type)."""
    clock.advance(60)
    before = len(events)
    await engine.tick()
    return [(e.subject, e.type) for e in events[before:]]


def engine_of(
    vendor: Vendor, transform: dict[str, Any], **options: Any
) -> tuple[Engine, FakeClock, list[Event]]:
    poller = define_poller(
        name="issues",
        fetch=vendor.fetch,
        identity=lambda item: item["id"],
        transform=transform,
        schedule={"min": "30s", "max": "30s"},
        **options,
    )
    clock = FakeClock()
    engine = Engine([poller], store=MemoryStore(), clock=clock)
    events: list[Event] = []

    async def keep(event: Event, ctx: Any) -> None:
        events.append(event)

    engine.on("issues", keep)
    return engine, clock, events


async def test_an_item_leaving_the_filter_is_deleted_once_and_created_when_it_is_back() -> None:
    vendor = Vendor({"id": "I1", "status": "open"}, {"id": "I2", "status": "open"})
    engine, clock, events = engine_of(vendor, {"filter": {"path": "status", "equals": "open"}})
    try:
        assert await polled(engine, clock, events) == [("I1", "created"), ("I2", "created")]
        vendor.edit("I1", status="closed")
        assert await polled(engine, clock, events) == [("I1", "deleted")]
        assert await polled(engine, clock, events) == []  # once, not at every poll
        vendor.edit("I1", status="open")
        assert await polled(engine, clock, events) == [("I1", "created")]
        assert events[-1].data == {"id": "I1", "status": "open"}
        assert [e.sequence for e in events] == [1, 2, 3, 4]
    finally:
        await engine.close()


async def test_the_cursor_moves_past_items_the_filter_leaves_out() -> None:
    vendor = Vendor(
        {"id": "I1", "status": "open", "updated": "2024-05-01T10:00:00Z"},
        {"id": "I2", "status": "spam", "updated": "2024-05-02T10:00:00Z"},
    )
    filtered = {"filter": {"path": "status", "equals": "open"}}
    cursor = {"strategy": "timestamp", "field": "updated"}
    engine, clock, events = engine_of(vendor, filtered, cursor=cursor)
    try:
        assert await polled(engine, clock, events) == [("I1", "created")]
        await polled(engine, clock, events)
        assert vendor.cursors[-1] == "2024-05-02T10:00:00Z"  # I2's, though it is not published
    finally:
        await engine.close()


async def test_an_item_the_filter_never_let_through_publishes_nothing() -> None:
    vendor = Vendor({"id": "I1", "status": "spam"})
    engine, clock, events = engine_of(vendor, {"filter": {"path": "status", "equals": "open"}})
    try:
        assert await polled(engine, clock, events) == []
        assert await polled(engine, clock, events) == []
    finally:
        await engine.close()


async def test_a_dropped_volatile_field_stops_empty_updates() -> None:
    vendor = Vendor({"id": "I1", "title": "t", "fetched_at": 1})
    plain, plain_clock, plain_events = engine_of(vendor, {})
    engine, clock, events = engine_of(vendor, {"drop": ["fetched_at"]})
    try:
        assert await polled(engine, clock, events) == [("I1", "created")]
        assert await polled(plain, plain_clock, plain_events) == [("I1", "created")]
        vendor.edit("I1", fetched_at=2)
        assert await polled(engine, clock, events) == []
        # Without the drop, the same vendor change is an update nobody wanted.
        assert await polled(plain, plain_clock, plain_events) == [("I1", "updated")]
        vendor.edit("I1", title="new")
        assert await polled(engine, clock, events) == [("I1", "updated")]
        assert events[-1].data == {"id": "I1", "title": "new"}
    finally:
        await engine.close()
        await plain.close()


async def test_published_events_carry_the_masked_item_and_the_vendors_version() -> None:
    vendor = Vendor({"id": "I1", "email": "ada@example.com", "rev": "r1"})
    transform = {"mask": {"email": {"hmac": KEY}}, "set": {"tenant": "{partition.key}"}}
    engine, clock, events = engine_of(vendor, transform, version=lambda item: item["rev"])
    try:
        await polled(engine, clock, events)
        (event,) = events
        expected = hmac.new(KEY, b"ada@example.com", hashlib.sha256).hexdigest()
        assert event.data == {"id": "I1", "email": expected, "rev": "r1", "tenant": ""}
        assert event.version == "r1"
        assert "ada@example.com" not in repr(event)
    finally:
        await engine.close()


class RawVendor(Vendor):
    """Hands its items over as they are, objects or not."""

    def __init__(self, *items: Any) -> None:
        super().__init__()
        self.items = list(items)

    async def fetch(self, ctx: Any) -> FetchResult:
        return FetchResult(items=list(self.items), cursor="end")


async def test_a_parked_item_holds_what_would_be_published_never_the_vendors_item() -> None:
    # Parked items reach Kafka too (the state topic, the DLQ): a transform's mask and drop
    # must hold there as on the events topic.
    vendor = RawVendor(
        {"id": "I1", "email": "ada@example.com", "note": "internal"},
        {"email": "bob@example.com", "note": "internal too"},  # no identity
        ["not", "an", "object", "grace@example.com"],  # cannot be transformed
    )
    transform = {"drop": ["note"], "mask": {"email": {"hmac": KEY}}}
    engine, clock, events = engine_of(vendor, transform)
    try:
        await polled(engine, clock, events)
        assert len(events) == 1
        parked = sorted(await engine.parked.list("issues"), key=lambda p: p.error)
        masked = hmac.new(KEY, b"bob@example.com", hashlib.sha256).hexdigest()
        assert [p.item for p in parked] == [
            {"transformed": True, "item": {"email": masked}},
            {
                "transformed": True,
                "item": None,
                "original_sha256": parked[1].item["original_sha256"],
            },
        ]
        assert parked[0].error.startswith("KeyError")
        assert parked[1].error == "transform: the item must be a JSON object, got a list"
        assert len(parked[1].item["original_sha256"]) == 64
        for secret in ("bob@example.com", "grace@example.com", "internal"):
            assert secret not in repr(parked)

        ids = [p.id for p in parked]
        assert await engine.parked.retry("issues", ids) == []  # no vendor's item to retry
        again = await engine.parked.list("issues")
        assert {p.error for p in again} == {
            "parked as its poller publishes it (the vendor's item is not kept): it cannot be "
            "retried from here; replay the partition from before it to fetch it again"
        }
        await polled(engine, clock, events)  # polled again: parked once, not once a poll
        assert len(await engine.parked.list("issues")) == 2
    finally:
        await engine.close()
