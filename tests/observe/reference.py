"""The scrape as prometheus_client writes it: what a :class:`PrometheusObserver` holds, built
into prometheus_client's metric families and rendered by its ``generate_latest``.

This is how the observer wrote its scrape before it wrote the text itself (observe/exposition):
its per-poll series as ``CounterMetricFamily`` and ``HistogramMetricFamily``, and the key
states from the engine's public ``inspect()`` (not from the figures the observer reads), in
the registry's order. ``tests/observe/test_exposition.py`` holds the observer's bytes to it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from watukuy.core.inspect import PollerInspect
from watukuy.core.observe import StateFigures
from watukuy.observe.declared import POLLER_LABELS, Declared
from watukuy.observe.metrics import PrometheusObserver
from watukuy.observe.series import KeyCounter, PollerHistogram
from watukuy.observe.statemetrics import StateCollector

Inspect = Callable[[], Iterable[PollerInspect]]
CIRCUIT_STATES = ("closed", "open", "half-open")


def reference_scrape(
    observer: PrometheusObserver,
    inspect: Inspect | None,
    state: Callable[[], StateFigures] | None = None,
) -> bytes:
    """prometheus_client's text for what ``observer`` holds now (without the process'
    figures, which move between two looks), its key states read from ``inspect``."""
    registry = CollectorRegistry(auto_describe=False)
    for declared in vars(PrometheusObserver).values():
        if isinstance(declared, Declared):
            made = getattr(observer, declared.attribute)
            if isinstance(made, KeyCounter):
                registry.register(_Counted(made))
            elif isinstance(made, PollerHistogram):
                registry.register(_Observed(made))
            else:
                registry.register(made)  # prometheus_client's own Counter, Gauge, Histogram
    registry.register(_KeyStates(observer, inspect))
    if state is not None:
        registry.register(StateCollector(state))
    return generate_latest(registry)


class _Counted(Collector):
    def __init__(self, counter: KeyCounter) -> None:
        self._counter = counter

    def collect(self) -> Iterator[Metric]:
        made = self._counter
        family = CounterMetricFamily(made.name, made.documentation, labels=made.labels)
        for owner, series in made._values.items():
            for more, value in series.items():
                family.add_metric([*owner, *more], value)
        yield family


class _Observed(Collector):
    def __init__(self, histogram: PollerHistogram) -> None:
        self._histogram = histogram

    def collect(self) -> Iterator[Metric]:
        made = self._histogram
        family = HistogramMetricFamily(made.name, made.documentation, labels=made.labels)
        for owner, counts in made._values.items():
            cumulative, buckets = 0.0, []
            for bound, count in zip(made._bounds, counts, strict=False):
                cumulative += count
                buckets.append((floatToGoString(bound), cumulative))
            family.add_metric(list(owner), buckets, sum_value=counts[-1])
        yield family


class _KeyStates(Collector):
    """Key states from ``inspect()``: lag, circuit, parked, owned and waiting keys."""

    def __init__(self, observer: PrometheusObserver, inspect: Inspect | None) -> None:
        self._observer = observer
        self._inspect = inspect

    def collect(self) -> Iterator[Metric]:
        observer = self._observer
        entries = [] if self._inspect is None else list(self._inspect())
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
            keys.setdefault(entry.poller, 0)
            waits.setdefault(entry.poller, 0)
            if entry.waiting_newer:
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
