"""The vendor simulator's webhooks (issue 46): a subscribed tenant's changes are POSTed,
signed as GitHub (``X-Hub-Signature-256``) or Stripe (``Stripe-Signature: t=,v1=``) sign
them, retried as the scheme's vendor retries, and every attempt recorded; nothing is sent for
a tenant that did not subscribe, and a slow receiver holds nothing up.

Signatures are checked here from the vendors' documentation, not with the simulator's code.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import pytest
from aiohttp import ClientSession, web

from integration.simulator import Change, TrackerSizes, VendorSimulator, running_simulator
from integration.simulator.__main__ import _parse, _subscribe_every_tenant
from integration.simulator.webhooks import WebhookSender, attach

pytestmark = pytest.mark.unit

SECRET = "whsec_test"


@dataclass
class Receiver:
    """A webhook endpoint: answers ``statuses`` in turn (then ``status``) after ``sleep``."""

    url: str = ""
    status: int = 200
    statuses: list[int] = field(default_factory=list)
    sleep: float = 0.0
    calls: list[tuple[dict[str, str], bytes, float]] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, request: web.Request) -> web.Response:
        self.calls.append((dict(request.headers), await request.read(), time.time()))
        self.arrived.set()
        if self.sleep:
            await asyncio.sleep(self.sleep)
        return web.Response(status=self.statuses.pop(0) if self.statuses else self.status)


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    found = Receiver()
    app = web.Application()
    app.router.add_post("/hook", found.handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    found.url = f"http://127.0.0.1:{runner.addresses[0][1]}/hook"
    try:
        yield found
    finally:
        await runner.cleanup()


@pytest.fixture
def sim() -> VendorSimulator:
    sizes = TrackerSizes(projects=2, issues_per_project=2, comments_per_issue=1, users=1)
    return VendorSimulator(tenants=2, items_per_tenant=2, seed=5, tracker=sizes)


@pytest.fixture
async def admin(sim: VendorSimulator) -> AsyncIterator[ClientSession]:
    async with running_simulator(sim) as base_url, ClientSession(base_url=base_url) as session:
        yield session


async def subscribe(admin: ClientSession, **body: Any) -> dict[str, Any]:
    async with admin.post("/_admin/webhooks", json={"secret": SECRET} | body) as resp:
        assert resp.status == 201, await resp.text()
        answer: dict[str, Any] = await resp.json()
        return answer


async def deliveries(admin: ClientSession, tenant: str | None = None) -> list[dict[str, Any]]:
    query = {"tenant": tenant} if tenant else {}
    async with admin.get("/_admin/webhooks", params=query) as resp:
        assert resp.status == 200
        found: list[dict[str, Any]] = (await resp.json())["deliveries"]
        return found


def first_issue(sim: VendorSimulator, tenant: str) -> dict[str, Any]:
    return sim.records(tenant, "issues")[0]


def github_signature(body: bytes, secret: str = SECRET) -> str:
    # docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def stripe_verifies(header: str, body: bytes, secret: str = SECRET) -> int:
    """The header's timestamp, once its v1 signature is checked (docs.stripe.com/webhooks)."""
    parts = dict(part.split("=", 1) for part in header.split(","))
    signed = parts["t"].encode() + b"." + body
    expected = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(parts["v1"], expected)
    return int(parts["t"])


async def test_a_change_sends_a_delivery_whose_github_signature_verifies(
    sim: VendorSimulator, admin: ClientSession, receiver: Receiver
) -> None:
    shown = await subscribe(admin, tenant="t_0001", url=receiver.url)
    assert shown["scheme"] == "hmac" and shown["retries"] == 0 and "secret" not in shown
    issue = first_issue(sim, "t_0001")
    async with admin.patch(f"/_admin/tenants/t_0001/issues/{issue['id']}", json={"x": 1}) as r:
        assert r.status == 200
    await attach(sim).drain()

    [(headers, body, _)] = receiver.calls
    assert headers["X-Hub-Signature-256"] == github_signature(body)
    assert headers["X-Hub-Signature-256"] != github_signature(body, "another secret")
    assert headers["X-Tenant"] == "t_0001" and headers["X-GitHub-Event"] == "issue.updated"
    assert headers["Content-Type"] == "application/json"
    sent = json.loads(body)
    assert headers["X-GitHub-Delivery"] == sent["id"]
    assert sent["type"] == "issue.updated" and sent["tenant"] == "t_0001"
    assert sent["issue"] == {"id": issue["id"], "project_id": issue["project"]}
    assert abs(sent["created"] - time.time()) < 5
    [delivery] = await deliveries(admin)
    assert delivery["tenant"] == "t_0001" and delivery["type"] == "issue.updated"
    assert (delivery["status"], delivery["attempt"], delivery["error"]) == (200, 1, None)
    assert delivery["event"] == sent["id"]
    assert delivery["sent_at"] <= delivery["answered_at"]


async def test_the_stripe_scheme_signs_a_timestamp_with_the_body(
    sim: VendorSimulator, admin: ClientSession, receiver: Receiver
) -> None:
    await subscribe(
        admin, tenant="t_0002", url=receiver.url, scheme="stripe", tenant_header="X-Account"
    )
    issue = first_issue(sim, "t_0002")
    comment = sim.create_record("t_0002", "comments", issue=issue["id"])
    await attach(sim).drain()

    [(headers, body, _)] = receiver.calls
    assert "X-Hub-Signature-256" not in headers and "X-Tenant" not in headers
    assert headers["X-Account"] == "t_0002"
    assert abs(stripe_verifies(headers["Stripe-Signature"], body) - time.time()) < 5
    with pytest.raises(AssertionError):
        stripe_verifies(headers["Stripe-Signature"], body, "another secret")
    sent = json.loads(body)
    assert sent["type"] == "comment.created"
    expected = {"id": comment["id"], "issue_id": issue["id"], "project_id": issue["project"]}
    assert sent["comment"] == expected


async def test_unsubscribed_tenants_send_nothing(
    sim: VendorSimulator, admin: ClientSession, receiver: Receiver
) -> None:
    sim.update_item("t_0001", "it_00001", amount=1.0)  # before any subscription
    await subscribe(admin, tenant="t_0001", url=receiver.url)
    sim.update_item("t_0002", "it_00001", amount=2.0)  # never subscribed
    sim.delete_record("t_0001", "issues", first_issue(sim, "t_0001")["id"])
    await attach(sim).drain()
    assert [json.loads(body)["type"] for _, body, _ in receiver.calls] == ["issue.deleted"]
    await subscribe(admin, tenant="t_0001", url=receiver.url, events=["project.*", "user.*"])
    sim.update_item("t_0001", "it_00001", amount=2.5)  # an event it did not ask for
    await attach(sim).drain()
    assert len(receiver.calls) == 1

    async with admin.delete("/_admin/webhooks/t_0001") as resp:
        assert resp.status == 204
    async with admin.delete("/_admin/webhooks/t_0001") as resp:
        assert resp.status == 404
    sim.update_item("t_0001", "it_00001", amount=3.0)
    await attach(sim).drain()
    assert len(receiver.calls) == 1
    assert [d["tenant"] for d in await deliveries(admin)] == ["t_0001"]
    assert await deliveries(admin, "t_0002") == []


async def test_a_receiver_answering_500_is_retried_with_backoff_then_given_up(
    sim: VendorSimulator, admin: ClientSession, receiver: Receiver
) -> None:
    receiver.status = 500
    await subscribe(
        admin, tenant="t_0001", url=receiver.url, scheme="stripe", retries=2, backoff=0.1
    )
    sim.update_item("t_0001", "it_00001", amount=1.0)
    await attach(sim).drain()

    assert len(receiver.calls) == 3
    for headers, body, _ in receiver.calls:  # each attempt is signed afresh
        stripe_verifies(headers["Stripe-Signature"], body)
    found = await deliveries(admin)
    assert [(d["attempt"], d["status"]) for d in found] == [(1, 500), (2, 500), (3, 500)]
    assert len({d["event"] for d in found}) == 1
    gaps = [later["sent_at"] - earlier["answered_at"] for earlier, later in pairwise(found)]
    assert gaps[0] >= 0.09 and gaps[1] >= 0.19  # the backoff doubles


async def test_retries_stop_at_a_success_and_github_style_never_retries(
    sim: VendorSimulator, admin: ClientSession, receiver: Receiver
) -> None:
    receiver.statuses = [503, 200, 500]
    await subscribe(admin, tenant="t_0001", url=receiver.url, scheme="stripe", backoff=0.01)
    sim.update_item("t_0001", "it_00001", amount=1.0)
    await attach(sim).drain()
    await subscribe(admin, tenant="t_0001", url=receiver.url)  # hmac: GitHub does not retry
    sim.update_item("t_0001", "it_00001", amount=2.0)
    await attach(sim).drain()
    found = [(d["attempt"], d["status"]) for d in await deliveries(admin)]
    assert found == [(1, 503), (2, 200), (1, 500)]


async def test_connection_errors_are_retried_and_recorded(
    sim: VendorSimulator, admin: ClientSession
) -> None:
    await subscribe(admin, tenant="t_0001", url="http://127.0.0.1:9/hook", retries=1, backoff=0.01)
    sim.update_item("t_0001", "it_00001", amount=1.0)
    await attach(sim).drain()
    found = await deliveries(admin)
    assert [(d["attempt"], d["status"], d["answered_at"]) for d in found] == [
        (1, None, None),
        (2, None, None),
    ]
    assert all(d["error"] for d in found)


async def test_a_slow_receiver_does_not_block_the_mutation_loop(
    sim: VendorSimulator, admin: ClientSession, receiver: Receiver
) -> None:
    receiver.sleep = 1.0
    for tenant in ("t_0001", "t_0002"):
        await subscribe(admin, tenant=tenant, url=receiver.url)
    started = time.monotonic()
    changes = [sim.mutate_tracker_randomly() for _ in range(20)]
    async with admin.get("/tenants") as resp:  # the vendor API answers meanwhile
        assert resp.status == 200
    assert time.monotonic() - started < 0.4
    async with asyncio.timeout(0.8):
        while len(receiver.calls) < 20:
            receiver.arrived.clear()
            await receiver.arrived.wait()
    assert len(receiver.calls) == 20 and await deliveries(admin) == []  # all still in flight
    await attach(sim).drain()
    assert len(await deliveries(admin)) == len([c for c in changes if c is not None]) == 20
    assert time.monotonic() - started < 3.0  # sent side by side, not one after another


async def test_drop_loses_deliveries_and_delay_holds_them_back(
    sim: VendorSimulator, admin: ClientSession, receiver: Receiver
) -> None:
    await subscribe(admin, tenant="t_0001", url=receiver.url, drop=1.0)
    await subscribe(admin, tenant="t_0002", url=receiver.url, delay=0.3)
    changed_at = time.time()
    sim.update_item("t_0001", "it_00001", amount=1.0)
    sim.update_item("t_0002", "it_00001", amount=1.0)
    await attach(sim).drain()
    [(headers, _, arrived)] = receiver.calls
    assert headers["X-Tenant"] == "t_0002" and arrived - changed_at >= 0.29
    dropped = await deliveries(admin, "t_0001")
    assert [(d["status"], d["error"]) for d in dropped] == [(None, "dropped")]


async def test_the_admin_api_refuses_bad_subscriptions(admin: ClientSession) -> None:
    good = {"tenant": "t_0001", "url": "http://127.0.0.1:1/", "secret": "s"}
    for body, status in [
        (good | {"tenant": "t_9999"}, 404),
        (good | {"scheme": "md5"}, 400),
        (good | {"url": "ftp://x"}, 400),
        ({k: v for k, v in good.items() if k != "secret"}, 400),
        (good | {"colour": "red"}, 400),
        (good | {"drop": 2}, 400),
        (good | {"events": []}, 400),
        ([good], 400),
    ]:
        async with admin.post("/_admin/webhooks", json=body) as resp:
            assert resp.status == status, (body, await resp.text())
    async with admin.get("/_admin/webhooks") as resp:
        assert (await resp.json())["subscriptions"] == []


def test_changes_tell_listeners_the_record_and_its_lineage(sim: VendorSimulator) -> None:
    heard: list[Change] = []
    sim.listeners.append(heard.append)
    issue = first_issue(sim, "t_0001")
    comment = sim.create_record("t_0001", "comments", issue=issue["id"])
    sim.update_record("t_0001", "projects", issue["project"], archived=True)
    sim.delete_record("t_0001", "issues", issue["id"])  # its comments go with it, unannounced
    assert heard == [
        Change("created", "t_0001", "comments", comment["id"], (issue["project"], issue["id"])),
        Change("updated", "t_0001", "projects", issue["project"], ()),
        Change("deleted", "t_0001", "issues", issue["id"], (issue["project"],)),
    ]


def test_the_command_line_subscribes_every_tenant(sim: VendorSimulator) -> None:
    _subscribe_every_tenant(sim, _parse([]))
    assert attach(sim).subscriptions == {}  # off unless asked for
    flags = ["--webhook-url", "http://h/w", "--webhook-secret", "s", "--webhook-scheme", "stripe"]
    _subscribe_every_tenant(sim, _parse([*flags, "--webhook-events", "issue.*,comment.*"]))
    subscriptions = attach(sim).subscriptions
    assert sorted(subscriptions) == [tenant.id for tenant in sim.tenants]
    assert {(s.url, s.secret, s.scheme, s.events) for s in subscriptions.values()} == {
        ("http://h/w", "s", "stripe", ("issue.*", "comment.*"))
    }
    assert isinstance(sim.listeners[0], WebhookSender) and len(sim.listeners) == 1
    with pytest.raises(SystemExit):
        _parse(["--webhook-url", "http://h/w"])  # a URL without a secret
