"""How :class:`~watukuy.observe.metrics.PrometheusObserver` declares its metrics: once each, on
the class, with its attribute, Prometheus name, help and labels.

A declaration's labels may name :data:`POLLER` (the labels that name a poller) and :data:`KEY`
(a key's); the observer expands them as its ``partition_label`` setting says.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, TypeVar, overload

from prometheus_client import Counter, Gauge, Histogram

from watukuy.observe.series import KeyCounter, PollerHistogram

__all__ = [
    "KEY",
    "POLLER",
    "POLLER_LABELS",
    "Declared",
    "counter",
    "gauge",
    "histogram",
    "key_counter",
    "poller_histogram",
]

POLLER_LABELS = ("poller", "connector", "stream")
"""What names a poller in a series: itself, and the connector and stream it is one of."""
POLLER = "<poller>"
"""In a declaration's labels: :data:`POLLER_LABELS`."""
KEY = "<key>"
"""In a declaration's labels: the key's labels, :data:`POLLER_LABELS` and ``partition`` (or
the poller's alone when the observer drops ``partition``)."""

M = TypeVar("M", Counter, Gauge, Histogram, KeyCounter, PollerHistogram)

Build = Callable[[list[str]], M]


class Declared(Generic[M]):
    """One metric, declared once on the class: its attribute, Prometheus name, help and labels.

    The observer's constructor makes each declared metric and keeps it in the instance, where
    it shadows the declaration: reading it costs a plain attribute read. prometheus_client's
    metrics are made on no registry: the observer registers them where it writes them.
    """

    def __init__(self, build: Build[M], labels: tuple[str, ...]) -> None:
        self._build: Build[M] = build
        self._labels = labels
        self.attribute = ""

    def __set_name__(self, owner: type, attribute: str) -> None:
        self.attribute = attribute

    def make(self, key: Sequence[str]) -> M:
        expand = {KEY: key, POLLER: POLLER_LABELS}
        labels = [label for entry in self._labels for label in expand.get(entry, [entry])]
        made: M = self._build(labels)
        return made

    @overload
    def __get__(self, instance: None, owner: type) -> Declared[M]: ...
    @overload
    def __get__(self, instance: object, owner: type) -> M: ...
    def __get__(self, instance: object | None, owner: type) -> Declared[M] | M:
        if instance is None:
            return self
        made: M = instance.__dict__[self.attribute]  # made by the constructor
        return made


def counter(name: str, documentation: str, *labels: str) -> Declared[Counter]:
    return Declared(lambda names: Counter(name, documentation, names, registry=None), labels)


def key_counter(name: str, documentation: str, *labels: str) -> Declared[KeyCounter]:
    """A counter bumped on every poll (:mod:`.series`): ``name`` without ``_total``."""
    return Declared(lambda names: KeyCounter(name, documentation, names), labels)


def poller_histogram(
    name: str, documentation: str, *labels: str, buckets: tuple[float, ...]
) -> Declared[PollerHistogram]:
    """A histogram observed on every poll (:mod:`.series`)."""
    return Declared(
        lambda names: PollerHistogram(name, documentation, names, buckets=buckets), labels
    )


def gauge(name: str, documentation: str, *labels: str) -> Declared[Gauge]:
    return Declared(lambda names: Gauge(name, documentation, names, registry=None), labels)


def histogram(
    name: str, documentation: str, *labels: str, buckets: tuple[float, ...]
) -> Declared[Histogram]:
    return Declared(
        lambda names: Histogram(name, documentation, names, buckets=buckets, registry=None),
        labels,
    )
