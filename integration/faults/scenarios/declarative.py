"""What the poison, vendor-fault and secrets scenarios share: runners of the declarative
invoices poller (``config/invoices.yaml`` as data, tenants from the simulator's ``/tenants``,
the Avro data schema of ``schemas/examples/invoice.avsc``), and the dead letters of a prefix
decoded.

The harness' :class:`~integration.faults.harness.RunnerPool` runs the Python poller; the
declarative one is what an operator writes, and the only one with a data schema and REST
credentials, so these scenarios run it through a subclass that only changes the config.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from integration.faults.harness import POLLER_NAME, FaultContext, RunnerPool
from integration.faults.topics import Raw, read_raw
from integration.faults.vendor import Simulator
from integration.runners import ROOT
from watukuy.serde import framing
from watukuy.serde.events import dlq_schema

SCHEMA = ROOT / "schemas" / "examples" / "invoice.avsc"

INVOICES: dict[str, Any] = {
    "name": POLLER_NAME,
    "partitions": {
        "http": {
            "url": "${env:WATUKUY_VENDOR_URL}/tenants",
            "records": "tenants",
            "key": "id",
            "data": {"slug": "slug", "token": "token"},
        },
        "refresh": "2s",
    },
    "request": {
        "url": "${env:WATUKUY_VENDOR_URL}/{partition.data.slug}/items",
        "query": {"limit": 100},
        "timeout": "5s",
        "auth": {"bearer": "{partition.data.token}"},
    },
    "records": "data",
    "identity": "id",
    "version": "etag",
    "paginate": {"next_token": {"path": "next", "param": "cursor"}},
    "cursor": {"token": {"path": "resume", "param": "cursor"}},
    "schedule": {"min": "250ms", "max": "1s"},
    "schema": str(SCHEMA),
}
"""The invoices poller of ``config/invoices.yaml``, polled often so a scenario is short."""


def invoices(**changes: Any) -> dict[str, Any]:
    """:data:`INVOICES` with top-level keys replaced (``None`` removes one)."""
    poller = copy.deepcopy(INVOICES)
    for key, value in changes.items():
        if value is None:
            poller.pop(key, None)
        else:
            poller[key] = value
    return poller


class DeclarativePool(RunnerPool):
    """A :class:`RunnerPool` whose runners run ``poller`` (a declarative poller as data),
    with ``sections`` (e.g. ``rest``, ``log``) merged into each runner's config."""

    def __init__(
        self,
        bootstrap: str,
        prefix: str,
        simulator: Simulator,
        workdir: Any,
        *,
        poller: Mapping[str, Any],
        sections: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> None:
        super().__init__(bootstrap, prefix, simulator, workdir, **options)
        self.poller = dict(poller)
        self.sections = dict(sections or {})

    def config(self, runner_id: str, **runner_options: Any) -> dict[str, Any]:
        config = super().config(runner_id, **runner_options)
        config["pollers"] = [self.poller]
        for name, section in self.sections.items():
            base = config.get(name)
            config[name] = base | section if isinstance(base, dict) else section
        return config


@contextmanager
def declarative_pool(
    ctx: FaultContext, label: str, simulator: Simulator, **options: Any
) -> Iterator[DeclarativePool]:
    """A :class:`DeclarativePool` on a fresh prefix of ``ctx`` (its topics deleted with the
    context's); its runners are killed on the way out, whatever happened."""
    pool = DeclarativePool(ctx.bootstrap, ctx.prefix(label), simulator, ctx.workdir, **options)
    try:
        yield pool
    finally:
        pool.kill_all()


# -- dead letters ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DeadLetter:
    """A DLQ record: its triage headers and its decoded ``watukuy.DeadLetter`` value."""

    raw: Raw
    letter: dict[str, Any]

    @property
    def kind(self) -> str | None:
        return self.raw.header("watukuy.kind")


def dead_letters(bootstrap: str, prefix: str, poller: str = POLLER_NAME) -> list[DeadLetter]:
    schema = dlq_schema().schema
    records = read_raw(bootstrap, [f"{prefix}.dlq.{poller}"])
    return [DeadLetter(r, framing.decode(r.value or b"", schema)) for r in records]
