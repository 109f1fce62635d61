"""A webhook answered by the runner's intake (issue 46), against an engine on the memory store
and the simulator: a signed webhook for a tenant is a ``wake`` command record for each key it
names and 202, and the key's next tick polls it, on a schedule that would not for 15 minutes;
a bad signature wakes nothing (401); an unknown tenant or key is 202 and counted; a store that
does not take the wake is 503, so the vendor sends it again."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import pytest

from integration.simulator import VendorSimulator, running_simulator
from watukuy import Engine, FakeClock, MemoryStore
from watukuy.config import parse_config
from watukuy.control.webhooks import WebhookIntake, engine_hooks
from watukuy.core.commands import Command
from watukuy.core.errors import Retriable
from watukuy.core.observe import Observer

pytestmark = pytest.mark.unit

SECRET = "hook-secret"
PATH = "/webhooks/tracker"


class Inbox(MemoryStore):
    """Commands come back to this engine, as Kafka hands a key's owner its records."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[Command] = []
        self.refuse: Exception | None = None

    async def send_command(self, command: Command) -> None:
        if self.refuse is not None:
            raise self.refuse
        self.sent.append(command)
        self._handed.append(command)


class Counted(Observer):
    def __init__(self) -> None:
        self.webhooks: list[str] = []
        self.polled: list[tuple[str, str]] = []

    def webhook_received(self, connector: str, result: str) -> None:
        self.webhooks.append(result)

    def poll_decided(self, poller: str, partition: str, lane: str, kind: Any, s: float) -> None:
        self.polled.append((poller, partition))


def tracker(base: str) -> dict[str, Any]:
    return {
        "name": "tracker",
        "partitions": {
            "http": {
                "url": f"{base}/tenants",
                "records": "tenants",
                "key": "id",
                "data": {"slug": "slug", "token": "token"},
            },
        },
        "webhook": {
            "path": PATH,
            "verify": {
                "hmac": {
                    "secret": SECRET,
                    "header": "X-Hub-Signature-256",
                    "encoding": "hex",
                    "prefix": "sha256=",
                }
            },
            "tenant": {"header": "X-Tenant"},
            "streams": [
                {
                    "when": {"path": "type", "matches": "issue\\..*"},
                    "stream": "issues",
                    "key": "{body.issue.project_id}",
                },
                {"stream": "projects"},
            ],
        },
        "defaults": {
            "request": {
                "base": f"{base}/{{partition.data.slug}}",
                "auth": {"bearer": "{partition.data.token}"},
            },
            "records": "data",
            "identity": "id",
            "version": "etag",
            "paginate": {"next_token": {"path": "next", "param": "cursor"}},
            "cursor": {"token": {"path": "resume", "param": "cursor"}},
            "schedule": {"min": "15m", "max": "15m"},
        },
        "streams": [
            {"name": "projects", "request": {"path": "/projects"}},
            {
                "name": "issues",
                "parent": {"stream": "projects", "key": "id"},
                "request": {"path": "/projects/{parent.key}/issues"},
            },
        ],
    }


def signed(
    payload: dict[str, Any], tenant: str, secret: str = SECRET
) -> tuple[dict[str, str], bytes]:
    body = json.dumps(payload).encode()
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return {"X-Hub-Signature-256": f"sha256={digest}", "X-Tenant": tenant}, body


@pytest.fixture
async def world() -> Any:
    clock = FakeClock(1_750_000_000.0)
    sim = VendorSimulator(tenants=2, items_per_tenant=2, seed=3, now=clock.now)
    async with running_simulator(sim) as base:
        config = parse_config(
            {"kafka": {"bootstrap.servers": "unused:9092"}, "pollers": [tracker(base)]}
        )
        store, counted = Inbox(), Counted()
        engine = Engine(config.pollers, store=store, clock=clock, observers=[counted])
        async with engine:
            yield engine, store, counted, clock, sim
    return


async def test_a_signed_webhook_wakes_the_keys_it_names_and_they_poll_now(world: Any) -> None:
    engine, store, counted, clock, _ = world
    intake = WebhookIntake(engine, engine_hooks(engine))
    for _ in range(3):  # every key's first polls: projects, then the children they make
        await engine.tick()
        clock.advance(1)
    tenant = engine.listed("tracker.projects")[0]
    project = next(k for k in (i.partition for i in engine.inspect()) if k.startswith(f"{tenant}/"))
    counted.polled.clear()
    clock.advance(60)
    headers, body = signed(
        {"type": "issue.updated", "issue": {"project_id": project.split("/")[1]}}, tenant
    )
    answer = await intake.receive(PATH, headers, body)
    assert (answer.status, answer.result) == (202, "accepted")
    assert [(c.op, c.poller, c.partition) for c in store.sent] == [
        ("wake", "tracker.issues", project)
    ]
    await engine.tick()
    assert counted.polled == [("tracker.issues", project)]  # nothing else was due
    headers, body = signed({"type": "project.created"}, tenant)
    assert (await intake.receive(PATH, headers, body)).status == 202
    assert store.sent[-1].poller == "tracker.projects" and store.sent[-1].partition == tenant


async def test_what_a_webhook_is_answered_when_it_wakes_nothing(world: Any) -> None:
    engine, store, counted, _, _ = world
    intake = WebhookIntake(engine, engine_hooks(engine))
    await engine.tick()
    tenant = engine.listed("tracker.projects")[0]
    headers, body = signed({"type": "project.created"}, tenant, secret="guessed")
    assert (await intake.receive(PATH, headers, body)).status == 401
    headers, body = signed({"type": "project.created"}, "t_unknown")
    assert (await intake.receive(PATH, headers, body)).status == 202
    headers, body = signed({"type": "issue.updated", "issue": {}}, tenant)  # no project id
    assert (await intake.receive(PATH, headers, body)).status == 202
    store.refuse = Retriable("the broker is away")
    headers, body = signed({"type": "project.created"}, tenant)
    unavailable = await intake.receive(PATH, headers, body)
    assert unavailable.status == 503 and "again" in unavailable.message
    assert store.sent == []
    assert counted.webhooks == ["bad_signature", "unknown_tenant", "unknown_key", "unavailable"]
