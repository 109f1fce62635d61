"""The webhook sender (:mod:`.webhooks`) over the admin API, and its life in the app.

Admin API (test control; not counted; ids are tenant ids):

- ``POST /_admin/webhooks`` ``{"tenant", "url", "secret", "scheme"?, "tenant_header"?,
  "retries"?, "backoff"?, "timeout"?, "delay"?, "drop"?, "events"?}`` (see
  :class:`~.webhooks.Subscription`) → 201, the subscription without its secret (``retries``
  resolved); subscribing again replaces it. An unknown tenant is a 404, a bad or unknown
  field a 400.
- ``DELETE /_admin/webhooks/{tenant_id}``: 204; 404 when it was not subscribed.
- ``GET /_admin/webhooks?tenant=``: ``{"subscriptions": [...], "deliveries": [{"tenant",
  "event", "type", "attempt", "status", "error", "sent_at", "answered_at"}]}``, every
  attempt in the order made (one tenant's with ``?tenant=``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .records import NotFound
from .webhooks import Subscription, WebhookSender, attach

if TYPE_CHECKING:
    from .vendor import VendorSimulator

__all__ = ["install"]


def install(app: web.Application, sim: VendorSimulator) -> None:
    """Serve the admin routes, and run the simulator's sender while the app runs."""
    sender = attach(sim)
    http = _WebhooksHttp(sim, sender)
    app.router.add_post("/_admin/webhooks", http.subscribe)
    app.router.add_delete("/_admin/webhooks/{tenant_id}", http.unsubscribe)
    app.router.add_get("/_admin/webhooks", http.listing)

    async def start(_: web.Application) -> None:
        await sender.start()

    async def stop(_: web.Application) -> None:
        await sender.stop()

    app.on_startup.append(start)
    app.on_cleanup.append(stop)


class _WebhooksHttp:
    def __init__(self, sim: VendorSimulator, sender: WebhookSender) -> None:
        self._sim = sim
        self._sender = sender

    async def subscribe(self, request: web.Request) -> web.Response:
        subscription = Subscription.from_json(await _json_object(request))
        self._sim.tenant(subscription.tenant)  # NotFound: 404
        self._sender.subscribe(subscription)
        return web.json_response(subscription.to_json(), status=201)

    async def unsubscribe(self, request: web.Request) -> web.Response:
        tenant_id = request.match_info["tenant_id"]
        if not self._sender.unsubscribe(tenant_id):
            raise NotFound(f"tenant {tenant_id!r} has no webhook subscription")
        return web.Response(status=204)

    async def listing(self, request: web.Request) -> web.Response:
        tenant_id = request.query.get("tenant")
        subscriptions = [
            sub.to_json()
            for sub in self._sender.subscriptions.values()
            if tenant_id is None or sub.tenant == tenant_id
        ]
        deliveries = [
            delivery.to_json()
            for delivery in self._sender.deliveries
            if tenant_id is None or delivery.tenant == tenant_id
        ]
        return web.json_response({"subscriptions": subscriptions, "deliveries": deliveries})


async def _json_object(request: web.Request) -> dict[str, Any]:
    """The body as a JSON object; anything else is a ValueError (the app answers 400)."""
    try:
        body = json.loads(await request.text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise ValueError("body must be a JSON object")
    return body
