"""Prometheus metrics: an observer of the engine and the Kafka store, served at ``GET /metrics``.

Names follow Prometheus' rules: the ``watukuy_`` prefix, base units (seconds), ``_total``
counters, ``_seconds`` histograms. Per-key series carry ``poller`` and ``partition`` (the
seed's ``watukuy.partition`` attribute); ``partition_label=False`` drops ``partition`` and
aggregates per poller, for pollers with many tenants. Histograms are labelled per poller (or
budget) only: buckets times tenants would be too many series. A series with ``poller`` also
carries ``connector`` and ``stream``: a stream poller's connector and stream (``tracker``,
``issues`` for ``tracker.issues``), a poller's own name and ``""`` for any other, so that
``sum by (connector)`` adds up a connector's streams.

Counters move as the observer hears of things. What is a state rather than an event (lag,
circuit state, parked items, owned keys) is read from ``inspect()`` at each scrape by a
collector, so it is never stale and a key that left is simply not there. A key that waits for
a newer release is counted in ``watukuy_waiting_keys`` only: this instance does not run it.
The counters of a key that leaves this instance (lease lost, removed, stopped) are removed
with it: another instance counts it from now on.

Each observer has its own ``CollectorRegistry`` (not the global one), so two engines in one
process, or tests, do not collide; the process' CPU and memory are on it too.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Generic, TypeVar, overload

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from watukuy.core.inspect import PollerInspect
from watukuy.core.observe import Observer, OutcomeKind, StateFigures, status_class
from watukuy.core.poller import Poller, StreamOf
from watukuy.observe.series import KeyCounter, PollerHistogram
from watukuy.observe.statemetrics import StateCollector

__all__ = ["CIRCUIT_STATES", "PrometheusObserver"]

CIRCUIT_STATES = ("closed", "open", "half-open")

# Seconds: vendor calls from a few ms to the 30 s default timeout; commits of ~100 ms batches.
_REQUEST_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_WAIT_BUCKETS = (0.001, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0)
_COMMIT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_RESTORE_BUCKETS = (0.01, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0)

Inspect = Callable[[], Iterable[PollerInspect]]
Pollers = Callable[[], Mapping[str, Poller]]

POLLER_LABELS = ("poller", "connector", "stream")
"""What names a poller in a series: itself, and the connector and stream it is one of."""
POLLER = "<poller>"
"""In a declaration's labels: :data:`POLLER_LABELS`."""
KEY = "<key>"
"""In a declaration's labels: the key's labels, :data:`POLLER_LABELS` and ``partition`` (or
the poller's alone when the observer drops ``partition``)."""

M = TypeVar("M", Counter, Gauge, Histogram, KeyCounter, PollerHistogram)


Build = Callable[[list[str], CollectorRegistry], M]


class _Declared(Generic[M]):
    """One metric, declared once on the class: its attribute, Prometheus name, help and labels.

    The constructor makes each declared metric on the observer's own registry and keeps it in
    the instance, where it shadows the declaration: reading it costs a plain attribute read.
    """

    def __init__(self, build: Build[M], labels: tuple[str, ...]) -> None:
        self._build: Build[M] = build
        self._labels = labels
        self.attribute = ""

    def __set_name__(self, owner: type, attribute: str) -> None:
        self.attribute = attribute

    def make(self, key: Sequence[str], registry: CollectorRegistry) -> M:
        expand = {KEY: key, POLLER: POLLER_LABELS}
        labels = [label for entry in self._labels for label in expand.get(entry, [entry])]
        made: M = self._build(labels, registry)
        return made

    @overload
    def __get__(self, instance: None, owner: type) -> _Declared[M]: ...
    @overload
    def __get__(self, instance: object, owner: type) -> M: ...
    def __get__(self, instance: object | None, owner: type) -> _Declared[M] | M:
        if instance is None:
            return self
        made: M = instance.__dict__[self.attribute]  # made by the constructor
        return made


def _counter(name: str, documentation: str, *labels: str) -> _Declared[Counter]:
    return _Declared(lambda names, r: Counter(name, documentation, names, registry=r), labels)


def _key_counter(name: str, documentation: str, *labels: str) -> _Declared[KeyCounter]:
    """A counter bumped on every poll (:mod:`.series`): ``name`` without ``_total``."""
    return _Declared(lambda names, r: KeyCounter(name, documentation, names, r), labels)


def _poller_histogram(
    name: str, documentation: str, *labels: str, buckets: tuple[float, ...]
) -> _Declared[PollerHistogram]:
    """A histogram observed on every poll (:mod:`.series`)."""
    return _Declared(
        lambda names, r: PollerHistogram(name, documentation, names, r, buckets=buckets), labels
    )


def _gauge(name: str, documentation: str, *labels: str) -> _Declared[Gauge]:
    return _Declared(lambda names, r: Gauge(name, documentation, names, registry=r), labels)


def _histogram(
    name: str, documentation: str, *labels: str, buckets: tuple[float, ...]
) -> _Declared[Histogram]:
    return _Declared(
        lambda names, r: Histogram(name, documentation, names, buckets=buckets, registry=r),
        labels,
    )


class PrometheusObserver(Observer):
    """Counts what the engine and the Kafka store report; :meth:`render` is the scrape."""

    polls = _key_counter(
        "watukuy_polls", "Page requests decided, by outcome kind.", KEY, "lane", "outcome"
    )
    items = _key_counter("watukuy_items_fetched", "Items in the pages fetched.", KEY, "lane")
    events = _key_counter(
        "watukuy_events", "Events committed, by type and lane.", KEY, "lane", "type"
    )
    http_requests = _key_counter(
        "watukuy_http_requests",
        "HTTP round trips of ctx.http, by status class ('none': no answer came).",
        KEY,
        "method",
        "status_class",
    )
    http_latency = _poller_histogram(
        "watukuy_http_request_duration_seconds",
        "Time of one HTTP round trip.",
        POLLER,
        buckets=_REQUEST_BUCKETS,
    )
    poll_latency = _poller_histogram(
        "watukuy_poll_duration_seconds",
        "Time fetch() took for one page, budget waits and retries included.",
        POLLER,
        buckets=_REQUEST_BUCKETS,
    )
    throttle_waits = _key_counter(
        "watukuy_throttle_waits",
        "Polls the vendor paced (429, or 503 with Retry-After): the key waits.",
        KEY,
    )
    circuit_moves = _key_counter(
        "watukuy_circuit_transitions",
        "Moves of a key's circuit breaker, by the state it moved to.",
        KEY,
        "to",
    )
    parked = _key_counter(
        "watukuy_items_parked",
        "Items or events parked, by kind (invalid, poison) and reason.",
        KEY,
        "kind",
        "reason",
    )
    dlq = _key_counter("watukuy_dlq_records", "Parked items copied to the DLQ topic.", KEY)
    caught_up = _key_counter(
        "watukuy_caught_up_events",
        "Published events a restored key's state had lost (Kafka dropped its transaction's"
        " state records after a broker restart), rolled forward over at restore.",
        KEY,
    )
    budget_wait = _histogram(
        "watukuy_budget_wait_seconds",
        "Time a request waited for a budget token.",
        "budget",
        "lane",
        buckets=_WAIT_BUCKETS,
    )
    budget_waits = _counter("watukuy_budget_waits", "Budget tokens granted.", "budget", "lane")
    budget_tokens = _gauge(
        "watukuy_budget_tokens",
        "Tokens left in this instance's share of the budget, at its last grant.",
        "budget",
    )
    transactions = _counter(
        "watukuy_transactions",
        "Kafka transactions of the store: committed, or aborted (with the kind of error).",
        "result",
        "kind",
    )
    transaction_latency = _histogram(
        "watukuy_transaction_duration_seconds",
        "Time from begin to commit (or abort) of a Kafka transaction.",
        "result",
        buckets=_COMMIT_BUCKETS,
    )
    transaction_records = _counter(
        "watukuy_transaction_records", "Records written in committed transactions."
    )
    rebalances = _counter(
        "watukuy_rebalances",
        "Partitions of <prefix>.state assigned, revoked or lost in rebalances.",
        "change",
    )
    leases = _gauge("watukuy_leases", "Partitions of <prefix>.state this instance holds.")
    restores = _counter("watukuy_restores", "Partitions restored from the state topics.")
    restore_records = _counter(
        "watukuy_restore_records", "Records read while restoring partitions."
    )
    restore_latency = _histogram(
        "watukuy_restore_duration_seconds",
        "Time to restore one partition.",
        buckets=_RESTORE_BUCKETS,
    )
    hanging = _gauge(
        "watukuy_hanging_transactions",
        "Partitions of the topic where a transaction has stayed open longer than any may"
        " (a hanging one: only an administrator's abort ends it), at this instance's last"
        " look.",
        "topic",
    )
    unowned = _gauge(
        "watukuy_unowned_partitions",
        "Kafka partitions of <prefix>.state that no live runner has held (restored or"
        " restoring) for longer than a session timeout: their keys are polled by no one.",
    )

    def __init__(self, *, partition_label: bool = True, process: bool = True) -> None:
        # The ``_created`` series double every counter for what ``process_start_time_seconds``
        # already says; prometheus_client switches them off process-wide only.
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.partition_label = partition_label
        self.registry = CollectorRegistry()
        self._inspect: Inspect | None = None
        self._pollers: Pollers | None = None
        self._names: dict[str, tuple[str, str, str]] = {}
        self._owners: dict[tuple[str, str], tuple[str, ...]] = {}  # see _owner
        # Per key: the labels its series were made under, to remove them when it leaves.
        self._left_behind: dict[tuple[str, str], set[tuple[str, ...]]] = defaultdict(set)
        key = (*POLLER_LABELS, "partition") if partition_label else POLLER_LABELS
        for declared in vars(PrometheusObserver).values():
            if isinstance(declared, _Declared):
                self.__dict__[declared.attribute] = declared.make(key, self.registry)
        self._key_counters = [
            made for made in self.__dict__.values() if isinstance(made, KeyCounter)
        ]
        self._held: set[int] = set()
        self.registry.register(_StateCollector(self))
        if process:
            # process_cpu_seconds_total, process_resident_memory_bytes, ...
            ProcessCollector(registry=self.registry)

    # -- wiring -------------------------------------------------------------------------------

    def watch(self, inspect: Inspect, pollers: Pollers | None = None) -> None:
        """Read key states (lag, circuit, parked, owned keys) from ``inspect`` at each scrape;
        ``pollers`` says which poller is a stream of which connector."""
        self._inspect = inspect
        self._pollers = pollers

    def watch_state(self, figures: Callable[[], StateFigures]) -> None:
        """Read where state lives (snapshot cache, local state store) at each scrape."""
        self.registry.register(StateCollector(figures))

    def render(self) -> tuple[bytes, str]:
        """The scrape: Prometheus' text format and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    def inspected(self) -> list[PollerInspect]:
        return [] if self._inspect is None else list(self._inspect())

    def key_labels(self, poller: str, partition: str) -> tuple[str, ...]:
        named = self.poller_labels(poller)
        return (*named, partition) if self.partition_label else named

    def poller_labels(self, poller: str) -> tuple[str, str, str]:
        """``(poller, connector, stream)``, kept once the poller is known (a name does not
        change what it is; an unknown one is asked again)."""
        known = self._names.get(poller)
        if known is not None:
            return known
        found = None if self._pollers is None else self._pollers().get(poller)
        if found is None:
            return (poller, poller, "")
        stream = found.stream_of
        known = (poller, poller, "") if stream is None else (poller, *_parts(stream))
        self._names[poller] = known
        return known

    def _inc(
        self, metric: KeyCounter, poller: str, partition: str, *more: str, by: float = 1.0
    ) -> None:
        metric.inc(self._owner(poller, partition), more, by)

    def _owner(self, poller: str, partition: str) -> tuple[str, ...]:
        """The labels of a key's series (the poller's alone without ``partition``), kept
        once the poller is known, and the key noted to remove its series when it leaves."""
        owner = self._owners.get((poller, partition))
        if owner is None:
            owner = self.key_labels(poller, partition)
            if self.partition_label:
                self._left_behind[(poller, partition)].add(owner)
            if poller in self._names:  # its labels are final: they may be kept
                self._owners[(poller, partition)] = owner
        return owner

    def _observe(self, metric: PollerHistogram, poller: str, seconds: float) -> None:
        owner = self._names.get(poller) or self.poller_labels(poller)
        metric.observe(owner, seconds)

    # -- the engine ---------------------------------------------------------------------------

    def poll_decided(
        self, poller: str, partition: str, lane: str, kind: OutcomeKind, seconds: float
    ) -> None:
        self._inc(self.polls, poller, partition, lane, kind.value)
        self._observe(self.poll_latency, poller, seconds)
        if kind is OutcomeKind.RATE_LIMITED:
            self._inc(self.throttle_waits, poller, partition)

    def http_response(
        self, poller: str, partition: str, method: str, status: int | None, seconds: float
    ) -> None:
        self._inc(self.http_requests, poller, partition, method, status_class(status))
        self._observe(self.http_latency, poller, seconds)

    def page_fetched(
        self, poller: str, partition: str, lane: str, items: int, not_modified: bool
    ) -> None:
        self._inc(self.items, poller, partition, lane, by=items)

    def events_committed(
        self, poller: str, partition: str, lane: str, counts: Mapping[str, int]
    ) -> None:
        for kind, count in counts.items():
            self._inc(self.events, poller, partition, lane, kind, by=count)

    def item_parked(self, poller: str, partition: str, kind: str, reason: OutcomeKind) -> None:
        self._inc(self.parked, poller, partition, kind, reason.value)

    def circuit_moved(self, poller: str, partition: str, old: str, new: str) -> None:
        self._inc(self.circuit_moves, poller, partition, new)

    def budget_waited(
        self, budget: str, poller: str, partition: str, lane: str, seconds: float, tokens: float
    ) -> None:
        self.budget_wait.labels(budget, lane).observe(seconds)
        self.budget_waits.labels(budget, lane).inc()
        self.budget_tokens.labels(budget).set(tokens)

    def key_released(self, poller: str, partition: str, reason: str) -> None:
        self._owners.pop((poller, partition), None)
        for owner in self._left_behind.pop((poller, partition), ()):
            for counter in self._key_counters:
                counter.remove(owner)

    # -- the Kafka store ----------------------------------------------------------------------

    def transaction_done(
        self, committed: bool, seconds: float, records: int, kind: OutcomeKind | None
    ) -> None:
        result = "committed" if committed else "aborted"
        self.transactions.labels(result, "" if kind is None else kind.value).inc()
        self.transaction_latency.labels(result).observe(seconds)
        if committed:
            self.transaction_records.inc(records)

    def leases_gained(self, kafka_partitions: tuple[int, ...]) -> None:
        self.rebalances.labels("assigned").inc(len(kafka_partitions))

    def leases_lost(self, kafka_partitions: tuple[int, ...], lost: bool) -> None:
        self.rebalances.labels("lost" if lost else "revoked").inc(len(kafka_partitions))
        self._held.difference_update(kafka_partitions)
        self.leases.set(len(self._held))

    def restore_done(self, kafka_partition: int, keys: int, records: int, seconds: float) -> None:
        self.restores.inc()
        self.restore_records.inc(records)
        self.restore_latency.observe(seconds)
        self._held.add(kafka_partition)
        self.leases.set(len(self._held))

    def dlq_written(self, poller: str, partition: str, records: int) -> None:
        self._inc(self.dlq, poller, partition, by=records)

    def state_caught_up(self, poller: str, partition: str, events: int) -> None:
        self._inc(self.caught_up, poller, partition, by=events)

    def transactions_hanging(self, topic: str, kafka_partitions: tuple[int, ...]) -> None:
        self.hanging.labels(topic).set(len(kafka_partitions))

    def partitions_unowned(self, kafka_partitions: tuple[int, ...]) -> None:
        self.unowned.set(len(kafka_partitions))


def _parts(stream: StreamOf) -> tuple[str, str]:
    return stream.connector, stream.stream


class _StateCollector(Collector):
    """Key states from ``inspect()``, read at each scrape: lag, circuit, parked, owned keys."""

    def __init__(self, observer: PrometheusObserver) -> None:
        self._observer = observer

    def describe(self) -> list[Metric]:
        return []  # built per scrape; nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        observer = self._observer
        entries = observer.inspected()
        by_key = observer.partition_label
        key = [*POLLER_LABELS, "partition"] if by_key else list(POLLER_LABELS)
        lag = GaugeMetricFamily(
            "watukuy_lag_seconds",
            "Seconds since the key's last successful poll"
            + ("." if by_key else " (the largest of the poller's keys)."),
            labels=key,
        )
        circuit = GaugeMetricFamily(
            "watukuy_circuit_state",
            "Keys whose circuit breaker is in each state (1 or 0 per key).",
            labels=[*key, "state"],
        )
        parked = GaugeMetricFamily(
            "watukuy_parked_items", "Items parked now, by kind.", labels=[*key, "kind"]
        )
        owned = GaugeMetricFamily(
            "watukuy_owned_keys",
            "Keys of the poller this instance holds.",
            labels=list(POLLER_LABELS),
        )
        waiting = GaugeMetricFamily(
            "watukuy_waiting_keys",
            "Keys of the poller this instance owns but does not run: their stored state was "
            "written by a newer release (status UNASSIGNED).",
            labels=list(POLLER_LABELS),
        )
        lags: dict[tuple[str, ...], float] = {}
        states: dict[tuple[str, ...], int] = defaultdict(int)
        counts: dict[tuple[str, ...], int] = defaultdict(int)
        keys: dict[str, int] = {}
        waits: dict[str, int] = {}
        for entry in entries:
            keys.setdefault(entry.poller, 0)  # 0 held keys when all of them wait
            waits.setdefault(entry.poller, 0)
            if entry.waiting_newer:
                # Not held: its lag, circuit and parked counts are a fresh key's, not its own.
                waits[entry.poller] += 1
                continue
            labels = observer.key_labels(entry.poller, entry.partition)
            keys[entry.poller] += 1
            if entry.lag is not None:
                lags[labels] = max(lags.get(labels, 0.0), entry.lag)
            for state in CIRCUIT_STATES:
                states[(*labels, state)] += int(entry.circuit == state)
            for kind, count in entry.parked.items():
                counts[(*labels, kind)] += count
        for labels_lag in sorted(lags.items()):
            lag.add_metric(list(labels_lag[0]), labels_lag[1])
        for labels, value in sorted(states.items()):
            circuit.add_metric(list(labels), value)
        for labels, value in sorted(counts.items()):
            parked.add_metric(list(labels), value)
        for family, counted in ((owned, keys), (waiting, waits)):
            for poller, count in sorted(counted.items()):
                family.add_metric(list(observer.poller_labels(poller)), count)
        yield from (lag, circuit, parked, owned, waiting)
