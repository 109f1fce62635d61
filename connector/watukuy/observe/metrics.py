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
circuit state, parked items, owned keys) is read from the engine's figures of its held keys
at each scrape (:mod:`watukuy.core.figures`, which the engine keeps as keys change), so it is
never stale and a key that left is simply not there. A key that waits for a newer release is
counted in ``watukuy_waiting_keys`` only: this instance does not run it. The counters of a
key that leaves this instance (lease lost, removed, stopped) are removed with it: another
instance counts it from now on.

The scrape's text is prometheus_client's text format, byte for byte. The families with a
series per key (the per-poll counters, the key states) and the per-poll histograms are
written by this package (:mod:`.exposition`): prometheus_client's ``generate_latest`` made a
scrape of 100,000 keys take 13.5-15.9 s of CPU. The others (budgets, transactions, leases,
the process' own figures) are prometheus_client metrics, written by it. Each observer has its
own series and registries (not the global one), so two engines in one process, or tests, do
not collide.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from functools import partial

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)

from watukuy.core.figures import FigureTable
from watukuy.core.grants import GrantRef
from watukuy.core.observe import Observer, OutcomeKind, StateFigures, status_class
from watukuy.core.poller import Poller, StreamOf
from watukuy.observe.declared import (
    KEY,
    POLLER,
    POLLER_LABELS,
    Declared,
    counter,
    gauge,
    histogram,
    key_counter,
    poller_histogram,
)
from watukuy.observe.keystates import KeyStates
from watukuy.observe.series import KeyCounter, PollerHistogram
from watukuy.observe.statemetrics import StateCollector

__all__ = ["PrometheusObserver"]

# Seconds: vendor calls from a few ms to the 30 s default timeout; commits of ~100 ms batches.
_REQUEST_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_WAIT_BUCKETS = (0.001, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0)
_COMMIT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_WAKE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
_RESTORE_BUCKETS = (0.01, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0)

Pollers = Callable[[], Mapping[str, Poller]]


class PrometheusObserver(Observer):
    """Counts what the engine and the Kafka store report; :meth:`render` is the scrape."""

    polls = key_counter(
        "watukuy_polls", "Page requests decided, by outcome kind.", KEY, "lane", "outcome"
    )
    items = key_counter("watukuy_items_fetched", "Items in the pages fetched.", KEY, "lane")
    events = key_counter(
        "watukuy_events", "Events committed, by type and lane.", KEY, "lane", "type"
    )
    http_requests = key_counter(
        "watukuy_http_requests",
        "HTTP round trips of ctx.http, by status class ('none': no answer came).",
        KEY,
        "method",
        "status_class",
    )
    http_latency = poller_histogram(
        "watukuy_http_request_duration_seconds",
        "Time of one HTTP round trip.",
        POLLER,
        buckets=_REQUEST_BUCKETS,
    )
    poll_latency = poller_histogram(
        "watukuy_poll_duration_seconds",
        "Time fetch() took for one page, budget waits and retries included.",
        POLLER,
        buckets=_REQUEST_BUCKETS,
    )
    throttle_waits = key_counter(
        "watukuy_throttle_waits",
        "Polls the vendor paced (429, or 503 with Retry-After): the key waits.",
        KEY,
    )
    circuit_moves = key_counter(
        "watukuy_circuit_transitions",
        "Moves of a key's circuit breaker, by the state it moved to.",
        KEY,
        "to",
    )
    parked = key_counter(
        "watukuy_items_parked",
        "Items or events parked, by kind (invalid, poison) and reason.",
        KEY,
        "kind",
        "reason",
    )
    dlq = key_counter("watukuy_dlq_records", "Parked items copied to the DLQ topic.", KEY)
    caught_up = key_counter(
        "watukuy_caught_up_events",
        "Published events a restored key's state had lost (Kafka dropped its transaction's"
        " state records after a broker restart), rolled forward over at restore.",
        KEY,
    )
    budget_wait = histogram(
        "watukuy_budget_wait_seconds",
        "Time a request waited for a budget token.",
        "budget",
        "lane",
        buckets=_WAIT_BUCKETS,
    )
    budget_waits = counter("watukuy_budget_waits", "Budget tokens granted.", "budget", "lane")
    budget_tokens = gauge(
        "watukuy_budget_tokens",
        "Tokens left in this instance's share of the budget, at its last grant (per: tenant:"
        " in the bucket of the tenant last served; no series per tenant).",
        "budget",
    )
    transactions = counter(
        "watukuy_transactions",
        "Kafka transactions of the store: committed, or aborted (with the kind of error).",
        "result",
        "kind",
    )
    transaction_latency = histogram(
        "watukuy_transaction_duration_seconds",
        "Time from begin to commit (or abort) of a Kafka transaction.",
        "result",
        buckets=_COMMIT_BUCKETS,
    )
    transaction_records = counter(
        "watukuy_transaction_records", "Records written in committed transactions."
    )
    rebalances = counter(
        "watukuy_rebalances",
        "Partitions of <prefix>.state assigned, revoked or lost in rebalances.",
        "change",
    )
    leases = gauge("watukuy_leases", "Partitions of <prefix>.state this instance holds.")
    restores = counter("watukuy_restores", "Partitions restored from the state topics.")
    restore_records = counter("watukuy_restore_records", "Records read while restoring partitions.")
    restore_latency = histogram(
        "watukuy_restore_duration_seconds",
        "Time to restore one partition.",
        buckets=_RESTORE_BUCKETS,
    )
    hanging = gauge(
        "watukuy_hanging_transactions",
        "Partitions of the topic where a transaction has stayed open longer than any may"
        " (a hanging one: only an administrator's abort ends it), at this instance's last"
        " look.",
        "topic",
    )
    webhooks = counter(
        "watukuy_webhooks",
        "Webhooks answered by this instance, by connector and result: accepted (its wakes are"
        " in Kafka), bad_signature (401), unknown_tenant / unknown_key (202, nothing woken),"
        " bad_body, too_large (413), unavailable (503: Kafka did not take the wake).",
        "connector",
        "result",
    )
    wakes = poller_histogram(
        "watukuy_webhook_wake_seconds",
        "From a webhook's wake accepted (202) to the first commit of the key it woke.",
        POLLER,
        buckets=_WAKE_BUCKETS,
    )
    grant_refreshes = counter(
        "watukuy_grant_refreshes",
        "Refreshes of tenants' OAuth2 grants this instance made or settled, by result: ok,"
        " refused (the tenant needs authorising again), lost (a claimed refresh never"
        " answered in the store), failed (the token endpoint failed; tried again).",
        "connector",
        "result",
    )
    needing_authorization = gauge(
        "watukuy_tenants_needing_authorization",
        "Tenants whose grant was refused or whose refresh was lost, as this instance last saw"
        " them: their keys poll nothing until a new grant is handed in.",
        "connector",
    )
    unowned = gauge(
        "watukuy_unowned_partitions",
        "Kafka partitions of <prefix>.state that no live runner has held (restored or"
        " restoring) for longer than a session timeout: their keys are polled by no one.",
    )

    def __init__(self, *, partition_label: bool = True, process: bool = True) -> None:
        # The ``_created`` series double every counter for what ``process_start_time_seconds``
        # already says; prometheus_client switches them off process-wide only.
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.partition_label = partition_label
        self._figures: Callable[[], FigureTable] | None = None
        self._pollers: Pollers | None = None
        self._names: dict[str, tuple[str, str, str]] = {}
        self._owners: dict[tuple[str, str], tuple[str, ...]] = {}  # see _owner
        # Per key: the labels its series were made under, to remove them when it leaves.
        self._left_behind: dict[tuple[str, str], set[tuple[str, ...]]] = defaultdict(set)
        self._held: set[int] = set()
        self._unauthorized: dict[str, set[str]] = {}  # connector -> tenants needing authorising
        self._states = KeyStates(partition_label, self.poller_labels)
        # What a scrape writes, in order: the declared metrics, the key states, then the
        # process' and the state's figures (``_tail``). Series counted per poll or read per key
        # are written straight (.exposition); the few others by prometheus_client.
        self._writers: list[Callable[[list[bytes]], None]] = []
        self._tail = CollectorRegistry()
        key = (*POLLER_LABELS, "partition") if partition_label else POLLER_LABELS
        group: CollectorRegistry | None = None
        for declared in vars(PrometheusObserver).values():
            if isinstance(declared, Declared):
                made = self.__dict__[declared.attribute] = declared.make(key)
                if isinstance(made, KeyCounter | PollerHistogram):
                    self._writers.append(made.render)
                    group = None
                    continue
                if group is None:
                    group = CollectorRegistry()
                    self._writers.append(partial(_written, group))
                group.register(made)
        self._key_counters = [
            made for made in self.__dict__.values() if isinstance(made, KeyCounter)
        ]
        self._writers += [self._key_states, partial(_written, self._tail)]
        if process:
            # process_cpu_seconds_total, process_resident_memory_bytes, ...
            ProcessCollector(registry=self._tail)

    # -- wiring -------------------------------------------------------------------------------

    def watch(self, figures: Callable[[], FigureTable], pollers: Pollers | None = None) -> None:
        """Read key states (lag, circuit, parked, owned keys) from the engine's figures at
        each scrape (``engine.figures.table``: the engine keeps them from the first scrape
        on); ``pollers`` says which poller is a stream of which connector."""
        self._figures = figures
        self._pollers = pollers

    def watch_state(self, figures: Callable[[], StateFigures]) -> None:
        """Read where state lives (snapshot cache, local state store) at each scrape."""
        self._tail.register(StateCollector(figures))

    def render(self) -> tuple[bytes, str]:
        """The scrape: Prometheus' text format and its content type."""
        pieces, content_type = self.render_pieces()
        return b"".join(pieces), content_type

    def render_pieces(self) -> tuple[list[bytes], str]:
        """The scrape in the pieces its writers made, for a sender that joins them a part at
        a time (``GET /metrics``): with 100,000 keys the text is 120 MB, and a copy of it
        whole costs more than half of what making it does."""
        out: list[bytes] = []
        for write in self._writers:
            write(out)
        return out, CONTENT_TYPE_LATEST

    def _key_states(self, out: list[bytes]) -> None:
        self._states.render(out, None if self._figures is None else self._figures())

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
            for metric in self._key_counters:
                metric.remove(owner)

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

    def webhook_received(self, connector: str, result: str) -> None:
        self.webhooks.labels(connector, result).inc()

    def wake_served(self, poller: str, partition: str, seconds: float) -> None:
        self._observe(self.wakes, poller, seconds)

    def grant_refreshed(self, ref: GrantRef, result: str) -> None:
        """A tenant's grant refreshed (``ok``, ``failed``), refused or lost, or handed in."""
        if result not in ("handed_in", "needs_authorization"):
            self.grant_refreshes.labels(ref.connector, result).inc()
        waiting = self._unauthorized.setdefault(ref.connector, set())
        if result in ("refused", "lost", "needs_authorization"):
            waiting.add(ref.tenant)
        elif result in ("ok", "handed_in"):
            waiting.discard(ref.tenant)
        self.needing_authorization.labels(ref.connector).set(len(waiting))


def _parts(stream: StreamOf) -> tuple[str, str]:
    return stream.connector, stream.stream


def _written(registry: CollectorRegistry, out: list[bytes]) -> None:
    out.append(generate_latest(registry))
