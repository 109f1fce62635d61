"""Where a runner's state lives, as Prometheus series read at each scrape: the snapshot cache
of the engine and the local state store (its size, its standbys, what restores took from it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from watukuy.core.observe import StateFigures

__all__ = ["NAMES", "StateCollector"]

NAMES = (
    "watukuy_snapshot_cache_keys",
    "watukuy_snapshot_cache_entries",
    "watukuy_snapshot_cache_hits",
    "watukuy_snapshot_cache_loads",
    "watukuy_snapshot_entry_reads",
    "watukuy_local_state_bytes",
    "watukuy_standby_partitions",
    "watukuy_standby_lag_records",
    "watukuy_restore_records_from_disk",
)


class StateCollector(Collector):
    def __init__(self, figures: Callable[[], StateFigures]) -> None:
        self._figures = figures

    def describe(self) -> list[Metric]:
        return []  # built per scrape

    def collect(self) -> Iterator[Metric]:
        f = self._figures()
        keys, entries, hits, loads, reads, size, standbys, standby_lag, from_disk = NAMES
        yield _gauge(keys, "Keys whose snapshot the engine holds in memory.", f.snapshot_keys)
        yield _gauge(
            entries,
            "Snapshot entries held in memory (runner.snapshot.cache.entries bounds them).",
            f.snapshot_entries,
        )
        yield _counter(hits, "Snapshots a page or an operation found in memory.", f.snapshot_hits)
        yield _counter(
            loads,
            "Snapshots loaded from the store (from disk with a local state store).",
            f.snapshot_loads,
        )
        yield _counter(
            reads,
            "Snapshot entries pages read one by one (their own items'), instead of loading a "
            "whole snapshot.",
            f.snapshot_entry_reads,
        )
        if f.disk_bytes is not None:
            yield _gauge(size, "Bytes of the local state store on disk.", f.disk_bytes)
            yield _gauge(
                standbys,
                "Partitions of other runners kept warm in the local state store.",
                f.standby_partitions,
            )
            yield _gauge(
                standby_lag,
                "Records the standby partitions were behind their topics at the last look "
                "(every 5 s); 0 once a takeover of them would replay nothing, NaN while one has "
                "not fetched yet.",
                f.standby_lag,
            )
            yield _counter(
                from_disk,
                "Records restores took from the local state store instead of reading Kafka.",
                f.restored_from_disk,
            )


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


def _counter(name: str, documentation: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, documentation, value=value)
