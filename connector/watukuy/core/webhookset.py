"""Where a connector's webhook lives once compiled, and the set of them the REST layer serves.

A parsed :class:`~watukuy.core.webhooks.WebhookSpec` rides on each of its connector's pollers
in ``Poller.extra["webhook"]`` (the same object on every stream of one connector), as a
stream's ``publish`` does: a config file's pollers and a REST connector's come from the same
compile, so both are found the same way, by :func:`hooks_of` over a list of pollers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from watukuy.core.errors import ConfigError
from watukuy.core.poller import Poller
from watukuy.core.webhooks import Wake, WebhookSpec, wakes

__all__ = [
    "EXTRA_KEY",
    "STREAM_KEY",
    "Hook",
    "hooks_by_path",
    "hooks_of",
    "webhook_of",
    "with_stream_webhook",
    "with_webhook",
]

EXTRA_KEY = "webhook"
STREAM_KEY = "stream_webhook"
"""A stream's own webhook (``streams[i].webhook``), which wakes that stream alone."""


def with_webhook(poller: Poller, spec: WebhookSpec) -> Poller:
    """``poller`` carrying ``spec`` (its connector's webhook)."""
    return replace(poller, extra={**poller.extra, EXTRA_KEY: spec})


def with_stream_webhook(poller: Poller, spec: WebhookSpec) -> Poller:
    """``poller`` (a stream) carrying its own webhook ``spec``."""
    return replace(poller, extra={**poller.extra, STREAM_KEY: spec})


def webhook_of(poller: Poller) -> WebhookSpec | None:
    """The webhook of ``poller``'s connector, if it has one."""
    found = poller.extra.get(EXTRA_KEY)
    return found if isinstance(found, WebhookSpec) else None


@dataclass(frozen=True, slots=True)
class Hook:
    """One connector's webhook: ``streams`` are the streams a payload without rules wakes
    (those whose partitions are tenants; ``()`` for a poller on its own)."""

    connector: str
    spec: WebhookSpec
    streams: tuple[str, ...] = ()

    def wakes(self, tenant: str, body: Any) -> list[Wake]:
        """:func:`~watukuy.core.webhooks.wakes` for this connector."""
        return wakes(self.spec, tenant, body, self.streams)

    def poller_of(self, wake: Wake) -> str:
        """The name of the poller ``wake`` is a key of (``<connector>.<stream>``)."""
        return self.connector if wake.stream is None else f"{self.connector}.{wake.stream}"


def hooks_of(pollers: Iterable[Poller]) -> list[Hook]:
    """Each connector's webhook among ``pollers``, in the order they come, then each stream's
    own."""
    pollers = list(pollers)
    found: dict[str, tuple[WebhookSpec, list[str]]] = {}
    for poller in pollers:
        spec = webhook_of(poller)
        if spec is None:
            continue
        of = poller.stream_of
        connector = poller.name if of is None else of.connector
        _, streams = found.setdefault(connector, (spec, []))
        if of is not None and poller.parent is None and not poller.fanout:
            streams.append(of.stream)
    hooks = [Hook(name, spec, tuple(streams)) for name, (spec, streams) in found.items()]
    return hooks + _stream_hooks(pollers)


def _stream_hooks(pollers: Iterable[Poller]) -> list[Hook]:
    """The streams' own webhooks: each wakes its stream (a child's, by its rules' keys)."""
    out: list[Hook] = []
    for poller in pollers:
        spec = poller.extra.get(STREAM_KEY)
        of = poller.stream_of
        if not isinstance(spec, WebhookSpec) or of is None:
            continue
        own = () if poller.parent is not None or poller.fanout else (of.stream,)
        out.append(Hook(of.connector, spec, own))
    return out


def hooks_by_path(pollers: Iterable[Poller]) -> dict[str, Hook]:
    """The webhooks of ``pollers`` by their route; two connectors with one path are a
    ``ConfigError`` at ``webhook.path``."""
    out: dict[str, Hook] = {}
    for hook in hooks_of(pollers):
        other = out.get(hook.spec.path)
        if other is not None:
            raise ConfigError(
                f"{hook.spec.path!r} is also connector {other.connector!r}'s webhook path",
                "webhook.path",
            )
        out[hook.spec.path] = hook
    return out
