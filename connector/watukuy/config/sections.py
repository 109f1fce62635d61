"""The ``kafka``, ``topics``, ``runner``, ``rest`` and ``budgets`` sections of the runner config."""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from watukuy.config.budgets import engine_budgets
from watukuy.config.model import (
    KafkaProperties,
    KafkaValue,
    LogSettings,
    MetricsSettings,
    RestAuth,
    RestSettings,
    RestTls,
    RunnerSettings,
    SchemaRegistrySettings,
    TopicsConfig,
)
from watukuy.core.durations import parse_duration
from watukuy.core.errors import ConfigError
from watukuy.core.keys import POLLER_NAME  # a topic prefix and a runner id: the same alphabet
from watukuy.core.validation import (
    check_keys,
    join,
    kind,
    message_of,
    non_empty_string,
    positive_int,
    section,
)
from watukuy.engine.budgets import build_budgets
from watukuy.options.secrets import REDACTED, Secrets
from watukuy.options.tls import TlsError, server_context
from watukuy.store.kafka.clients import check_properties, owned_reason

PREFIX_MAX_LENGTH = 200
RUNNER_ID_MAX_LENGTH = 249  # Kafka's limit on group.instance.id
SESSION_TIMEOUT_RANGE = (1.0, 300.0)

TOPICS_KEYS = {
    "prefix": "prefix",
    "partitions": "partitions",
    "replication.factor": "replication_factor",
}
RUNNER_KEYS = {
    "id": "id",
    "group.id": "group_id",
    "commit.interval": "commit_interval",
    "max.concurrency": "max_concurrency",
    "max.pages.in.flight.per.key": "max_pages_in_flight_per_key",
    "max.pages.in.flight": "max_pages_in_flight",
    "session.timeout": "session_timeout",
    "static.membership": "static_membership",
    "startup.timeout": "startup_timeout",
    "state.dir": "state_dir",
    "snapshot.cache.entries": "snapshot_cache_entries",
    "standby.replicas": "standby_replicas",
}
REST_KEYS: dict[str, str | tuple[str, ...]] = {
    "listen": ("host", "port"),
    "auth": "auth",
    "tls": "tls",
}
REST_AUTH_KEYS = ("tokens", "basic")
REST_TLS_KEYS = ("cert", "key")
BUDGET_KEYS = ("rate", "burst", "fairness", "per")
LOG_KEYS = ("format", "level", "repeat.interval")
METRICS_KEYS = ("partition_label",)
LOG_FORMATS = ("text", "json")
LOG_LEVELS = ("debug", "info", "warning", "error")


def _secret_fields(
    secrets: Secrets, path: str, keys: Mapping[str, str | tuple[str, ...]]
) -> set[str]:
    out: set[str] = set()
    for key, names in keys.items():
        if secrets.covers(join(path, key)):
            out.update((names,) if isinstance(names, str) else names)
    return out


def parse_kafka(raw: object, secrets: Secrets) -> KafkaProperties:
    if raw is None:
        raise ConfigError("is required, with at least bootstrap.servers", "kafka")
    given = section(raw, "kafka")
    values: dict[str, KafkaValue] = {}
    for key, value in given.items():
        where = join("kafka", key)
        reason = owned_reason(key)
        if reason is not None:
            raise ConfigError(f"is managed by watukuy and cannot be set ({reason})", where)
        if isinstance(value, Mapping | list) or value is None:
            raise ConfigError(
                f"must be a string, number or boolean, got {kind(value)}; write librdkafka "
                "properties as flat dotted keys, e.g. 'ssl.key.password: ...'",
                where,
            )
        if not isinstance(value, str | int | float | bool):
            raise ConfigError(f"must be a string, number or boolean, got {kind(value)}", where)
        values[key] = value
    if "bootstrap.servers" not in values:
        raise ConfigError("is required, e.g. '127.0.0.1:9092'", "kafka.bootstrap.servers")
    non_empty_string(values["bootstrap.servers"], "kafka.bootstrap.servers", "127.0.0.1:9092")
    secret = {key for key in values if secrets.covers(join("kafka", key))}
    return KafkaProperties(values, secret_keys=secret)


def check_kafka_clients(kafka: KafkaProperties, runner: RunnerSettings, secrets: Secrets) -> None:
    """librdkafka's own check of the ``kafka`` properties, with the runner's settings (some
    depend on each other: ``max.poll.interval.ms`` must not be below the session timeout)."""

    def shown(key: str) -> str:
        value = kafka[key]
        if key in kafka.secret_keys:
            return REDACTED
        return secrets.show(value, join("kafka", key))

    check_properties(kafka, session_timeout=runner.session_timeout, shown=shown)


def parse_topics(raw: object, secrets: Secrets) -> TopicsConfig:
    given = section(raw, "topics")
    check_keys(given, TOPICS_KEYS, "topics")
    prefix = given.get("prefix", "watukuy")
    shown = secrets.show(prefix, "topics.prefix")
    if not isinstance(prefix, str) or not POLLER_NAME.fullmatch(prefix):
        raise ConfigError(
            f"must be a Kafka topic name of letters, digits, '.', '_' and '-', got {shown}",
            "topics.prefix",
        )
    if len(prefix) > PREFIX_MAX_LENGTH:
        raise ConfigError(
            f"must be at most {PREFIX_MAX_LENGTH} characters, got {len(prefix)}", "topics.prefix"
        )
    return TopicsConfig(
        prefix=prefix,
        partitions=_count(given, "topics.partitions", 32, secrets),
        replication_factor=_optional_count(given, "topics.replication.factor", secrets),
        secret_fields=frozenset(_secret_fields(secrets, "topics", TOPICS_KEYS)),
    )


def _optional_count(given: Mapping[str, Any], path: str, secrets: Secrets) -> int | None:
    """A count the config may leave out (``None``: decided from the cluster)."""
    if given.get(path.partition(".")[2]) is None:
        return None
    return _count(given, path, 0, secrets)


def _count(given: Mapping[str, Any], path: str, default: int, secrets: Secrets) -> int:
    value = given.get(path.partition(".")[2], default)
    return positive_int(value, path, secrets.show(value, path))


def parse_runner(raw: object, prefix: str, secrets: Secrets) -> RunnerSettings:
    given = section(raw, "runner")
    check_keys(given, RUNNER_KEYS, "runner")
    if "group.id" not in given and secrets.covers("topics.prefix"):
        secrets.paths.add("runner.group.id")  # the default is built from a secret prefix
    timeout = _duration(given, "runner.session.timeout", "10s", secrets)
    low, high = SESSION_TIMEOUT_RANGE
    if not low <= timeout <= high:
        shown = secrets.show(given.get("session.timeout"), "runner.session.timeout")
        raise ConfigError(f"must be between 1s and 300s, got {shown}", "runner.session.timeout")
    static = given.get("static.membership", True)
    if not isinstance(static, bool):
        raise ConfigError(f"must be true or false, got {kind(static)}", "runner.static.membership")
    return RunnerSettings(
        id=_runner_id(given, secrets),
        group_id=non_empty_string(
            given.get("group.id", f"{prefix}.runners"), "runner.group.id", "watukuy.runners"
        ),
        commit_interval=_duration(given, "runner.commit.interval", "100ms", secrets),
        max_concurrency=_count(given, "runner.max.concurrency", 256, secrets),
        max_pages_in_flight_per_key=_count(
            given, "runner.max.pages.in.flight.per.key", 16, secrets
        ),
        max_pages_in_flight=_count(given, "runner.max.pages.in.flight", 1024, secrets),
        session_timeout=timeout,
        static_membership=static,
        startup_timeout=_duration(given, "runner.startup.timeout", "15s", secrets),
        state_dir=_state_dir(given.get("state.dir")),
        snapshot_cache_entries=_count(given, "runner.snapshot.cache.entries", 1_000_000, secrets),
        standby_replicas=_replicas(given.get("standby.replicas", 1)),
        secret_fields=frozenset(_secret_fields(secrets, "runner", RUNNER_KEYS)),
    )


def _replicas(value: object) -> int:
    """``runner.standby.replicas``: 0 (none) or more."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"must be an integer >= 0, got {value!r}", "runner.standby.replicas")
    return value


def _state_dir(value: object) -> str | None:
    """``runner.state.dir``: a directory this process can write, or unset (state in memory)."""
    if value is None:
        return None
    path = non_empty_string(value, "runner.state.dir", "/var/lib/watukuy")
    where = Path(path).expanduser()
    if where.exists() and not where.is_dir():
        raise ConfigError(f"{path!r} exists and is not a directory", "runner.state.dir")
    existing = next((p for p in (where, *where.parents) if p.exists()), None)
    if existing is not None and not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{path!r} cannot be written by this process", "runner.state.dir")
    return str(where)


def _duration(given: Mapping[str, Any], path: str, default: str, secrets: Secrets) -> float:
    """A duration of the config file: the file's rule (a unit is required), shown redacted
    when it came from a secret."""
    value = given.get(path.partition(".")[2], default)
    return parse_duration(value, path, unit_required=True, shown=secrets.show(value, path))


def _runner_id(given: Mapping[str, Any], secrets: Secrets) -> str:
    if "id" not in given:
        host = socket.gethostname()
        if POLLER_NAME.fullmatch(host) and len(host) <= RUNNER_ID_MAX_LENGTH:
            return host
        raise ConfigError(
            f"is not set, and the hostname {host!r} is not a valid id; set runner.id", "runner.id"
        )
    value = given["id"]
    if not isinstance(value, str):
        raise ConfigError(f"must be a string, got {kind(value)}; quote it", "runner.id")
    if not POLLER_NAME.fullmatch(value) or len(value) > RUNNER_ID_MAX_LENGTH:
        raise ConfigError(
            f"must be 1 to {RUNNER_ID_MAX_LENGTH} letters, digits, '.', '_' or '-', "
            f"got {secrets.show(value, 'runner.id')}",
            "runner.id",
        )
    return value


def parse_log(raw: object, secrets: Secrets) -> LogSettings:
    """``log``: ``format`` (text or json), ``level`` and ``repeat.interval``."""
    given = section(raw, "log")
    check_keys(given, LOG_KEYS, "log")
    return LogSettings(
        format=_choice(given, "log.format", LOG_FORMATS, "text", secrets),
        level=_choice(given, "log.level", LOG_LEVELS, "info", secrets),
        repeat_interval=_duration(given, "log.repeat.interval", "60s", secrets),
    )


def parse_metrics(raw: object) -> MetricsSettings:
    """``metrics``: ``partition_label`` (a boolean)."""
    given = section(raw, "metrics")
    check_keys(given, METRICS_KEYS, "metrics")
    label = given.get("partition_label", True)
    if not isinstance(label, bool):
        raise ConfigError(f"must be true or false, got {kind(label)}", "metrics.partition_label")
    return MetricsSettings(partition_label=label)


def _choice(
    given: Mapping[str, Any], path: str, allowed: tuple[str, ...], default: str, secrets: Secrets
) -> str:
    value = given.get(path.partition(".")[2], default)
    if isinstance(value, str) and value.lower() in allowed:
        return value.lower()
    shown = secrets.show(value, path) if isinstance(value, str) else kind(value)
    raise ConfigError(f"must be one of: {', '.join(allowed)}; got {shown}", path)


SCHEMA_REGISTRY_KEYS = {"url": ("url",), "basic.auth.user.info": ("basic_auth",)}


def parse_schema_registry(raw: object, secrets: Secrets) -> SchemaRegistrySettings:
    given = section(raw, "schema.registry")
    check_keys(given, SCHEMA_REGISTRY_KEYS, "schema.registry")
    url = given.get("url")
    if url is not None and (
        not isinstance(url, str) or not url.startswith(("http://", "https://", "mock://"))
    ):
        shown = secrets.show(url, "schema.registry.url") if isinstance(url, str) else kind(url)
        raise ConfigError(
            f"must be an http(s):// (or mock://) URL, got {shown}", "schema.registry.url"
        )
    auth = given.get("basic.auth.user.info")
    if auth is not None:
        if url is None:
            raise ConfigError("needs schema.registry.url", "schema.registry.basic.auth.user.info")
        if not isinstance(auth, str) or ":" not in auth:
            raise ConfigError("must be 'user:password'", "schema.registry.basic.auth.user.info")
    return SchemaRegistrySettings(url=url, basic_auth=auth)


def parse_rest(raw: object, secrets: Secrets, base_dir: Path | None = None) -> RestSettings:
    """``rest``: ``listen``, ``auth`` and ``tls``. Off loopback, ``auth`` must be written out
    (``auth: none`` to go without): an unauthenticated REST API that anyone on the network can
    reconfigure is Kafka Connect's default, and a known hole."""
    given = section(raw, "rest")
    check_keys(given, REST_KEYS, "rest")
    host, port = "127.0.0.1", 8083
    if "listen" in given:
        host, port = parse_listen(given["listen"], "rest.listen", secrets)
    raw_auth = given.get("auth")
    auth = None if raw_auth is None else _rest_auth(raw_auth)
    if raw_auth is None and not is_loopback(host):
        raise ConfigError(
            "is required when rest.listen is not a loopback address: give "
            "{tokens: [...]} and/or {basic: {user: password}} (from ${env:...} secrets), "
            "or write 'auth: none' to serve without credentials",
            "rest.auth",
        )
    tls = None
    if given.get("tls") is not None:
        tls = _rest_tls(given["tls"], base_dir or Path.cwd(), secrets)
    hidden = _secret_fields(secrets, "rest", REST_KEYS) | {"auth"}
    return RestSettings(host=host, port=port, auth=auth, tls=tls, secret_fields=frozenset(hidden))


def is_loopback(host: str) -> bool:
    """Whether ``host`` only listens on this machine. A name other than ``localhost`` is not
    resolved here (it may resolve differently later): it counts as reachable from outside."""
    if host.lower() in {"localhost", "localhost."}:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _rest_auth(raw: object) -> RestAuth | None:
    """``none``, or ``{tokens: [...], basic: {user: password}}``. Values are secrets: no
    message shows one, only what kind of value was found."""
    if raw == "none":
        return None
    if not isinstance(raw, Mapping):
        raise ConfigError(
            f"must be {{tokens: [...]}}, {{basic: {{user: password}}}} or none, got {kind(raw)}",
            "rest.auth",
        )
    given = section(raw, "rest.auth")
    check_keys(given, REST_AUTH_KEYS, "rest.auth")
    tokens = _tokens(given.get("tokens"))
    basic = _basic_users(given.get("basic"))
    if not tokens and not basic:
        raise ConfigError(
            "must give tokens and/or basic users (or write 'auth: none')", "rest.auth"
        )
    return RestAuth(tokens=tokens, basic=basic)


def _tokens(raw: object) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not raw:
        raise ConfigError(
            f"must be a non-empty list of tokens, got {kind(raw)}", "rest.auth.tokens"
        )
    for index, token in enumerate(raw):
        where = f"rest.auth.tokens[{index}]"
        if not isinstance(token, str):
            raise ConfigError(f"must be a string, got {kind(token)}", where)
        if not token.strip():
            raise ConfigError("must not be empty", where)
    return tuple(raw)


def _basic_users(raw: object) -> tuple[tuple[str, str], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, Mapping) or not raw:
        raise ConfigError(
            f"must be a non-empty mapping of user: password, got {kind(raw)}", "rest.auth.basic"
        )
    users: list[tuple[str, str]] = []
    for user, password in raw.items():
        where = join("rest.auth.basic", user)
        if not isinstance(user, str) or not user or ":" in user:
            raise ConfigError("a user name must be a non-empty string without ':'", where)
        if not isinstance(password, str):
            raise ConfigError(f"the password must be a string, got {kind(password)}", where)
        if not password:
            raise ConfigError("the password must not be empty", where)
        users.append((user, password))
    return tuple(users)


def _rest_tls(raw: object, base_dir: Path, secrets: Secrets) -> RestTls:
    """Both files are loaded now, so a wrong path or a key that does not match the
    certificate is a config error at start, not a failed handshake later."""
    given = section(raw, "rest.tls")
    check_keys(given, REST_TLS_KEYS, "rest.tls")
    paths: dict[str, Path] = {}
    for key in REST_TLS_KEYS:
        where = f"rest.tls.{key}"
        value = given.get(key)
        if value is None:
            raise ConfigError("is required: the path of a PEM file", where)
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"must be the path of a PEM file, got {kind(value)}", where)
        file = Path(value).expanduser()
        file = file if file.is_absolute() else base_dir / file
        if not file.is_file():
            shown = REDACTED if secrets.covers(where) else f"'{file}'"
            raise ConfigError(f"file {shown} not found", where)
        paths[key] = file

    try:
        server_context(paths["cert"], paths["key"])
    except TlsError as exc:
        raise ConfigError(str(exc), "rest.tls") from None
    return RestTls(cert=paths["cert"], key=paths["key"])


def parse_listen(value: object, path: str, secrets: Secrets) -> tuple[str, int]:
    """``host:port`` or ``[ipv6]:port``; port 0 picks a free one."""
    usage = "must be 'host:port', e.g. '127.0.0.1:8083' or '[::1]:8083'"
    if not isinstance(value, str):
        raise ConfigError(f"{usage}, got {kind(value)}", path)
    shown = secrets.show(value, path)
    text = value.strip()
    if text.startswith("["):
        host, bracket, rest = text[1:].partition("]")
        if not bracket or not rest.startswith(":"):
            raise ConfigError(f"{usage}, got {shown}", path)
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ConfigError(f"brackets must hold an IPv6 address, got {shown}", path) from None
        port_text = rest[1:]
    else:
        host, colon, port_text = text.rpartition(":")
        if not colon or not host or any(c.isspace() for c in host):
            raise ConfigError(f"{usage}, got {shown}", path)
        if ":" in host:
            raise ConfigError(
                f"write an IPv6 host in brackets, e.g. '[::1]:8083', got {shown}", path
            )
    if not (port_text.isascii() and port_text.isdigit()) or int(port_text) > 65535:
        raise ConfigError(f"port must be a number from 0 to 65535, got {shown}", path)
    return host, int(port_text)


def parse_budgets(raw: object, secrets: Secrets) -> dict[str, dict[str, Any]]:
    """The budgets as given, after the engine's own validation (paths under ``budgets.``)."""
    given = section(raw, "budgets")
    for name, spec in given.items():
        where = join("budgets", name)
        if not isinstance(spec, Mapping):
            raise ConfigError(
                f"must be a mapping like {{rate: 10/s, burst: 20}}, got {kind(spec)}", where
            )
        for key in spec:
            if not isinstance(key, str):
                raise ConfigError(f"keys must be strings, got {kind(key)}", join(where, key))
        check_keys(spec, BUDGET_KEYS, where)
    try:
        build_budgets(engine_budgets(given, secrets.paths), "budgets")
    except ConfigError as exc:
        path = exc.path or "budgets"
        if path != "budgets" and not path.startswith("budgets."):
            path = join("budgets", path)
        raise ConfigError(secrets.scrub(message_of(exc)), path) from None
    return {name: dict(spec) for name, spec in given.items()}
