"""What the poison, vendor-fault and secrets scenarios share: runners of the declarative
invoices poller (``config/invoices.yaml`` as data, tenants from the simulator's ``/tenants``,
the Avro data schema of ``schemas/examples/invoice.avsc``), a raw reader of any topic with its
headers, and the dead letters of a prefix decoded.

The harness' :class:`~integration.faults.harness.RunnerPool` runs the Python poller; the
declarative one is what an operator writes, and the only one with a data schema and REST
credentials, so these scenarios run it through a subclass that only changes the config.
"""

from __future__ import annotations

import copy
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition

from integration.faults.harness import POLLER_NAME, FaultContext, RunnerPool
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


# -- reading topics raw ---------------------------------------------------------------------


@dataclass(frozen=True)
class Raw:
    """One record as it is on the topic: nothing decoded."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]

    def header(self, name: str) -> str | None:
        found = [value for key, value in self.headers if key == name]
        return found[-1].decode(errors="replace") if found else None


def topics_of(bootstrap: str, prefix: str) -> list[str]:
    """Every topic whose name starts with ``<prefix>.``, internal ones included."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "fault-list"})
    try:
        listed = consumer.list_topics(timeout=15).topics
    finally:
        consumer.close()
    return sorted(name for name in listed if name.startswith(prefix + "."))


def read_raw(
    bootstrap: str, topics: list[str], *, committed: bool = True, timeout: float = 120
) -> list[Raw]:
    """Every record of ``topics`` up to their current end (read_committed unless told)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"fault-raw-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed" if committed else "read_uncommitted",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
            "fetch.max.bytes": 64 * 1024 * 1024,
        }
    )
    try:
        wanted: list[TopicPartition] = []
        for topic in topics:
            found = consumer.list_topics(topic, timeout=15).topics.get(topic)
            if found is not None and found.error is None:
                wanted += [TopicPartition(topic, p, -2) for p in found.partitions]
        if not wanted:
            return []
        consumer.assign(wanted)
        pending = {(tp.topic, tp.partition) for tp in wanted}
        out: list[Raw] = []
        deadline = time.monotonic() + timeout
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{sorted(pending)[:3]} not read to the end")
            for message in consumer.consume(1000, 0.5):
                error = message.error()
                where = (message.topic() or "", message.partition() or 0)
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        pending.discard(where)
                    continue
                headers = tuple(_header(pair) for pair in message.headers() or [])
                out.append(
                    Raw(
                        *where,
                        message.offset() or 0,
                        _bytes(message.key()),
                        message.value(),
                        headers,
                    )
                )
        return out
    finally:
        consumer.close()


def _header(pair: Any) -> tuple[str, bytes]:
    name, value = pair
    return str(name), _bytes(value) or b""


def _bytes(value: str | bytes | None) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


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
