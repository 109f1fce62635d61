"""What the churn and REST scenarios share: each runner's REST port, one call to it, a REST
connector on a simulator of its own, and Kafka's last stable offsets of a topic.

A call returns the status and the answer as a user sees it (parsed JSON, else the text), never
raising on an HTTP error status: the scenarios judge statuses themselves. Connection errors
(a runner being killed) do raise ``OSError``.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # documented, not in __all__
    AdminClient,
    OffsetSpec,
)

from integration.faults.vendor import Simulator
from integration.runners import RunnerProcess

_PORT = re.compile(r"REST on port (\d+)")


def rest_port(runner: RunnerProcess) -> int:
    """The port the runner's current start serves REST on (``rest.listen`` asks for any)."""
    found = _PORT.findall(runner.since_start())
    if not found:
        raise RuntimeError(f"runner {runner.name} has not logged its REST port")
    return int(found[-1])


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any
    """The parsed JSON answer; the text when it is not JSON; ``None`` when empty."""
    content_type: str

    @property
    def error_shaped(self) -> bool:
        """Connect's error shape: ``{"error_code": <status>, "message": str}``."""
        body = self.body
        return (
            isinstance(body, dict)
            and body.get("error_code") == self.status
            and isinstance(body.get("message"), str)
        )


def call(
    port: int,
    method: str,
    path: str,
    body: Any = None,
    *,
    raw: bytes | None = None,
    content_type: str | None = "application/json",
    timeout: float = 30,
) -> Answer:
    """``method path`` on the runner at ``port``; ``body`` as JSON, or ``raw`` bytes as they
    are (with ``content_type``, ``None`` for no header)."""
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
    if data is not None and content_type is not None:
        request.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return _answer(response.status, response.headers.get("Content-Type"), response.read())
    except urllib.error.HTTPError as error:
        return _answer(error.code, error.headers.get("Content-Type"), error.read())


def _answer(status: int, content_type: str | None, raw: bytes) -> Answer:
    kind = content_type or ""
    text = raw.decode(errors="replace")
    if not raw:
        return Answer(status, None, kind)
    try:
        return Answer(status, json.loads(text), kind)
    except ValueError:
        return Answer(status, text, kind)


def connector_config(sim: Simulator, tenants: list[str], **changes: Any) -> dict[str, Any]:
    """A REST connector's config polling ``sim`` (not the runners' ``WATUKUY_VENDOR_URL``:
    its tenants are its own) for a static list of ``tenants``; ``changes`` replace keys."""
    listed = {t["id"]: t for t in sim.call("GET", "/tenants")["tenants"]}
    config: dict[str, Any] = {
        "partitions": {
            "static": [
                {"key": t, "data": {"slug": listed[t]["slug"], "token": listed[t]["token"]}}
                for t in tenants
            ]
        },
        "request": {
            "url": sim.base_url + "/{partition.data.slug}/items",
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
    }
    config.update(changes)
    return config


def tenants_source(sim: Simulator) -> dict[str, Any]:
    """An ``http`` partitions source listing every tenant of ``sim`` (a refresh awaits it)."""
    return {
        "http": {
            "url": sim.base_url + "/tenants",
            "records": "tenants",
            "key": "id",
            "data": {"slug": "slug", "token": "token"},
        },
        "refresh": "1m",
    }


def stable_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """``{partition: last stable offset}`` of ``topic`` now: a record at or past it was
    committed after this call (an open transaction's records all sit past it)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    metadata = admin.list_topics(topic, timeout=15).topics[topic]
    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    wanted = {TopicPartition(topic, p): latest for p in metadata.partitions}
    futures = admin.list_offsets(
        wanted, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=15
    )
    return {tp.partition: future.result().offset for tp, future in futures.items()}
