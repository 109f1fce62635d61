"""The scrape's text, byte for byte as prometheus_client writes it (tests/observe/reference.py).

The observer writes its per-key families itself (observe/exposition, keylines, series), from
the engine's figures (core/figures) rather than ``inspect()``, and keeps text between scrapes.
Here a real engine runs pollers of every kind (partitioned, a connector's stream, one without
partitions) over a scripted vendor, with keys whose partitions need escaping, a circuit open,
one half-open, parked items of both kinds, a key waiting for a newer release, a lag past the
point where Go writes an exponent, keys that come and go; every family has data. After each
round the scrape of both ``partition_label`` settings must equal the reference's bytes.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from tests.observe.reference import reference_scrape
from watukuy import Engine, FakeClock, MemoryStore, define_poller
from watukuy.core.circuit import Circuit, CircuitState
from watukuy.core.observe import OutcomeKind, StateFigures
from watukuy.core.poll import fresh_state
from watukuy.core.poller import Poller, StreamOf
from watukuy.core.state import ParkedItem
from watukuy.http import HttpClient
from watukuy.http.scripted import ScriptedTransport, reply
from watukuy.http.transport import Request
from watukuy.observe.exposition import forms, number, prefix
from watukuy.observe.metrics import PrometheusObserver
from watukuy.observe.series import KeyCounter
from watukuy.store.base import NewerRelease, StoredKey

pytestmark = pytest.mark.unit

START = 1_800_000_000.0
TENANTS = [
    "t-1",
    "t-2",
    'q"uote',
    "back\\slash",
    "new\nline",
    'all\\"three\n',
    "café ü",
    "a/b",
    "fails",
    "parks",
    "leaves",
    "newer",
    "probe",
    "poisoned",
]
STATE = StateFigures(snapshot_keys=3, snapshot_entries=9, disk_bytes=4096, standby_lag=math.nan)


class UpgradedStore(MemoryStore):
    """Holds a key a newer release wrote: it waits on this instance."""

    async def load(self, poller: str, partition: str, *, snapshot: bool = True) -> StoredKey | None:
        if (poller, partition) == ("invoices", "newer"):
            raise NewerRelease("format_version 2 is newer than 1")
        return await super().load(poller, partition, snapshot=snapshot)


FAILING = {"fails"}


def vendor(request: Request) -> Any:
    tenant = request.url.query.get("tenant")
    if tenant in FAILING:
        return reply(500)
    if request.headers.get("If-None-Match") == '"v1"':
        return reply(304)
    items = [{"id": f"{tenant}-1", "etag": "1"}, {"id": f"{tenant}-2", "etag": "1"}]
    return reply(200, json={"data": items}, headers={"ETag": '"v1"'})


async def fetch(ctx: Any) -> dict[str, Any]:
    response = await ctx.http.get("https://api.test/items", query={"tenant": ctx.partition.key})
    items = (await response.json())["data"]
    if ctx.partition.key == "parks":
        items = [*items, {"etag": "no id: its identity cannot be read"}]
    return {"items": items, "cursor": None, "has_more": False}


def pollers(listed: list[str]) -> list[Poller]:
    common: dict[str, Any] = {
        "fetch": fetch,
        "identity": lambda item: item["id"],
        "version": lambda item: item["etag"],
        "cursor": {"strategy": "none"},
        "schedule": {"min": "30s", "max": "30s"},
        "partitions_refresh": "60s",
    }
    invoices = define_poller(
        name="invoices",
        partitions=lambda: [{"key": key, "data": {}} for key in listed],
        circuit={"failure_threshold": 1, "cooldown": "600s"},
        budget="vendor",
        **common,
    )
    issues = dataclasses.replace(
        define_poller(
            name="tracker.issues",
            partitions=lambda: [{"key": key, "data": {}} for key in ("acme/P1", "acme/P2")],
            **common,
        ),
        stream_of=StreamOf("tracker", "issues"),
    )
    return [invoices, issues, define_poller(name="status", **common)]


def seeded(store: MemoryStore, invoices: Poller) -> None:
    """A key restored half-open, one with a poison and an invalid item parked whose last
    success was 23 days ago (a lag Go writes with an exponent); neither is due for an hour."""
    for partition, circuit, success in [
        ("probe", Circuit(CircuitState.HALF_OPEN, 3, START - 100, 30.0), START - 500.25),
        ("poisoned", Circuit(), START - 2_000_000.5),
    ]:
        state = fresh_state(invoices, partition, START)
        schedule = dataclasses.replace(state.schedule, next_due=START + 3600)
        store.states[state.key] = dataclasses.replace(
            state, circuit=circuit, last_success=success, schedule=schedule
        )
    for number_, kind in enumerate(("poison", "poison", "invalid")):
        item = ParkedItem(f"e{number_}", "invoices", "poisoned", kind, {}, "boom", 3, START)
        store.parked["invoices/poisoned"][item.id] = item


def store_hooks(observer: PrometheusObserver) -> None:
    """What only the Kafka store reports."""
    observer.transaction_done(True, 0.05, 12, None)
    observer.transaction_done(False, 0.5, 3, OutcomeKind.FENCED)
    observer.leases_gained((0, 1, 2))
    observer.restore_done(0, 5, 40, 0.3)
    observer.restore_done(1, 0, 0, 0.1)
    observer.leases_lost((1,), lost=False)
    observer.transactions_hanging("w.events.invoices", (4, 7))
    observer.dlq_written("invoices", "parks", 1)
    observer.state_caught_up("invoices", 'q"uote', 3)


def same(observer: PrometheusObserver, engine: Engine) -> None:
    written = observer.render()[0]
    expected = reference_scrape(observer, engine.inspect, lambda: STATE)
    assert written.decode() == expected.decode()  # a readable diff if not
    assert written == expected


async def test_a_scrape_is_byte_for_byte_what_prometheus_client_writes() -> None:
    FAILING.add("fails")
    listed = list(TENANTS)
    clock = FakeClock(START)
    transport = ScriptedTransport()
    transport.add("GET", "https://api.test/items", handler=vendor)
    made = pollers(listed)
    store = UpgradedStore()
    seeded(store, made[0])
    by_key = PrometheusObserver(partition_label=True, process=False)
    by_poller = PrometheusObserver(partition_label=False, process=False)
    engine = Engine(
        made,
        store=store,
        clock=clock,
        http=HttpClient(transport=transport),
        budgets={"vendor": {"rate": "100/s", "burst": 100}},
        observers=[by_key, by_poller],
    )
    observers = (by_key, by_poller)
    for observer in observers:
        observer.watch(engine.figures.table, lambda: engine.pollers)
        observer.watch_state(lambda: STATE)
        same(observer, engine)  # nothing held yet
    async with engine:
        await engine.tick()
        for observer in observers:
            store_hooks(observer)
            same(observer, engine)
        shown = {(i.poller, i.partition): i for i in engine.inspect()}
        assert shown["invoices", "fails"].circuit == "open"
        assert shown["invoices", "probe"].circuit == "half-open"
        assert shown["invoices", "parks"].parked == {"invalid": 1, "poison": 0}
        assert shown["invoices", "poisoned"].parked == {"invalid": 1, "poison": 2}
        assert shown["invoices", "newer"].waiting_newer

        clock.advance(3.5)  # only the time moves: every lag, nothing else
        for observer in observers:
            same(observer, engine)

        listed.remove("leaves")  # its series go; a new tenant comes in the middle
        listed.insert(2, "m-new")
        clock.advance(61)  # the listing is due again, and every key
        await engine.tick()
        for observer in observers:
            same(observer, engine)

        clock.advance(4000)  # the open circuit probes and fails; the half-open one closes
        await engine.tick()
        shown = {(i.partition, i.circuit, i.lag is None) for i in engine.inspect()}
        assert {("fails", "open", True), ("probe", "closed", False)} <= shown
        for observer in observers:
            same(observer, engine)

        FAILING.clear()  # its next probe succeeds: closed, and its first lag
        clock.advance(4000)
        await engine.tick()
        shown = {(i.partition, i.circuit, i.lag is None) for i in engine.inspect()}
        assert ("fails", "closed", False) in shown
        for observer in observers:
            same(observer, engine)


async def test_the_keys_states_before_any_engine_is_watched_are_their_headers() -> None:
    for partition_label in (True, False):
        observer = PrometheusObserver(partition_label=partition_label, process=False)
        assert observer.render()[0] == reference_scrape(observer, None)


# -- the pieces, for any value -----------------------------------------------------------------


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_numbers_are_written_as_prometheus_client_writes_them(value: float) -> None:
    assert number(value) == floatToGoString(value)


class _One(Collector):
    def __init__(self, labels: dict[str, str]) -> None:
        self._labels = labels

    def collect(self) -> Any:
        family = GaugeMetricFamily("demo_value", "Help.", labels=list(self._labels))
        family.add_metric(list(self._labels.values()), 1.5)
        yield family


@given(
    st.dictionaries(
        st.sampled_from(["poller", "partition", "kind", "le", "state", "a_b", "zz"]),
        st.text(),
        min_size=1,
    )
)
def test_label_text_is_written_as_prometheus_client_writes_it(labels: dict[str, str]) -> None:
    written = generate_latest(_One(labels)).decode().split("\n")[2]  # after HELP and TYPE
    assert f"{prefix('demo_value', labels)}1.5" == written
    for hole, value in labels.items():
        before, after = forms("demo_value", labels, hole)
        escaped = value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
        assert f"{before}{escaped}{after}1.5" == written


class _Counter(Collector):
    """A counter family as prometheus_client writes it, from ``{labels: value}``."""

    def __init__(self, names: list[str], series: dict[tuple[str, ...], float]) -> None:
        self._names, self._series = names, series

    def collect(self) -> Any:
        family = CounterMetricFamily("demo_polls", "Polls.", labels=self._names)
        for labels, value in self._series.items():
            family.add_metric(list(labels), value)
        yield family


@given(
    st.dictionaries(
        st.tuples(st.sampled_from(["a", "b%s", 'c"\\']), st.text(), st.sampled_from(["ok", "x"])),
        st.one_of(
            st.floats(min_value=0.0, allow_infinity=True),
            st.just(math.nan),
            st.integers(min_value=0, max_value=10**9).map(float),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_a_key_counters_lines_are_what_prometheus_client_writes(
    series: dict[tuple[str, str, str], float],
) -> None:
    # Any partition text (quotes, backslashes, newlines, '%'), any poller name, numbers past
    # 1e6 (Go's exponent) and NaN: each owner's lines are one %-format of a shared template.
    counter = KeyCounter("demo_polls", "Polls.", ["poller", "partition", "outcome"])
    for (poller, partition, outcome), value in series.items():
        counter.inc((poller, partition), (outcome,), value)
    out: list[bytes] = []
    counter.render(out)
    by_owner: dict[tuple[str, str], dict[tuple[str, ...], float]] = {}
    for (poller, partition, outcome), value in series.items():
        by_owner.setdefault((poller, partition), {})[(poller, partition, outcome)] = value
    in_order = {labels: v for owner in by_owner.values() for labels, v in owner.items()}
    assert b"".join(out) == generate_latest(_Counter(["poller", "partition", "outcome"], in_order))
