"""Signed webhooks from the vendor simulator when a tenant's records change (issue 46).

Opt-in per tenant: :meth:`WebhookSender.subscribe` (or ``POST /_admin/webhooks``, see
:mod:`.webhooks_http`). The sender listens to the model (``VendorSimulator.listeners``), so
``vendor.py`` and ``tracker.py`` know nothing of HTTP, and every delivery runs in a task of
its own: a slow or dead receiver never holds up a write, a listing or the mutation loop.

The payload is partial, as vendors' often are (the poll stays the truth), one JSON object::

    {"id": "evt_000001", "type": "issue.updated", "created": 1750000000, "tenant": "t_0001",
     "issue": {"id": "is_00001", "project_id": "pr_0001"}}

``type`` is ``<noun>.<created|updated|deleted>`` (``item``, ``project``, ``issue``,
``comment``, ``user``); the object is under its noun, its ancestors as ``<noun>_id`` (a
comment has ``issue_id`` and ``project_id``); ``created`` is Unix seconds, as Stripe's.

Every POST carries ``Content-Type: application/json``, the tenant id in ``tenant_header``
(default ``X-Tenant``) and, by ``scheme``:

- ``hmac``, GitHub's: ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body>``,
  ``X-GitHub-Event: <type>``, ``X-GitHub-Delivery: <event id>`` and a ``GitHub-Hookshot/``
  user agent (docs.github.com/en/webhooks/webhook-events-and-payloads#delivery-headers,
  .../using-webhooks/validating-webhook-deliveries). No retry by default: "GitHub does not
  automatically redeliver failed deliveries" (.../using-webhooks/handling-failed-webhook-
  deliveries).
- ``stripe``: ``Stripe-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">``
  (docs.stripe.com/webhooks#verify-manually). Three retries by default, with exponential
  backoff (docs.stripe.com/webhooks#retries: days in live mode; here ``backoff`` seconds,
  doubling), each attempt signed afresh with a new ``t``, as Stripe does.

A retry follows a 5xx, a 429, a timeout (``timeout``, default 10 s: GitHub's limit for an
answer) or a connection error; any other answer is final (Stripe retries every non-2xx, but
resending the same body cannot mend a 4xx, and one attempt keeps a refused signature's test
exact). ``delay`` holds each delivery back that long and ``drop`` loses that share of them
unsent, for tests of late and lossy webhooks. Every attempt is recorded (:class:`Delivery`).
"""

from __future__ import annotations

import asyncio
import fnmatch
import hashlib
import hmac
import json
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

from aiohttp import ClientError, ClientSession, ClientTimeout

from .records import COLLECTIONS, Change, is_int, require

if TYPE_CHECKING:
    from .vendor import VendorSimulator

SCHEMES = ("hmac", "stripe")
_RETRIES = {"hmac": 0, "stripe": 3}  # GitHub does not redeliver; Stripe does, backing off
_USER_AGENTS = {
    "hmac": "GitHub-Hookshot/watukuy-simulator",
    "stripe": "Stripe/1.0 (+https://stripe.com/docs/webhooks; watukuy-simulator)",
}


@dataclass(frozen=True)
class Subscription:
    """Where one tenant's webhooks go and how they are signed, retried and mangled."""

    tenant: str
    url: str
    secret: str
    scheme: str = "hmac"
    tenant_header: str = "X-Tenant"
    retries: int | None = None  # None: the scheme's own (hmac 0, stripe 3)
    backoff: float = 0.5  # seconds before the first retry, doubling after each
    timeout: float = 10.0
    delay: float = 0.0
    drop: float = 0.0
    # Which types to send (fnmatch patterns), as a GitHub hook picks its events and a Stripe
    # endpoint its ``enabled_events`` (where ``["*"]`` is every one).
    events: tuple[str, ...] = ("*",)

    def __post_init__(self) -> None:
        if isinstance(self.events, list):  # from JSON
            object.__setattr__(self, "events", tuple(self.events))
        events_ok = isinstance(self.events, tuple) and len(self.events) > 0
        events_ok = events_ok and all(isinstance(e, str) and e for e in self.events)
        require(events_ok, "events: a non-empty list of type patterns (issue.*)")
        require(isinstance(self.tenant, str) and self.tenant != "", "tenant: a tenant id")
        url_ok = isinstance(self.url, str) and self.url.startswith(("http://", "https://"))
        require(url_ok, "url: an http(s) URL")
        require(isinstance(self.secret, str) and self.secret != "", "secret: a non-empty string")
        require(self.scheme in SCHEMES, f"scheme: one of {', '.join(SCHEMES)}")
        header_ok = isinstance(self.tenant_header, str) and self.tenant_header != ""
        require(header_ok, "tenant_header: a header name")
        retries_ok = self.retries is None or (is_int(self.retries) and self.retries >= 0)
        require(retries_ok, "retries: integer >= 0, or null for the scheme's own")
        require(_seconds(self.backoff) and self.backoff > 0, "backoff: seconds > 0")
        require(_seconds(self.timeout) and self.timeout > 0, "timeout: seconds > 0")
        require(_seconds(self.delay), "delay: seconds >= 0")
        require(_seconds(self.drop) and self.drop <= 1, "drop: a share between 0 and 1")

    def wants(self, event_type: str) -> bool:
        return any(fnmatch.fnmatchcase(event_type, pattern) for pattern in self.events)

    @property
    def attempts(self) -> int:
        return 1 + (_RETRIES[self.scheme] if self.retries is None else self.retries)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Subscription:
        """From an admin request body; unknown keys are refused rather than ignored."""
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        require(not unknown, f"unknown field(s): {', '.join(sorted(unknown))}")
        missing = {"tenant", "url", "secret"} - set(data)
        require(not missing, f"missing field(s): {', '.join(sorted(missing))}")
        return cls(**data)

    def to_json(self) -> dict[str, Any]:
        """Everything but the secret, with ``retries`` resolved."""
        shown = {k: v for k, v in asdict(self).items() if k != "secret"}
        return shown | {"retries": self.attempts - 1, "events": list(self.events)}


@dataclass(frozen=True)
class Delivery:
    """One attempt to deliver an event: ``status`` None when no answer came (``error`` says
    why: a connection error, ``TimeoutError``, or ``dropped`` by the ``drop`` fault)."""

    tenant: str
    event: str
    type: str
    attempt: int
    status: int | None
    error: str | None
    sent_at: float
    answered_at: float | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def payload(change: Change, event_id: str, created: float) -> dict[str, Any]:
    """The webhook body of one change (see the module's docstring)."""
    kind = COLLECTIONS[change.collection]
    ancestors: list[str] = []
    while kind.parent is not None:
        ancestors.insert(0, COLLECTIONS[kind.parent].noun)
        kind = COLLECTIONS[kind.parent]
    obj = {"id": change.record_id}
    obj |= {f"{noun}_id": id_ for noun, id_ in zip(ancestors, change.parents, strict=True)}
    noun = COLLECTIONS[change.collection].noun
    return {
        "id": event_id,
        "type": f"{noun}.{change.operation}",
        "created": int(created),
        "tenant": change.tenant_id,
        noun: obj,
    }


def signature(scheme: str, secret: str, body: bytes, now: float) -> dict[str, str]:
    """The signature header of ``body`` under ``scheme``; Stripe's signs ``now`` too."""
    key = secret.encode()
    if scheme == "stripe":
        stamp = str(int(now))
        mac = hmac.new(key, stamp.encode() + b"." + body, hashlib.sha256).hexdigest()
        return {"Stripe-Signature": f"t={stamp},v1={mac}"}
    return {"X-Hub-Signature-256": "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()}


class WebhookSender:
    """Sends each subscribed tenant's changes (a model listener: call it with a change).

    Deliveries start once :meth:`start` ran in the event loop (the app does it on startup);
    changes made before wait for it. At most ``concurrency`` POSTs are in flight at once;
    a delivery waiting out a backoff holds no slot.
    """

    def __init__(
        self, *, clock: Callable[[], float] = time.time, seed: int = 0, concurrency: int = 32
    ) -> None:
        self.subscriptions: dict[str, Subscription] = {}
        self.deliveries: list[Delivery] = []
        self._clock = clock  # wall time: a receiver checks Stripe's ``t`` against its own
        self._rng = random.Random(f"{seed}/webhooks")
        self._concurrency = concurrency
        self._slots: asyncio.Semaphore | None = None
        self._session: ClientSession | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._waiting: list[tuple[Subscription, dict[str, Any], bool]] = []
        self._events = 0

    def subscribe(self, subscription: Subscription) -> None:
        """Send the tenant's changes from now on (replacing its earlier subscription)."""
        self.subscriptions[subscription.tenant] = subscription

    def unsubscribe(self, tenant_id: str) -> bool:
        """Stop sending the tenant's changes; whether it was subscribed."""
        return self.subscriptions.pop(tenant_id, None) is not None

    def __call__(self, change: Change) -> None:
        subscription = self.subscriptions.get(change.tenant_id)
        if subscription is None:
            return
        event = payload(change, f"evt_{self._events + 1:06d}", self._clock())
        if not subscription.wants(event["type"]):
            return
        self._events += 1
        # Drawn here, in change order, so which events a seed drops does not hang on timing.
        dropped = subscription.drop > 0 and self._rng.random() < subscription.drop
        # Not started, or written from outside the loop: the next start sends it.
        if self._session is not None and _in_loop():
            self._spawn(subscription, event, dropped)
        else:
            self._waiting.append((subscription, event, dropped))

    async def start(self) -> None:
        if self._session is not None:
            return
        self._session = ClientSession()
        self._slots = asyncio.Semaphore(self._concurrency)
        waiting, self._waiting = self._waiting, []
        for subscription, event, dropped in waiting:
            self._spawn(subscription, event, dropped)

    async def stop(self) -> None:
        """Abandon the deliveries in flight and close the HTTP session."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def drain(self) -> None:
        """Wait until every delivery started so far (retries included) is finished."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def _spawn(self, subscription: Subscription, event: dict[str, Any], dropped: bool) -> None:
        task = asyncio.get_running_loop().create_task(self._deliver(subscription, event, dropped))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _deliver(self, sub: Subscription, event: dict[str, Any], dropped: bool) -> None:
        if sub.delay:
            await asyncio.sleep(sub.delay)
        if dropped:
            self._note(sub, event, 1, None, "dropped", (self._clock(), None))
            return
        body = json.dumps(event, separators=(",", ":")).encode()
        for attempt in range(1, sub.attempts + 1):
            if attempt > 1:
                await asyncio.sleep(sub.backoff * 2 ** (attempt - 2))
            if not await self._attempt(sub, event, body, attempt):
                return

    async def _attempt(
        self, sub: Subscription, event: dict[str, Any], body: bytes, attempt: int
    ) -> bool:
        """POST once; whether the answer (or its absence) calls for a retry."""
        assert self._session is not None and self._slots is not None
        status: int | None = None
        error: str | None = None
        async with self._slots:
            sent_at = self._clock()
            headers = _headers(sub, event) | signature(sub.scheme, sub.secret, body, sent_at)
            try:
                async with self._session.post(
                    sub.url,
                    data=body,
                    headers=headers,
                    timeout=ClientTimeout(total=sub.timeout),
                    allow_redirects=False,
                ) as response:
                    await response.read()
                    status = response.status
            except (ClientError, TimeoutError) as exc:
                error = type(exc).__name__
        answered_at = self._clock() if status is not None else None
        self._note(sub, event, attempt, status, error, (sent_at, answered_at))
        return status is None or status >= 500 or status == 429

    def _note(
        self,
        sub: Subscription,
        event: dict[str, Any],
        attempt: int,
        status: int | None,
        error: str | None,
        times: tuple[float, float | None],
    ) -> None:
        kind = event["type"]
        self.deliveries.append(
            Delivery(sub.tenant, event["id"], kind, attempt, status, error, *times)
        )


def _headers(sub: Subscription, event: dict[str, Any]) -> dict[str, str]:
    headers = {
        "Content-Type": "application/json",
        "User-Agent": _USER_AGENTS[sub.scheme],
        sub.tenant_header: sub.tenant,
    }
    if sub.scheme == "hmac":
        headers |= {"X-GitHub-Event": event["type"], "X-GitHub-Delivery": event["id"]}
    return headers


def attach(sim: VendorSimulator) -> WebhookSender:
    """The simulator's webhook sender, made and added to its listeners on first use: the app
    and a test asking for it get the same one."""
    for listener in sim.listeners:
        if isinstance(listener, WebhookSender):
            return listener
    sender = WebhookSender()
    sim.listeners.append(sender)
    return sender


def _in_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _seconds(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0
