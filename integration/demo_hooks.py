"""The demo's webhooks (issue 46): the tracker connector polls every 15 minutes, and the vendor's
signed webhooks wake a tenant's stream when something changes, so a change still reaches Kafka
within a second.

The demo subscribes every simulator tenant's tracker changes (``project.*``, ``issue.*``,
``comment.*``, ``user.*``; the invoices poller has no webhook) to one runner's
``/webhooks/tracker`` (``config/tracker.yaml``'s ``webhook:`` block, signed with
``TRACKER_HOOK_SECRET``), and again to the survivor once that runner is killed, as a vendor's
webhook URL would point at a load balancer. Then it renames one project at the vendor and
times its event on ``<prefix>.events.tracker.projects`` (read_committed), and says how long
the webhook's 202 took.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from integration.demo_pieces import committed_reader, wait_for_topic
from integration.demo_streams import CONNECTOR, HOOK_SECRET
from watukuy.serde.consumer import SchemaTopicResolver, event_decoder

HOOK_PATH = "/webhooks/tracker"
"""``config/tracker.yaml``'s webhook path."""
SCHEDULE = {"min": "15m", "max": "15m"}
"""The tracker's schedule in the demo: without a webhook, a change waits up to 15 minutes."""
EVENTS = ["project.*", "issue.*", "comment.*", "user.*"]
STREAM = "projects"


def admin(base_url: str, method: str, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        base_url + path, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        raw = answer.read()
    return json.loads(raw) if raw else None


def subscribe(base_url: str, tenants: Sequence[str], port: int) -> str:
    """Every tenant's tracker changes as signed webhooks to the runner on ``port``; its URL."""
    url = f"http://127.0.0.1:{port}{HOOK_PATH}"
    for tenant in tenants:
        subscription = {"tenant": tenant, "url": url, "secret": HOOK_SECRET, "events": EVENTS}
        admin(base_url, "POST", "/_admin/webhooks", subscription)
    return url


@dataclass(frozen=True)
class Timed:
    tenant: str
    project: str
    answered: float | None
    """Seconds from the change to the webhook's 202 (None: no 202 seen)."""
    readable: float | None
    """Seconds from the change to its event readable on Kafka (None: not within the wait)."""

    def line(self) -> str:
        where = f"{self.tenant}/{self.project}"
        if self.readable is None:
            return f"project {where} renamed at the vendor: no event on Kafka yet"
        hook = f"its webhook's 202 after {self.answered:.3f}s, " if self.answered else ""
        return (
            f"project {where} renamed at the vendor: {hook}its event readable on Kafka "
            f"{self.readable:.2f}s after the change (tracker schedule {SCHEDULE['max']}: "
            "the webhook woke the poll)"
        )


def one_change(bootstrap: str, prefix: str, base_url: str, tenant: str, wait: float) -> Timed:
    """Rename one of ``tenant``'s projects and time its event (``wait`` seconds at most)."""
    topic = f"{prefix}.events.{CONNECTOR}.{STREAM}"
    partitions = wait_for_topic(bootstrap, topic, wait) or []
    reader = committed_reader(bootstrap, topic, partitions, timing=True)
    resolver = SchemaTopicResolver(bootstrap, f"{prefix}.schemas")
    decode = event_decoder(resolve=resolver)
    try:
        caught_up(reader, decode, min(wait, 3.0))
        project = admin(base_url, "GET", f"/_admin/tenants/{tenant}/projects")["data"][0]["id"]
        changed_at = time.time()
        path = f"/_admin/tenants/{tenant}/projects/{project}"
        etag = admin(base_url, "PATCH", path, {"name": f"renamed by the demo {changed_at:.0f}"})
        wanted = (tenant, project, str(etag["etag"]))
        readable: float | None = None
        deadline = time.monotonic() + wait
        while readable is None and time.monotonic() < deadline:
            message = reader.poll(0.05)
            if message is None or message.error() is not None or not message.value():
                continue
            event = decode(message.value() or b"")
            if (event.partition, event.subject, event.version) == wanted:
                readable = time.time() - changed_at
        return Timed(tenant, project, answered_after(base_url, tenant, changed_at), readable)
    finally:
        reader.close()
        resolver.close()


def caught_up(reader: Any, decode: Any, wait: float) -> None:
    """Read what the topic holds already (the schemas resolved on the way), so that the
    change's event is timed when it is readable, not when a cold reader got to it."""
    deadline, seen = time.monotonic() + wait, False
    while time.monotonic() < deadline:
        message = reader.poll(0.2)
        if message is None:
            if seen:  # a cold reader's first fetch may take longer than one poll
                return
            continue
        if message.error() is None and message.value():
            decode(message.value())
            seen = True


def answered_after(base_url: str, tenant: str, since: float) -> float | None:
    """Seconds from ``since`` to the 202 of the tenant's first project webhook after it."""
    listing = admin(base_url, "GET", f"/_admin/webhooks?tenant={tenant}")
    for delivery in listing["deliveries"]:
        accepted = delivery["status"] == 202 and delivery["type"].startswith("project.")
        if accepted and delivery["sent_at"] >= since and delivery["answered_at"]:
            return float(delivery["answered_at"]) - since
    return None
