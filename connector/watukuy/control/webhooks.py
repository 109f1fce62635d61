"""A vendor's webhook, answered: whose it is, whether it is signed, which keys it wakes, and the
wakes written to Kafka for the keys' owners (CONTRACT.md, "Webhooks wake tenants").

Every wake is a ``wake`` command record, even for a key held here: once the record is in
Kafka, the key's owner (this instance or another, now or after a crash) polls the key, so the
202 is answered only when every record is acked, and a 503 when Kafka does not take one (the
vendor sends it again). The poll stays the truth: the body is read for its tenant and keys
only, and is never published, stored or logged.

What is decided is pure (:mod:`watukuy.core.webhooks`); this module only looks things up and
awaits the store.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from watukuy.core import webhooks
from watukuy.core.commands import Command
from watukuy.core.observe import Observer
from watukuy.core.webhookset import Hook, hooks_of
from watukuy.engine.engine import Engine

__all__ = ["WebhookAnswer", "WebhookIntake", "engine_hooks"]

log = logging.getLogger("watukuy.webhooks")

SEND_TIMEOUT = 10.0
"""Seconds for Kafka to take a webhook's wakes before the vendor is told 503."""


@dataclass(frozen=True, slots=True)
class WebhookAnswer:
    status: int
    result: str
    """What ``watukuy_webhooks_total`` counts it as."""
    message: str = ""


class WebhookIntake:
    """Answers the webhooks of every connector that has one, by path."""

    def __init__(
        self,
        engine: Engine,
        hooks: Callable[[], Mapping[str, Hook]],
        *,
        now: Callable[[], float] | None = None,
    ) -> None:
        self._engine = engine
        self._hooks = hooks
        self._clock = now

    @property
    def _observer(self) -> Observer:
        return self._engine.observer

    def _now(self) -> float:
        return self._clock() if self._clock is not None else self._engine.clock.now()

    def paths(self) -> list[str]:
        return sorted(self._hooks())

    def handles(self, path: str) -> bool:
        return path in self._hooks()

    def refused(self, path: str, result: str) -> None:
        """Counts a webhook the route refused before reading it (its body over the limit)."""
        hook = self._hooks().get(path)
        if hook is not None:
            self._observer.webhook_received(hook.connector, result)

    async def receive(self, path: str, headers: Mapping[str, str], body: bytes) -> WebhookAnswer:
        hook = self._hooks().get(path)
        if hook is None:
            return WebhookAnswer(404, "unknown_path", f"no webhook at {path}")
        answer = await self._answer(hook, headers, body)
        self._observer.webhook_received(hook.connector, answer.result)
        return answer

    async def _answer(self, hook: Hook, headers: Mapping[str, str], body: bytes) -> WebhookAnswer:
        spec = hook.spec
        payload = _parsed(body)
        tenant = None if payload is _UNREADABLE else webhooks.tenant_of(spec, headers, payload)
        secret = webhooks.secret_of(spec.verify, self._data(hook, tenant))
        if not webhooks.signature_holds(spec.verify, headers, body, now=self._now(), secret=secret):
            return WebhookAnswer(401, "bad_signature", "the webhook's signature does not hold")
        if payload is _UNREADABLE:
            return WebhookAnswer(400, "bad_body", "the webhook's body is not JSON")
        if tenant is None or not self._known(hook, tenant):
            return WebhookAnswer(202, "unknown_tenant")
        wakes = [(hook.poller_of(wake), wake.partition) for wake in hook.wakes(tenant, payload)]
        wakes = [(poller, key) for poller, key in wakes if poller in self._engine.pollers]
        if not wakes:
            return WebhookAnswer(202, "unknown_key")
        try:
            async with asyncio.timeout(SEND_TIMEOUT):
                await self._send(wakes)
        except Exception as exc:  # the vendor retries a 503; nothing of the body is shown
            log.warning("%s: a webhook's wakes were not taken by Kafka: %s", hook.connector,
                        type(exc).__name__)  # fmt: skip
            return WebhookAnswer(503, "unavailable", "Kafka did not take the wake; send it again")
        return WebhookAnswer(202, "accepted")

    async def _send(self, wakes: list[tuple[str, str]]) -> None:
        now = self._now()
        commands = [Command.issue("wake", poller, key, {}, now) for poller, key in wakes]
        await asyncio.gather(*(self._engine.store.send_command(c) for c in commands))

    def _known(self, hook: Hook, tenant: str) -> bool:
        """Whether any of the hook's pollers lists ``tenant`` (``''``: a poller without
        partitions, which has just that key)."""
        for poller in _pollers(hook):
            definition = self._engine.pollers.get(poller)
            if definition is None:
                continue
            if not definition.partitioned:
                return tenant == ""
            if tenant in self._engine.listed(poller):
                return True
        return False

    def _data(self, hook: Hook, tenant: str | None) -> object:
        """The tenant's partition data, for a secret kept there (``secret_from``)."""
        if tenant is None or not hook.spec.needs_tenant_data:
            return None
        for poller in _pollers(hook):
            found = self._engine.partitions.listed(poller, tenant)
            if found is not None:
                return found.data
        return None


def _pollers(hook: Hook) -> list[str]:
    """The pollers whose keys are the hook's tenants' own."""
    return [f"{hook.connector}.{stream}" for stream in hook.streams] or [hook.connector]


def engine_hooks(engine: Engine) -> Callable[[], Mapping[str, Hook]]:
    """The webhooks of the pollers the engine runs now (the config file's and those added over
    REST), by path; worked out again only when its pollers change."""
    cache: dict[str, Any] = {"seen": None, "hooks": {}}

    def hooks() -> Mapping[str, Hook]:
        pollers = engine.pollers
        seen = tuple(map(id, pollers.values()))  # a poller redefined is a new object
        if cache["seen"] != seen:
            found: dict[str, Hook] = {}
            for hook in hooks_of(pollers.values()):
                found.setdefault(hook.spec.path, hook)  # a clash is refused where it is written
            cache.update(seen=seen, hooks=found)
        hooks_now: Mapping[str, Hook] = cache["hooks"]
        return hooks_now

    return hooks


_UNREADABLE = object()


def _parsed(body: bytes) -> object:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return _UNREADABLE
