"""How this runner is: KIP-1017's health, its own keys as ``inspect()`` sees them, its
metrics, and the cluster answer of ``GET /``."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from watukuy.control.cluster import build_commit
from watukuy.core.version import VERSION
from watukuy.engine.engine import Engine
from watukuy.rest.port import ClusterInfo, Health, Metrics

__all__ = ["RunnerHealth"]


class RunnerHealth:
    """``started`` says whether the engine polls; ``broken`` what stopped the Kafka store, if
    anything did; ``adrift`` why this runner does not hold what the group assigns it, if it
    does not (:mod:`watukuy.control.ownership`); ``metrics`` renders the Prometheus
    exposition (none: an empty one); ``cluster_id`` asks Kafka for its cluster id (none:
    unknown)."""

    def __init__(
        self,
        engine: Engine,
        runner_id: str,
        *,
        started: Callable[[], bool],
        broken: Callable[[], BaseException | None],
        adrift: Callable[[], str | None] = lambda: None,
        metrics: Callable[[], Awaitable[Metrics]] | None = None,
        cluster_id: Callable[[], Awaitable[str | None]] | None = None,
    ) -> None:
        self._engine = engine
        self._cluster_id = cluster_id
        self._runner_id = runner_id
        self._started = started
        self._broken = broken
        self._adrift = adrift
        self._metrics = metrics

    async def cluster(self) -> ClusterInfo:
        cluster_id = None if self._cluster_id is None else await self._cluster_id()
        return {"version": VERSION, "commit": build_commit(), "kafka_cluster_id": cluster_id}

    async def health(self) -> Health:
        broken = self._broken()
        if broken is not None:
            return Health("unhealthy", f"the Kafka store failed: {type(broken).__name__}")
        if not self._started():
            return Health("starting", "the runner is starting")
        adrift = self._adrift()
        if adrift is not None:
            return Health("unhealthy", adrift)
        return Health("healthy", "the runner is running")

    async def healthz(self) -> dict[str, Any]:
        """This instance's keys from ``inspect()``: lag, circuit, parked counts, and each lane
        (cursor; a running backfill's pages, items and end; the reconcile pass). A key with
        ``waiting_newer`` is owned but not run here (``last_error`` says why)."""
        now = time.time()
        keys = [
            {
                "poller": entry.poller,
                "partition": entry.partition,
                "paused": entry.paused,
                "circuit": entry.circuit,
                "lag": entry.lag,
                "parked": dict(entry.parked),
                "next_due": None if entry.next_due is None else entry.next_due.isoformat(),
                "throttled_until": _iso(entry.throttled_until),
                "last_error": entry.last_error,
                "waiting_newer": entry.waiting_newer,
                "lanes": entry.lanes,
            }
            for entry in self._engine.inspect()
        ]
        return {"runner": self._runner_id, "time": now, "keys": keys}

    async def metrics(self) -> Metrics:
        if self._metrics is None:
            return Metrics((), "text/plain; version=0.0.4; charset=utf-8")
        return await self._metrics()


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()
