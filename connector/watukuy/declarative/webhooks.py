"""``webhook:`` on a connector entry or a poller on its own (CONTRACT.md, "Webhooks wake
tenants"), parsed once at load into a :class:`~watukuy.core.webhooks.WebhookSpec`; every bad
field is a ``ConfigError`` naming its path. Its keys are in :mod:`watukuy.options.webhookkeys`.

A secret's value never appears in an error (it is resolved from ``${env:...}`` by then).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from watukuy.core.errors import ConfigError
from watukuy.core.paths import Path, parse_path
from watukuy.core.poller import Poller
from watukuy.core.validation import check_keys, kind
from watukuy.core.webhooks import (
    Hmac,
    KeyTemplate,
    NoVerify,
    Rule,
    Stripe,
    TenantPlace,
    Verify,
    WebhookSpec,
    When,
)
from watukuy.core.webhookset import with_stream_webhook, with_webhook
from watukuy.declarative.values import choice, duration, one_of, parse_kind, section
from watukuy.options.declarative import default_of

__all__ = ["RESERVED_ROUTES", "attach_webhook", "parse_webhook"]

RESERVED_ROUTES = ("/connector", "/admin", "/health", "/metrics", "/openapi")
"""Prefixes of REST's own routes (``/connectors``, ``/connector-plugins``, ``/admin/loggers``,
``/health``, ``/healthz``, ``/metrics``, ``/openapi.json``): no webhook path starts with one."""

_ROUTE = re.compile(r"(/[A-Za-z0-9._~-]+)+")
_SECRET_FROM = re.compile(r"\{partition\.data\.(.+)\}")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


def parse_webhook(
    raw: object,
    path: str,
    where: str,
    streams: Sequence[str],
    *,
    children: Collection[str] = (),
    partitioned: bool = True,
) -> WebhookSpec:
    """The ``webhook`` block ``raw`` (key-table path ``path``, config path ``where``).

    ``streams``: the connector's stream names (``()``: a poller on its own, which takes no
    rules); ``children``: those whose partitions are ``<tenant>/...`` (child and fan-out
    streams: a rule naming one needs a ``key``, and only those take one); ``partitioned``:
    the connector has ``partitions`` (then ``tenant`` is required, else refused)."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"must be a mapping, got {kind(raw)}", where)
    if raw.get("verify") is None:
        raise ConfigError(
            "required; write verify: none to accept unsigned webhooks", f"{where}.verify"
        )
    given = section(raw, path, where)
    route = _route(given["path"], f"{where}.path")
    verify = _verify(given["verify"], f"{path}.verify", f"{where}.verify", partitioned)
    tenant = _tenant(given.get("tenant"), f"{path}.tenant", f"{where}.tenant", partitioned)
    rules = _rules(given.get("streams"), f"{where}.streams", streams, children)
    return WebhookSpec(route, verify, tenant, rules)


def attach_webhook(pollers: list[Poller], entry: Mapping[str, Any], where: str) -> list[Poller]:
    """The pollers compiled from ``entry`` (one, or one per stream), each carrying the
    entry's ``webhook`` (one spec for every stream; see :mod:`watukuy.core.webhookset`)."""
    raw = entry.get("webhook")
    if raw is None:
        return pollers
    streams = [p.stream_of.stream for p in pollers if p.stream_of is not None]
    below = [  # child and fan-out streams: their partitions are <tenant>/...
        p.stream_of.stream
        for p in pollers
        if p.stream_of is not None and (p.parent is not None or p.fanout)
    ]
    if not streams and any(p.fanout for p in pollers):
        raise ConfigError(
            "a fan-out poller's keys are <tenant>/<value>: make it a stream of a connector, "
            "whose webhook rules say which key to wake",
            f"{where}.webhook",
        )
    partitioned = entry.get("partitions") is not None
    spec = parse_webhook(
        raw, "webhook", f"{where}.webhook", streams, children=below, partitioned=partitioned
    )
    return [with_webhook(poller, spec) for poller in pollers]


def attach_stream_webhooks(
    pollers: list[Poller], streams: Mapping[str, tuple[Any, str]], *, partitioned: bool
) -> list[Poller]:
    """Each stream's own ``webhook`` (``streams``: each stream's entry and config path, by
    name): it wakes that stream alone, its tenant's key, or with a rule's ``key`` a child's."""
    out: list[Poller] = []
    for poller in pollers:
        of = poller.stream_of
        entry, at = streams.get(of.stream, ({}, "")) if of is not None else ({}, "")
        raw = entry.get("webhook") if isinstance(entry, Mapping) else None
        if of is None or raw is None:
            out.append(poller)
            continue
        below = poller.parent is not None or poller.fanout
        spec = parse_webhook(
            raw,
            "webhook",
            f"{at}.webhook",
            [of.stream],
            children=[of.stream] if below else (),
            partitioned=partitioned,
        )
        if below and not spec.rules:
            raise ConfigError(
                "a child stream's keys are <tenant>/...: give a rule with the key it wakes, "
                f"as streams: [{{stream: {of.stream}, key: '{{body.PATH}}'}}]",
                f"{at}.webhook.streams",
            )
        out.append(with_stream_webhook(poller, spec))
    return out


def _route(raw: object, where: str) -> str:
    if not isinstance(raw, str) or _ROUTE.fullmatch(raw) is None:
        shown = repr(raw) if isinstance(raw, str) else kind(raw)
        raise ConfigError(
            f"must be a path starting with '/' of letters, digits, '.', '_', '~', '-' "
            f"(e.g. /webhooks/tracker), got {shown}",
            where,
        )
    if raw.startswith(RESERVED_ROUTES):
        raise ConfigError(
            f"{raw!r} collides with REST's own routes (/connectors..., /admin..., /health, "
            "/metrics, /openapi.json): choose another, e.g. /webhooks/<connector>",
            where,
        )
    return raw


# -- verify -----------------------------------------------------------------------------------


def _verify(raw: object, path: str, where: str, partitioned: bool) -> Verify:
    if raw == "none":
        return NoVerify()
    if isinstance(raw, str):
        raise ConfigError(f"must be a mapping (hmac or stripe) or none, got {raw!r}", where)

    beside = raw.get("secret_from") if isinstance(raw, Mapping) else None

    def with_beside(given: object) -> object:
        """A ``secret_from`` beside the kind is the kind's, as if written inside it."""
        if beside is None or not isinstance(given, Mapping):
            return given
        if "secret" in given or "secret_from" in given:
            raise ConfigError("set secret or secret_from, not both", f"{where}.secret_from")
        return {**given, "secret_from": beside}

    def hmac_kind(given: object, at_path: str, at: str) -> Verify:
        return _hmac(with_beside(given), at_path, at, partitioned)

    def stripe_kind(given: object, at_path: str, at: str) -> Verify:
        return _stripe(with_beside(given), at_path, at, partitioned)

    return parse_kind(raw, path, where, {"hmac": hmac_kind, "stripe": stripe_kind})


def _hmac(raw: object, path: str, where: str, partitioned: bool) -> Hmac:
    given = section(raw, path, where)
    secret, secret_from = _secret(given, where, partitioned)
    encoding = choice(given.get("encoding"), f"{where}.encoding", f"{path}.encoding", _ENCODINGS)
    prefix = given.get("prefix", default_of(f"{path}.prefix"))
    if not isinstance(prefix, str):
        raise ConfigError(f"must be text (e.g. 'sha256='), got {kind(prefix)}", f"{where}.prefix")
    header = _header(given["header"], f"{where}.header")
    return Hmac(header, secret, secret_from, "hex" if encoding == "hex" else "base64", prefix)


_ENCODINGS = ("hex", "base64")


def _stripe(raw: object, path: str, where: str, partitioned: bool) -> Stripe:
    given = section(raw, path, where)
    secret, secret_from = _secret(given, where, partitioned)
    header = _header(given.get("header", default_of(f"{path}.header")), f"{where}.header")
    tolerance = duration(
        given.get("tolerance", default_of(f"{path}.tolerance")), f"{where}.tolerance"
    )
    return Stripe(secret, secret_from, header, tolerance)


def _secret(
    given: Mapping[str, Any], where: str, partitioned: bool
) -> tuple[bytes | None, Path | None]:
    """``secret`` (its value never shown) or ``secret_from``: exactly one."""
    if "secret" in given and "secret_from" in given:
        raise ConfigError("set secret or secret_from, not both", f"{where}.secret_from")
    if "secret_from" in given:
        return None, _secret_from(given["secret_from"], f"{where}.secret_from", partitioned)
    if "secret" not in given:
        raise ConfigError(
            'required (a ${env:...} reference), or secret_from: "{partition.data.NAME}"',
            f"{where}.secret",
        )
    secret = given["secret"]
    if not isinstance(secret, str) or not secret:
        raise ConfigError(f"must be a non-empty string, got {kind(secret)}", f"{where}.secret")
    return secret.encode(), None


def _secret_from(raw: object, where: str, partitioned: bool) -> Path:
    found = _SECRET_FROM.fullmatch(raw) if isinstance(raw, str) else None
    if found is None:
        shown = repr(raw) if isinstance(raw, str) else kind(raw)
        raise ConfigError(f'must be "{{partition.data.NAME}}", got {shown}', where)
    if not partitioned:
        raise ConfigError("reads partition data: needs partitions", where)
    return parse_path(found.group(1), where)


def _header(raw: object, where: str) -> str:
    if not isinstance(raw, str) or not raw.strip() or ":" in raw:
        shown = repr(raw) if isinstance(raw, str) else kind(raw)
        raise ConfigError(f"must be a header name (e.g. X-Signature), got {shown}", where)
    return raw.strip()


# -- tenant and rules -------------------------------------------------------------------------


def _tenant(raw: object, path: str, where: str, partitioned: bool) -> TenantPlace | None:
    if raw is None:
        if partitioned:
            raise ConfigError(
                "required with partitions: {header: X-Tenant} or {path: account.id}", where
            )
        return None
    if not partitioned:
        raise ConfigError("without partitions the one partition '' is woken: remove it", where)
    place, value = one_of(raw, path, where)
    if place == "header":
        return TenantPlace(header=_header(value, f"{where}.header"))
    return TenantPlace(path=parse_path(value, f"{where}.path"))


def _rules(
    raw: object, where: str, streams: Sequence[str], children: Collection[str]
) -> tuple[Rule, ...]:
    if raw is None:
        return ()
    if not streams:
        raise ConfigError("only a connector with streams chooses among them: remove it", where)
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"must be a non-empty list of rules, got {kind(raw)}", where)
    return tuple(_rule(rule, f"{where}[{i}]", streams, children) for i, rule in enumerate(raw))


def _rule(raw: object, where: str, streams: Sequence[str], children: Collection[str]) -> Rule:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"must be a mapping {{when, stream, key}}, got {kind(raw)}", where)
    check_keys(raw, ("when", "stream", "key"), where)
    stream = raw.get("stream")
    if stream not in streams:
        shown = repr(stream) if isinstance(stream, str) else kind(stream)
        raise ConfigError(
            f"must name a stream of the connector ({', '.join(streams)}), got {shown}",
            f"{where}.stream",
        )
    assert isinstance(stream, str)
    when = None if raw.get("when") is None else _when(raw["when"], f"{where}.when")
    key = None if raw.get("key") is None else _key(raw["key"], f"{where}.key")
    if key is None and stream in children:
        raise ConfigError(
            f"stream {stream!r}'s partitions are <tenant>/<key>: set key: "
            '"{body.PATH}" to say which one',
            f"{where}.key",
        )
    if key is not None and stream not in children:
        raise ConfigError(
            f"stream {stream!r}'s partitions are the tenants: only a child or fan-out "
            "stream takes a key",
            f"{where}.key",
        )
    return Rule(stream, when, key)


def _when(raw: object, where: str) -> When:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"must be a mapping {{path, matches}}, got {kind(raw)}", where)
    check_keys(raw, ("path", "matches"), where)
    for name in ("path", "matches"):
        if name not in raw:
            raise ConfigError("is required", f"{where}.{name}")
    pattern = raw["matches"]
    if not isinstance(pattern, str):
        raise ConfigError(f"must be a regex, got {kind(pattern)}", f"{where}.matches")
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise ConfigError(f"invalid regex: {exc}", f"{where}.matches") from None
    return When(parse_path(raw["path"], f"{where}.path"), compiled)


def _key(raw: object, where: str) -> KeyTemplate:
    """``{body.PATH}`` placeholders and literal text (no other braces)."""
    if not isinstance(raw, str):
        raise ConfigError(f'must be text like "{{body.issue.id}}", got {kind(raw)}', where)
    parts: list[str | Path] = []
    at = 0
    for found in _PLACEHOLDER.finditer(raw):
        parts.append(_literal(raw[at : found.start()], raw, where))
        name = found.group(1).strip()
        if not name.startswith("body."):
            raise ConfigError(f"unknown placeholder {found.group(0)!r}: only {{body.PATH}}", where)
        parts.append(parse_path(name[len("body.") :], where))
        at = found.end()
    parts.append(_literal(raw[at:], raw, where))
    if not any(isinstance(part, Path) for part in parts):
        raise ConfigError(f'must read the body, e.g. "{{body.issue.id}}", got {raw!r}', where)
    return KeyTemplate(raw, tuple(part for part in parts if part != ""))


def _literal(text: str, raw: str, where: str) -> str:
    if "{" in text or "}" in text:
        raise ConfigError(f"unbalanced brace in {raw!r}", where)
    return text
