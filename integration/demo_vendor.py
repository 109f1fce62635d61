"""The demo's troubled tenants, set up through the simulator's admin API, and what the runners'
``/metrics`` say about them.

- One tenant is *rate-limited*: the vendor answers a share of its requests with 429 and
  ``Retry-After``; the runner waits as told and carries on, so its events come slower.
- One tenant is *failing*: every request gets a 5xx; after a few in a row its circuit opens
  (the status table shows it FAILED, circuit ``open``) and the other tenants keep flowing.
"""

from __future__ import annotations

import contextlib
import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

THROTTLE_METRIC = "watukuy_throttle_waits"
"""Per key: polls the vendor paced (429, or 503 with Retry-After)."""


@dataclass(frozen=True)
class Trouble:
    """Which tenant misbehaves how, and the faults that make it so."""

    rate_limited: str
    failing: str
    rate_limited_share: float = 0.6
    retry_after: int = 2
    failing_status: int = 503

    def faults(self) -> dict[str, dict[str, Any]]:
        """``POST /_admin/tenants/{id}/faults`` bodies, per tenant id."""
        return {
            self.rate_limited: {
                "error_rate": self.rate_limited_share,
                "fail_status": 429,
                "retry_after": self.retry_after,
            },
            self.failing: {"error_rate": 1.0, "fail_status": self.failing_status},
        }

    def describe(self) -> list[str]:
        share = round(self.rate_limited_share * 100)
        return [
            f"{self.rate_limited} is rate-limited: {share}% of its requests get 429 "
            f"with Retry-After: {self.retry_after}",
            f"{self.failing} is failing: every request gets {self.failing_status}",
        ]


def choose(tenants: list[str]) -> Trouble:
    """The second tenant is rate-limited and the last one fails (at least three are needed,
    so one tenant at least flows untroubled)."""
    if len(tenants) < 3:
        raise ValueError(f"the demo needs at least 3 tenants, got {len(tenants)}")
    return Trouble(rate_limited=tenants[1], failing=tenants[-1])


def apply(base_url: str, trouble: Trouble) -> None:
    """Set the faults on the simulator (its admin API answers with what it now holds)."""
    for tenant, body in trouble.faults().items():
        request = urllib.request.Request(
            f"{base_url}/_admin/tenants/{tenant}/faults",
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            answer.read()


def throttle_waits(port: int, timeout: float = 2.0) -> dict[str, float] | None:
    """Per partition, ``watukuy_throttle_waits_total`` of the runner serving on ``port``;
    ``None`` when it does not answer (dead, or not serving yet)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout) as got:
            text = got.read().decode()
    except (OSError, urllib.error.URLError):
        return None
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != THROTTLE_METRIC:
            continue
        for sample in family.samples:
            if sample.name.endswith("_total"):
                partition = sample.labels.get("partition", "")
                counts[partition] = counts.get(partition, 0.0) + sample.value
    return counts


class Throttles:
    """The throttle counts of every runner, as last scraped: a killed runner's stay counted."""

    def __init__(self, ports: Mapping[str, int]) -> None:
        self._ports = dict(ports)
        self._last: dict[str, dict[str, float]] = {}

    def scrape(self) -> None:
        for runner, port in self._ports.items():
            with contextlib.suppress(ValueError):  # a half-written answer: keep the last one
                counts = throttle_waits(port)
                if counts is not None:
                    self._last[runner] = counts

    def of(self, tenant: str) -> int:
        return round(sum(counts.get(tenant, 0.0) for counts in self._last.values()))
