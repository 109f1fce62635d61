"""The runner's config as frozen dataclasses. Secret values stay out of ``repr`` and ``str``."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from watukuy.core.durations import format_duration
from watukuy.core.poller import Poller
from watukuy.core.validation import join
from watukuy.declarative.shown import shown as shown_entry
from watukuy.options.secrets import REDACTED

if TYPE_CHECKING:  # the section's own module builds stores: the model stays light
    from watukuy.config.credentials import CredentialSettings

KafkaValue = str | int | float | bool

# A property holds a credential when its name says the value is one: a password, passphrase
# or secret anywhere in the name (ssl.key.password, sasl.oauthbearer.client.secret); a name
# ending in the credential itself (a .token, a .key); inline private key material (ssl.key.pem);
# or a config string that carries one (sasl.jaas.config, sasl.oauthbearer.config).
# Not secrets: who (sasl.username, sasl.oauthbearer.client.id), how (sasl.mechanism,
# security.protocol), where (ssl.key.location, sasl.oauthbearer.token.endpoint.url) and
# public material (ssl.certificate.pem, ssl.ca.pem).
_SECRET_WORDS = frozenset({"password", "passwd", "passphrase", "secret", "credentials"})
_SECRET_LAST_WORDS = frozenset({"token", "key"})
_SECRET_NAMES = frozenset({"sasl.jaas.config", "sasl.oauthbearer.config", "basic.auth.user.info"})


def is_sensitive_kafka_key(name: str) -> bool:
    """Whether a librdkafka property holds (or may hold) a credential, judged by its name."""
    lowered = name.strip().lower()
    words = re.split(r"[._-]", lowered)
    return (
        lowered in _SECRET_NAMES
        or not _SECRET_WORDS.isdisjoint(words)
        or words[-1] in _SECRET_LAST_WORDS
        or (words[-1] == "pem" and "key" in words)
    )


class KafkaProperties(dict[str, KafkaValue]):
    """librdkafka properties, passed through as given; ``repr`` hides the secret ones.

    ``secret_keys`` holds the properties that came from a ``${...}`` reference or whose name
    says they are credentials.
    """

    __slots__ = ("secret_keys",)

    def __init__(
        self, values: Mapping[str, KafkaValue] | None = None, secret_keys: Iterable[str] = ()
    ) -> None:
        super().__init__(values or {})
        self.secret_keys = frozenset(secret_keys) | {k for k in self if is_sensitive_kafka_key(k)}

    def redacted(self) -> dict[str, KafkaValue]:
        """A plain copy with secret values replaced by ``[redacted]``."""
        return {k: REDACTED if k in self.secret_keys else v for k, v in self.items()}

    def __repr__(self) -> str:
        return repr(self.redacted())

    __str__ = __repr__


def _redacting_repr(obj: Any) -> str:
    hidden: frozenset[str] = obj.secret_fields
    shown = (
        f"{f.name}={REDACTED if f.name in hidden else getattr(obj, f.name)!r}"
        for f in fields(obj)
        if f.repr
    )
    return f"{type(obj).__name__}({', '.join(shown)})"


def _secret_field() -> Any:
    return field(default=frozenset(), repr=False, compare=False)


@dataclass(frozen=True, slots=True, repr=False)
class TopicsConfig:
    """``topics``: the internal topics ``<prefix>.state|items|parked|configs|status|schemas``."""

    prefix: str = "watukuy"
    partitions: int = 32
    replication_factor: int | None = None  # None: 3, or the broker count if fewer
    secret_fields: frozenset[str] = _secret_field()

    __repr__ = _redacting_repr


@dataclass(frozen=True, slots=True, repr=False)
class RunnerSettings:
    """``runner``: this instance's identity in the group, and its pace."""

    id: str
    group_id: str
    commit_interval: float = 0.1
    max_concurrency: int = 256
    max_pages_in_flight_per_key: int = 16
    max_pages_in_flight: int = 1024
    session_timeout: float = 10.0
    static_membership: bool = True
    startup_timeout: float = 15.0
    state_dir: str | None = None  # the local state store's root; None: state in memory only
    snapshot_cache_entries: int = 1_000_000
    standby_replicas: int = 1
    secret_fields: frozenset[str] = _secret_field()

    __repr__ = _redacting_repr


@dataclass(frozen=True, slots=True)
class LogSettings:
    """``log``: how the runner's log lines look and how much they say."""

    format: str = "text"  # or "json": one object a line
    level: str = "info"
    repeat_interval: float = 60.0
    """Seconds between two showings of a tenant's same warning."""


@dataclass(frozen=True, slots=True)
class MetricsSettings:
    """``metrics``: what ``GET /metrics`` serves."""

    partition_label: bool = True
    """``False``: series aggregate per poller, without a ``partition`` label."""


@dataclass(frozen=True, slots=True, repr=False)
class RestAuth:
    """``rest.auth``: who may call the REST API. Tokens and passwords are secrets: ``repr``
    shows how many there are and the user names, never a credential."""

    tokens: tuple[str, ...] = ()
    basic: tuple[tuple[str, str], ...] = ()
    """``(user, password)`` pairs."""

    def __repr__(self) -> str:
        users = [user for user, _ in self.basic]
        return f"RestAuth(tokens={REDACTED if self.tokens else '()'}, basic_users={users!r})"

    __str__ = __repr__


@dataclass(frozen=True, slots=True)
class RestTls:
    """``rest.tls``: the server certificate (chain) and its private key, PEM files."""

    cert: Path
    key: Path


@dataclass(frozen=True, slots=True, repr=False)
class RestSettings:
    """``rest``: where the Kafka Connect-style REST API listens, who may call it, and TLS.

    ``auth`` is ``None`` when no credentials are asked for: on a loopback ``listen`` without
    ``rest.auth``, or anywhere with ``rest.auth: none`` written out.
    """

    host: str = "127.0.0.1"
    port: int = 8083
    auth: RestAuth | None = None
    tls: RestTls | None = None
    secret_fields: frozenset[str] = field(default=frozenset({"auth"}), repr=False, compare=False)

    __repr__ = _redacting_repr

    @property
    def listen(self) -> str:
        """``host:port`` as written in the config, brackets around an IPv6 host."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


@dataclass(frozen=True, slots=True, repr=False)
class SchemaRegistrySettings:
    """``schema.registry``: with a ``url``, events use the Confluent wire format and subjects
    ``<topic>-value``; without one, Avro single-object encoding and the schemas topic."""

    url: str | None = None
    basic_auth: str | None = None  # "user:password", passed as basic.auth.user.info
    secret_fields: frozenset[str] = field(
        default=frozenset({"basic_auth"}), repr=False, compare=False
    )

    __repr__ = _redacting_repr


@dataclass(frozen=True, kw_only=True, repr=False)
class RunnerConfig:
    """A validated runner config: build it with ``load_config`` or ``parse_config``.

    ``secrets`` holds the config paths (``kafka.sasl.password``, ``budgets.vendor.rate``) whose
    values must not be printed.
    """

    kafka: dict[str, KafkaValue]
    topics: TopicsConfig = field(default_factory=TopicsConfig)
    runner: RunnerSettings
    rest: RestSettings = field(default_factory=RestSettings)
    budgets: dict[str, dict[str, Any]] = field(default_factory=dict)
    schema_registry: SchemaRegistrySettings = field(default_factory=SchemaRegistrySettings)
    log: LogSettings = field(default_factory=LogSettings)
    metrics: MetricsSettings = field(default_factory=MetricsSettings)
    credentials: CredentialSettings | None = None
    """``credentials``: where rotated per-tenant grants are kept; ``None``: not configured."""
    pollers: list[Poller]
    poller_refs: tuple[str | Mapping[str, Any], ...] = ()
    """Where each poller came from: ``module:attr``, or a declarative poller's entry."""
    python_path: tuple[Path, ...] = ()
    base_dir: Path = field(default_factory=Path.cwd)
    """The config file's directory: relative paths of REST connectors resolve against it."""
    written_pollers: tuple[Any, ...] = ()
    """The ``pollers`` entries as written in the file, ``${...}`` references unresolved."""
    secrets: frozenset[str] = frozenset()

    def secret_paths(self) -> frozenset[str]:
        """``secrets`` plus the kafka properties whose names mark them as credentials."""
        marked: frozenset[str] = getattr(self.kafka, "secret_keys", frozenset())
        kafka = {k for k in self.kafka if k in marked or is_sensitive_kafka_key(k)}
        registry = {"schema.registry.basic.auth.user.info"}  # a credential, always
        return self.secrets | {f"kafka.{k}" for k in kafka} | registry

    def describe(self) -> dict[str, Any]:
        """The config as its YAML keys, printable: secret values read ``[redacted]``."""
        runner = self.runner
        tree: dict[str, Any] = {
            "kafka": dict(self.kafka),
            "topics": {
                "prefix": self.topics.prefix,
                "partitions": self.topics.partitions,
                "replication.factor": self.topics.replication_factor,
            },
            "runner": {
                "id": runner.id,
                "group.id": runner.group_id,
                "commit.interval": format_duration(runner.commit_interval),
                "max.concurrency": runner.max_concurrency,
                "max.pages.in.flight.per.key": runner.max_pages_in_flight_per_key,
                "max.pages.in.flight": runner.max_pages_in_flight,
                "session.timeout": format_duration(runner.session_timeout),
                "static.membership": runner.static_membership,
                "startup.timeout": format_duration(runner.startup_timeout),
                "state.dir": runner.state_dir,
                "snapshot.cache.entries": runner.snapshot_cache_entries,
                "standby.replicas": runner.standby_replicas,
            },
            "rest": self._rest(),
            "budgets": self.budgets,
            "pollers": [
                {"python": ref, "name": poller.name} if isinstance(ref, str) else shown_entry(ref)
                for ref, poller in self._entries()
            ],
        }
        if self.schema_registry.url is not None:
            tree["schema.registry"] = {"url": self.schema_registry.url}
            if self.schema_registry.basic_auth is not None:
                tree["schema.registry"]["basic.auth.user.info"] = self.schema_registry.basic_auth
        if self.log != LogSettings():
            tree["log"] = {
                "format": self.log.format,
                "level": self.log.level,
                "repeat.interval": format_duration(self.log.repeat_interval),
            }
        if self.metrics != MetricsSettings():
            tree["metrics"] = {"partition_label": self.metrics.partition_label}
        if self.credentials is not None:  # redacts its keys and auth itself
            tree["credentials"] = self.credentials.describe()
        if self.python_path:
            tree["python_path"] = [str(p) for p in self.python_path]
        secret = self.secret_paths()
        return {key: _redact(value, key, secret) for key, value in tree.items()}

    def _rest(self) -> dict[str, Any]:
        rest: dict[str, Any] = {
            "listen": self.rest.listen,
            "auth": "none" if self.rest.auth is None else REDACTED,
        }
        if self.rest.tls is not None:
            rest["tls"] = {"cert": str(self.rest.tls.cert), "key": str(self.rest.tls.key)}
        return rest

    def file_pollers(self) -> dict[str, str | Mapping[str, Any]]:
        """Each connector's name (a poller's, or the connector's of its streams) and where it
        came from, as written: ``module:attr`` for a Python poller, the entry with its
        ``${...}`` references unresolved for a declarative one."""
        out: dict[str, str | Mapping[str, Any]] = {}
        for index, (ref, poller) in enumerate(zip(self._refs(), self.pollers, strict=True)):
            written = self.written_pollers[index] if index < len(self.written_pollers) else ref
            # A connector's streams are one entry: REST lists and targets the connector.
            name = poller.name if poller.stream_of is None else poller.stream_of.connector
            out.setdefault(name, ref if isinstance(ref, str) else written)
        return out

    def _entries(self) -> list[tuple[str | Mapping[str, Any], Poller]]:
        """Each ``pollers:`` entry once: the streams of a connector share their entry."""
        out: list[tuple[str | Mapping[str, Any], Poller]] = []
        for ref, poller in zip(self._refs(), self.pollers, strict=True):
            if not (out and isinstance(ref, Mapping) and out[-1][0] is ref):
                out.append((ref, poller))
        return out

    def _refs(self) -> tuple[str | Mapping[str, Any], ...]:
        if len(self.poller_refs) == len(self.pollers):
            return self.poller_refs
        return tuple(f"(poller {p.name})" for p in self.pollers)

    def __repr__(self) -> str:
        shown = ", ".join(f"{key}={value!r}" for key, value in self.describe().items())
        return f"RunnerConfig({shown})"


def _redact(node: Any, path: str, secret: frozenset[str]) -> Any:
    if path in secret:
        return REDACTED
    if isinstance(node, Mapping):
        return {key: _redact(value, join(path, key), secret) for key, value in node.items()}
    if isinstance(node, list):
        return [_redact(value, f"{path}[{i}]", secret) for i, value in enumerate(node)]
    return node
