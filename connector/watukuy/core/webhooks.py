"""Webhooks wake tenants (CONTRACT.md, "Webhooks wake tenants"): what a vendor's webhook is,
whether its signature holds, whose it is and which keys it wakes. Pure: no I/O, ``now`` passed
in; the REST layer serves the route and writes the wakes as command records.

A webhook's body is never published, stored or logged: nothing here keeps it or puts any of it
into an error; a spec's secrets stay out of its ``repr``.

Signatures (all compared with :func:`hmac.compare_digest`):

- ``hmac``: HMAC-SHA256 of the raw body, hex or base64, after an optional prefix, in one header.
  GitHub's form is ``X-Hub-Signature-256: sha256=<hex>`` ("Validating webhook deliveries",
  https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries); Shopify's
  is base64 without a prefix.
- ``stripe``: ``Stripe-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>...]``, the hex being
  HMAC-SHA256 of ``"<t>.<raw body>"`` under the endpoint's secret; any ``v1`` may match (Stripe
  sends several while a secret is rolled), other schemes (``v0``) are ignored, and ``t`` must be
  within the tolerance of now, against replays ("Verify signatures manually",
  https://docs.stripe.com/webhooks#verify-manually).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from watukuy.core.keys import key_part
from watukuy.core.paths import MISSING, Path

__all__ = [
    "Encoding",
    "Hmac",
    "KeyTemplate",
    "NoVerify",
    "Rule",
    "Stripe",
    "TenantPlace",
    "Verify",
    "Wake",
    "WebhookSpec",
    "When",
    "header_value",
    "secret_of",
    "signature_holds",
    "tenant_of",
    "verify_hmac",
    "verify_stripe",
    "wakes",
]

Encoding = Literal["hex", "base64"]


@dataclass(frozen=True, slots=True)
class Hmac:
    """HMAC-SHA256 of the raw body in ``header``: ``prefix`` then the digest in ``encoding``.
    The key is ``secret`` or, per tenant, the tenant's partition data at ``secret_from``."""

    header: str
    secret: bytes | None = field(default=None, repr=False)
    secret_from: Path | None = None
    encoding: Encoding = "hex"
    prefix: str = ""


@dataclass(frozen=True, slots=True)
class Stripe:
    """Stripe's timestamped scheme (module docstring); ``tolerance`` in seconds."""

    secret: bytes | None = field(default=None, repr=False)
    secret_from: Path | None = None
    header: str = "Stripe-Signature"
    tolerance: float = 300.0


@dataclass(frozen=True, slots=True)
class NoVerify:
    """``verify: none``, written out: unsigned webhooks are accepted."""


Verify = Hmac | Stripe | NoVerify


@dataclass(frozen=True, slots=True)
class TenantPlace:
    """Where a webhook names its tenant: a request header, or a path in the JSON body."""

    header: str | None = None
    path: Path | None = None


@dataclass(frozen=True, slots=True)
class When:
    """A rule's condition: the string at ``path`` in the body fully matches ``matches``."""

    path: Path
    matches: re.Pattern[str]

    def holds(self, body: Any) -> bool:
        found = self.path.find(body)
        return isinstance(found, str) and self.matches.fullmatch(found) is not None


@dataclass(frozen=True, slots=True)
class KeyTemplate:
    """``text`` as written (``"{body.issue.project_id}"``): literal parts and body paths. Each
    value read must be a safe key part (:func:`~watukuy.core.keys.key_part`)."""

    text: str
    parts: tuple[str | Path, ...]

    def render(self, body: Any) -> str | None:
        """The rendered key, or ``None`` when a path is missing or its value cannot be part of
        a key (not text or an integer, empty, holding ``/``)."""
        out: list[str] = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
                continue
            text = key_part(part.find(body))  # MISSING and None are no key part
            if text is None:
                return None
            out.append(text)
        return "".join(out)


@dataclass(frozen=True, slots=True)
class Rule:
    """``{when, stream, key}``: a payload the rule matches wakes ``stream`` (``None``: the
    poller itself) for the tenant, or for ``<tenant>/<key>`` when ``key`` is set (a child
    stream's partition)."""

    stream: str | None
    when: When | None = None
    key: KeyTemplate | None = None


@dataclass(frozen=True, slots=True)
class WebhookSpec:
    """A connector's (or a poller's) ``webhook`` block, parsed. ``tenant`` is ``None`` for a
    poller without partitions (its one partition is ``''``)."""

    path: str
    verify: Verify
    tenant: TenantPlace | None = None
    rules: tuple[Rule, ...] = ()

    @property
    def needs_tenant_data(self) -> bool:
        """Whether verifying needs the tenant's partition data (``secret_from``): then the
        tenant is found first, from the unverified request."""
        return isinstance(self.verify, Hmac | Stripe) and self.verify.secret_from is not None


@dataclass(frozen=True, slots=True)
class Wake:
    """One key to wake: ``stream`` of the connector (``None``: a poller on its own)."""

    stream: str | None
    partition: str


# -- signatures -------------------------------------------------------------------------------


def verify_hmac(
    secret: bytes, body: bytes, given: str | None, *, encoding: Encoding, prefix: str = ""
) -> bool:
    """Whether ``given`` (the header's value) is ``prefix`` and the HMAC-SHA256 of ``body``
    under ``secret`` in ``encoding``. Hex is compared in lower case, base64 as sent."""
    if given is None or not given.startswith(prefix):
        return False
    sent = given[len(prefix) :].strip()
    digest = hmac.new(secret, body, hashlib.sha256).digest()
    if encoding == "hex":
        return hmac.compare_digest(_ascii(sent.lower()), digest.hex().encode())
    return hmac.compare_digest(_ascii(sent), base64.b64encode(digest))


def verify_stripe(
    secret: bytes, body: bytes, given: str | None, *, now: float, tolerance: float
) -> bool:
    """Whether ``given`` (``t=...,v1=...``) signs ``body`` under ``secret`` at a time within
    ``tolerance`` seconds of ``now``; several ``v1`` entries: any one may match."""
    if given is None:
        return False
    stamp: int | None = None
    signatures: list[bytes] = []
    for item in given.split(","):
        name, equals, value = item.strip().partition("=")
        if not equals:
            continue
        if name == "t":
            stamp = _int(value)
        elif name == "v1":
            signatures.append(_ascii(value.strip().lower()))
    if stamp is None or not signatures or abs(now - stamp) > tolerance:
        return False
    signed = str(stamp).encode() + b"." + body
    expected = hmac.new(secret, signed, hashlib.sha256).hexdigest().encode()
    matched = False
    for signature in signatures:  # every one compared, so the time does not say which matched
        matched |= hmac.compare_digest(signature, expected)
    return matched


def signature_holds(
    verify: Verify, headers: Mapping[str, str], body: bytes, *, now: float, secret: bytes | None
) -> bool:
    """The check ``verify`` asks for, on the raw ``body``; ``secret`` is the key to use
    (:func:`secret_of`): ``None`` (a tenant without one) never verifies."""
    if isinstance(verify, NoVerify):
        return True
    if secret is None:
        return False
    given = header_value(headers, verify.header)
    if isinstance(verify, Hmac):
        return verify_hmac(secret, body, given, encoding=verify.encoding, prefix=verify.prefix)
    return verify_stripe(secret, body, given, now=now, tolerance=verify.tolerance)


def secret_of(verify: Verify, data: Any = None) -> bytes | None:
    """The key of ``verify``: its own, or the tenant's partition ``data`` at ``secret_from``
    (``None`` when the tenant has none there, or for ``verify: none``)."""
    if isinstance(verify, NoVerify):
        return None
    if verify.secret_from is None:
        return verify.secret
    found = verify.secret_from.find(data)
    if isinstance(found, bytes):
        return found or None
    return found.encode() if isinstance(found, str) and found else None


def header_value(headers: Mapping[str, str], name: str) -> str | None:
    """A header by name, in any case (aiohttp's headers are case-insensitive; a plain dict
    may not be)."""
    found = headers.get(name)
    if found is not None:
        return found
    lowered = name.lower()
    return next((v for k, v in headers.items() if k.lower() == lowered), None)


# -- tenant and wakes -------------------------------------------------------------------------


def tenant_of(spec: WebhookSpec, headers: Mapping[str, str], body: Any) -> str | None:
    """The tenant (partition key) the webhook names; ``''`` for a poller without partitions;
    ``None`` when it names none usable (absent, empty, not text or an integer)."""
    place = spec.tenant
    if place is None:
        return ""
    raw: object = MISSING
    if place.header is not None:
        raw = header_value(headers, place.header)
    elif place.path is not None:
        raw = place.path.find(body)
    if isinstance(raw, bool) or not isinstance(raw, str | int):
        return None
    text = str(raw).strip()
    return text or None


def wakes(spec: WebhookSpec, tenant: str, body: Any, streams: Sequence[str]) -> list[Wake]:
    """The keys a webhook of ``tenant`` wakes. Without rules: every one of ``streams`` (the
    connector's streams whose partitions are the tenants' own keys; ``()`` for a poller on its
    own: the poller itself) for the tenant. With rules: the first that matches decides (a rule
    without ``when`` matches every payload); its ``key`` missing or unsafe in the body, or no
    rule matching, wakes nothing (the caller counts it ``unknown_key``)."""
    if not spec.rules:
        if not streams:
            return [Wake(None, tenant)]
        return [Wake(stream, tenant) for stream in streams]
    for rule in spec.rules:
        if rule.when is not None and not rule.when.holds(body):
            continue
        if rule.key is None:
            return [Wake(rule.stream, tenant)]
        rendered = rule.key.render(body)
        return [] if rendered is None else [Wake(rule.stream, f"{tenant}/{rendered}")]
    return []


def _ascii(text: str) -> bytes:
    """``text`` for :func:`hmac.compare_digest`, which takes ASCII-only ``str``: anything else
    is replaced, so it can only fail to match."""
    return text.encode("ascii", errors="replace")


_DIGITS = re.compile(r"[0-9]{1,15}")


def _int(text: str) -> int | None:
    """Unix seconds: digits alone (``int()`` would take ``+1``, `` 1_0``)."""
    return int(text) if _DIGITS.fullmatch(text.strip()) else None
