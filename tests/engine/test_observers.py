"""Observers on the engine: every hook fires with the right outcome kind against the vendor
simulator (200, 304, 429, 500, timeout, malformed JSON, a schema-invalid item), keys gained
and released; Prometheus series of a tenant that leaves go; a running backfill's progress shows
in ``inspect().lanes``."""

from __future__ import annotations

from collections import Counter
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.engine.support import INVOICE_SCHEMA, Env
from watukuy.control.keystatus import key_status
from watukuy.core.observe import Observer, OutcomeKind
from watukuy.observe.metrics import PrometheusObserver


class Probe(Observer):
    """Keeps every call: ``(hook, args)``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("_") or name in ("calls", "of", "polls"):
            return object.__getattribute__(self, name)

        def record(*args: Any) -> None:
            self.calls.append((name, args))

        return record

    def of(self, hook: str, partition: str | None = None) -> list[tuple[Any, ...]]:
        """The arguments of each call of ``hook`` (for ``partition``, if given)."""
        return [
            args
            for name, args in self.calls
            if name == hook and (partition is None or partition in args[:3])
        ]

    def polls(self, partition: str) -> list[OutcomeKind]:
        return [args[3] for args in self.of("poll_decided", partition)]


async def test_every_hook_fires_with_the_kind_of_each_outcome(env: Env) -> None:
    probe = Probe()
    poller = env.make_poller(
        schedule={"min": "30s", "max": "30s"},
        circuit={"failure_threshold": 1, "cooldown": "30s"},
        schema=INVOICE_SCHEMA,
        budget="vendor",
        fetch_timeout="300ms",
    )
    engine = env.make_engine(
        poller, budgets={"vendor": {"rate": "100/s", "burst": 100}}, observers=probe
    )
    a, b, c = env.tid(0), env.tid(1), env.tid(2)

    await engine.tick()  # 200: everything is new
    assert sorted(args[1] for args in probe.of("key_gained")) == sorted([a, b, c])
    for tenant in (a, b, c):
        assert probe.polls(tenant) == [OutcomeKind.OK]
        assert probe.of("page_fetched", tenant) == [("invoices", tenant, "live", 10, False)]
        assert probe.of("events_committed", tenant) == [
            ("invoices", tenant, "live", {"created": 10})
        ]
        assert [(s[2], s[3]) for s in probe.of("http_response", tenant)] == [("GET", 200)]
        waits = probe.of("budget_waited", tenant)
        assert [(w[0], w[1], w[3]) for w in waits] == [("vendor", "invoices", "live")]
        assert waits[0][4] >= 0 and 0 <= waits[0][5] < 100

    env.clock.advance(30)
    await engine.tick()  # from the resume cursor: a new URL, nothing new in it
    for tenant in (a, b, c):
        assert probe.polls(tenant)[-1] is OutcomeKind.OK
        assert probe.of("page_fetched", tenant)[-1] == ("invoices", tenant, "live", 0, False)
    env.clock.advance(30)
    await engine.tick()  # 304: the ETag stored for that URL matches
    for tenant in (a, b, c):
        assert probe.polls(tenant)[-1] is OutcomeKind.NOT_MODIFIED
        assert probe.of("page_fetched", tenant)[-1] == ("invoices", tenant, "live", 0, True)
        assert probe.of("http_response", tenant)[-1][3] == 304

    env.sim.set_faults(a, fail_next=1, fail_status=429)
    env.sim.set_faults(b, fail_next=1, fail_status=500)
    env.sim.set_faults(c, malformed_json=True)
    env.clock.advance(30)
    await engine.tick()
    assert probe.polls(a)[-1] is OutcomeKind.RATE_LIMITED
    assert probe.of("http_response", a)[-1][3] == 429
    assert probe.polls(b)[-1] is OutcomeKind.SERVER_ERROR
    assert probe.of("http_response", b)[-1][3] == 500
    assert probe.of("circuit_moved", b) == [("invoices", b, "closed", "open")]
    assert probe.polls(c)[-1] is OutcomeKind.INVALID_BODY
    assert probe.of("http_response", c)[-1][3] == 200  # the status was fine, the body not
    assert engine.inspect()[1].circuit == "open"

    env.sim.set_faults(c)  # healed, but one item now breaks the data schema
    item = env.sim.items(c)[3]
    env.sim.update_item(c, item["id"], amount="not a number")
    env.clock.advance(30)
    await engine.tick()
    assert probe.polls(b)[-1] is OutcomeKind.NOT_MODIFIED  # the probe succeeded
    assert probe.of("circuit_moved", b)[1:] == [
        ("invoices", b, "open", "half-open"),
        ("invoices", b, "half-open", "closed"),
    ]
    assert probe.polls(c)[-1] is OutcomeKind.OK
    assert probe.of("item_parked", c) == [("invoices", c, "invalid", OutcomeKind.SCHEMA_INVALID)]
    assert len(probe.of("events_committed", c)) == 1  # the invalid item made no event

    env.sim.set_faults(c, delay=1.0)  # longer than fetch_timeout
    env.clock.advance(30)
    await engine.tick()
    assert probe.polls(c)[-1] is OutcomeKind.TIMEOUT
    assert probe.of("http_response", c)[-1][3] is None  # no answer came
    assert engine.inspect()[2].last_error is not None  # the text stays as it was

    env.hidden.add(a)  # the tenant churned: the key leaves this engine
    env.clock.advance(300)
    env.sim.set_faults(c)
    await engine.tick()
    assert probe.of("key_released") == [("invoices", a, "paused_removed")]
    kinds = Counter(
        kind for name, args in probe.calls if name == "poll_decided" for kind in [args[3]]
    )
    assert set(kinds) >= {
        OutcomeKind.OK,
        OutcomeKind.NOT_MODIFIED,
        OutcomeKind.RATE_LIMITED,
        OutcomeKind.SERVER_ERROR,
        OutcomeKind.INVALID_BODY,
        OutcomeKind.TIMEOUT,
    }


async def test_an_observer_that_raises_costs_no_poll(env: Env) -> None:
    class Broken(Observer):
        def poll_decided(self, *args: Any) -> None:
            raise RuntimeError("observer bug")

    probe = Probe()
    engine = env.make_engine(env.make_poller(), observers=[Broken(), probe])
    recorder = env.recorder(engine)
    await engine.tick()
    assert len(recorder.events) == 30  # every tenant polled and committed
    assert len(probe.of("poll_decided")) == 3  # the observer after the broken one heard all


def _series(observer: PrometheusObserver, name: str) -> dict[str, float]:
    body = observer.render()[0].decode()
    return {
        sample.labels.get("partition", ""): sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
        if sample.name == name
    }


async def test_prometheus_series_of_a_tenant_that_leaves_are_removed(env: Env) -> None:
    metrics = PrometheusObserver(process=False)
    engine = env.make_engine(env.make_poller(), observers=metrics)
    metrics.watch(engine.figures.table)
    await engine.tick()
    tenants = {env.tid(0), env.tid(1), env.tid(2)}
    assert _series(metrics, "watukuy_events_total") == dict.fromkeys(tenants, 10)
    assert set(_series(metrics, "watukuy_lag_seconds")) == tenants

    env.hidden.add(env.tid(1))
    env.clock.advance(300)
    await engine.tick()
    left = tenants - {env.tid(1)}
    assert _series(metrics, "watukuy_events_total") == dict.fromkeys(left, 10)
    assert set(_series(metrics, "watukuy_polls_total")) == left
    assert set(_series(metrics, "watukuy_lag_seconds")) == left


async def test_a_running_backfill_shows_its_pages_items_and_cursor(env: Env) -> None:
    tenant = env.tenants[0]
    poller = env.make_poller(partitions=None, fetch=env.token_fetch(3, tenant), max_pages=2)
    engine = env.make_engine(poller)
    for _ in range(3):  # the live lane reads the 10 items, 2 pages of 3 a tick
        await engine.tick()
    assert engine.inspect()[0].sequence == 10

    await engine.backfill("invoices", from_=None)
    await engine.tick()  # 2 pages of 3
    entry = engine.inspect()[0]
    assert entry.backfill
    backfill = entry.lanes["backfill"]
    assert isinstance(backfill, dict)
    assert backfill["active"] is True
    assert (backfill["pages"], backfill["items"], backfill["start"]) == (2, 6, None)
    assert backfill["cursor"] is not None
    status = key_status(entry, now=0.0)
    assert status.backfill is not None
    assert (status.backfill.pages, status.backfill.items) == (2, 6)
    assert status.backfill.cursor == backfill["cursor"]

    await engine.tick()  # the last 4 items: done, and the count went with the run
    entry = engine.inspect()[0]
    assert not entry.backfill
    backfill = entry.lanes["backfill"]
    assert isinstance(backfill, dict)
    assert backfill["active"] is False
    assert "pages" not in backfill
