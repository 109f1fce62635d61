"""The runner config's ``credentials`` section, and the credential store it makes.

```yaml
credentials:
  store: kafka                            # or {http: {url, method, auth: {bearer}, headers}}
  key: "${env:WATUKUY_CREDENTIALS_KEY}"   # or keys: [new, old]
  lost_after: 60s
```

The key(s) and the HTTP store's ``auth`` and ``headers`` are secrets whether or not they came
from a ``${...}`` reference: ``repr`` and :meth:`CredentialSettings.describe` never show them,
and no error names their values. :func:`credential_store` builds the store the runner uses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from watukuy.core.durations import format_duration, parse_duration
from watukuy.core.errors import ConfigError
from watukuy.core.validation import check_keys, join, kind, section
from watukuy.options.secrets import REDACTED, Secrets
from watukuy.store.credentials import CredentialStore
from watukuy.store.credentials.cipher import Cipher, parse_keys
from watukuy.store.credentials.http import HttpCredentials, check_url
from watukuy.store.credentials.memory import MemoryCredentials
from watukuy.store.kafka.credentials import KafkaCredentials
from watukuy.store.kafka.factory import ClientFactory
from watukuy.store.kafka.topics import TopicLayout

__all__ = [
    "CREDENTIALS_KEYS",
    "HTTP_AUTH_KEYS",
    "HTTP_KEYS",
    "CredentialSettings",
    "HttpStoreSettings",
    "credential_store",
    "parse_credentials",
]

CREDENTIALS_KEYS = ("store", "key", "keys", "lost_after")
HTTP_KEYS = ("url", "method", "auth", "headers")
HTTP_AUTH_KEYS = ("bearer",)
METHODS = ("PUT", "POST", "PATCH")
_HTTP = "credentials.store.http"


@dataclass(frozen=True, slots=True, repr=False)
class HttpStoreSettings:
    """``credentials.store.http``: the user's endpoint. ``shown_url`` is the URL as it may be
    printed (its ``${...}`` references unresolved)."""

    url: str
    shown_url: str
    method: str = "PUT"
    bearer: str | None = None
    headers: tuple[tuple[str, str], ...] = ()

    def describe(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"url": self.shown_url, "method": self.method}
        if self.bearer is not None:
            shown["auth"] = {"bearer": REDACTED}
        if self.headers:
            shown["headers"] = {name: REDACTED for name, _ in self.headers}
        return shown

    def __repr__(self) -> str:
        return f"HttpStoreSettings({self.describe()!r})"


@dataclass(frozen=True, slots=True, repr=False)
class CredentialSettings:
    """``credentials``: where rotated grants are kept and the key(s) that encrypt them."""

    store: str | HttpStoreSettings = "kafka"
    """``"kafka"``, or the HTTP store's settings."""
    keys: tuple[bytes, ...] = field(default=())
    """The AES-256 keys, the writing one first; empty only with the HTTP store."""
    lost_after: float = 60.0
    """Seconds after which a claim with no grant after it is a refresh lost to a crash."""

    def describe(self) -> dict[str, Any]:
        """As its YAML keys, printable: keys and auth read ``[redacted]``."""
        store = self.store if isinstance(self.store, str) else {"http": self.store.describe()}
        shown: dict[str, Any] = {"store": store}
        if len(self.keys) == 1:
            shown["key"] = REDACTED
        elif self.keys:
            shown["keys"] = [REDACTED] * len(self.keys)
        shown["lost_after"] = format_duration(self.lost_after)
        return shown

    def __repr__(self) -> str:
        return f"CredentialSettings({self.describe()!r})"


def parse_credentials(raw: object, secrets: Secrets) -> CredentialSettings | None:
    """``credentials``, or ``None`` when the section is absent."""
    if raw is None:
        return None
    given = section(raw, "credentials")
    check_keys(given, CREDENTIALS_KEYS, "credentials")
    store = _store(given.get("store", "kafka"), secrets)
    key, keys = given.get("key"), given.get("keys")
    # The HTTP store keeps no grant in Kafka: a key is needed only for the Kafka store.
    needed = store == "kafka" or key is not None or keys is not None
    parsed = tuple(parse_keys(key, keys)) if needed else ()
    lost = given.get("lost_after", "60s")
    return CredentialSettings(
        store=store,
        keys=parsed,
        lost_after=parse_duration(
            lost,
            "credentials.lost_after",
            unit_required=True,
            shown=secrets.show(lost, "credentials.lost_after"),
        ),
    )


def _store(value: object, secrets: Secrets) -> str | HttpStoreSettings:
    path = "credentials.store"
    if value == "kafka":
        return "kafka"
    if not isinstance(value, Mapping):
        shown = secrets.show(value, path) if isinstance(value, str) else kind(value)
        raise ConfigError(f"must be kafka or {{http: {{url: ...}}}}, got {shown}", path)
    check_keys(value, ("http",), path)
    http = section(value.get("http"), f"{path}.http")
    check_keys(http, HTTP_KEYS, _HTTP)
    url = http.get("url")
    url_path = f"{_HTTP}.url"
    if not isinstance(url, str):
        raise ConfigError(
            "is required: the template of a tenant's grant URL, e.g. "
            "'https://app.internal/tenants/{partition.key}/grant'"
            if url is None
            else f"must be a string, got {kind(url)}",
            url_path,
        )
    written = secrets.written.get(url_path)
    shown_url = written.raw if written is not None else url
    check_url(url, url_path, shown=repr(shown_url))
    method = http.get("method", "PUT")
    if not isinstance(method, str) or method.upper() not in METHODS:
        shown = secrets.show(method, f"{_HTTP}.method") if isinstance(method, str) else kind(method)
        raise ConfigError(f"must be one of: {', '.join(METHODS)}; got {shown}", f"{_HTTP}.method")
    return HttpStoreSettings(
        url=url,
        shown_url=shown_url,
        method=method.upper(),
        bearer=_bearer(http.get("auth")),
        headers=_headers(http.get("headers")),
    )


def _bearer(raw: object) -> str | None:
    path = f"{_HTTP}.auth"
    if raw is None:
        return None
    auth = section(raw, path)
    check_keys(auth, HTTP_AUTH_KEYS, path)
    bearer = auth.get("bearer")
    if not isinstance(bearer, str) or not bearer:
        raise ConfigError(
            f"must be a non-empty string (a token), got {kind(bearer)}", f"{path}.bearer"
        )
    return bearer


def _headers(raw: object) -> tuple[tuple[str, str], ...]:
    path = f"{_HTTP}.headers"
    out = []
    for name, value in section(raw, path).items():
        if not isinstance(value, str):
            # The value is a secret: its kind is shown, never it.
            raise ConfigError(f"must be a string, got {kind(value)}", join(path, name))
        out.append((name, value))
    return tuple(out)


def credential_store(
    settings: CredentialSettings,
    kafka: Mapping[str, Any] | None,
    layout: TopicLayout | None,
    clients: ClientFactory | None = None,
    *,
    timeout: float = 30.0,
) -> CredentialStore:
    """The store ``settings`` describe, not started. ``kafka`` and ``layout``: the runner's
    (``None`` on the memory store: grants and claims then live in memory, and an HTTP store
    keeps its claims there). An HTTP store's claims go to ``<prefix>.credentials`` on Kafka,
    where every runner instance orders them; its grants stay with the user's endpoint."""
    cipher = Cipher(settings.keys) if settings.keys else None
    claims: CredentialStore
    if kafka is None or layout is None:
        claims = MemoryCredentials()
    else:
        claims = KafkaCredentials(
            kafka,
            layout,
            cipher if settings.store == "kafka" else None,
            clients=clients,
            timeout=timeout,
        )
    if isinstance(settings.store, HttpStoreSettings):
        http = settings.store
        return HttpCredentials(
            http.url,
            claims,
            method=http.method,
            headers=dict(http.headers),
            bearer=http.bearer,
            timeout=timeout,
            shown_url=http.shown_url,
        )
    return claims
