"""Names, creation and checking of the Kafka topics watukuy uses (docs/concepts.md, "Topics,
by name").

The six internal topics are compacted and share one partition count, because ``state``,
``items`` and ``parked`` are co-partitioned (a key's records go to partition
``murmur2(key) % P`` of each). Events and DLQ topics use time/size retention. A topic that
already exists with a different cleanup policy or partition count is never used silently:
:func:`ensure_topics` raises :class:`~watukuy.core.errors.ConfigError` naming it.

Library errors are translated here, at the edge: an unreachable cluster becomes
:class:`BrokerUnavailable`, a layout the cluster cannot hold becomes ``ConfigError``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Literal, NoReturn, TypeVar

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # documented, not in its __all__
    AdminClient,
    ConfigResource,
    NewTopic,
)

from watukuy.core.errors import ConfigError, WatukuyError
from watukuy.store.kafka.durability import (
    Durability,
    check_internal,
    created_config,
    replicas_for,
)

__all__ = [
    "CREDENTIALS_CONFIG",
    "BrokerUnavailable",
    "TopicInfo",
    "TopicLayout",
    "ensure_credentials_topic",
    "ensure_topics",
]

T = TypeVar("T")

# Kafka's own rule (org.apache.kafka.common.internals.Topic): these characters, at most 249.
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")

_UNREACHABLE = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._RESOLVE,
        KafkaError._WAIT_COORD,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NETWORK_EXCEPTION,
    }
)
_ACCESS = frozenset(
    {
        KafkaError._AUTHENTICATION,
        KafkaError._SSL,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    }
)
# Just-created topics take a moment to show in every broker's metadata.
_NOT_YET_VISIBLE = frozenset({KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.LEADER_NOT_AVAILABLE})


class BrokerUnavailable(WatukuyError):
    """Kafka did not answer in time: check ``kafka.bootstrap.servers`` and the network, retry."""


@dataclass(frozen=True)
class TopicLayout:
    """Topic names under ``topics.prefix`` and how internal topics are created."""

    prefix: str
    partitions: int
    replication_factor: int | None
    """As written in the config; ``None``: three, or the broker count if the cluster is
    smaller (:func:`~watukuy.store.kafka.durability.replicas_for`)."""

    @property
    def state(self) -> str:
        return f"{self.prefix}.state"

    @property
    def items(self) -> str:
        return f"{self.prefix}.items"

    @property
    def parked(self) -> str:
        return f"{self.prefix}.parked"

    @property
    def configs(self) -> str:
        return f"{self.prefix}.configs"

    @property
    def status(self) -> str:
        return f"{self.prefix}.status"

    @property
    def schemas(self) -> str:
        return f"{self.prefix}.schemas"

    @property
    def credentials(self) -> str:
        """Rotated per-tenant grants (encrypted) and refresh claims: not among
        :meth:`internal`, since it exists only where a credential store is configured
        (:func:`ensure_credentials_topic`)."""
        return f"{self.prefix}.credentials"

    def internal(self) -> list[str]:
        """The six compacted topics, co-partitioned ones (state, items, parked) first."""
        return [self.state, self.items, self.parked, self.configs, self.status, self.schemas]

    def events(self, poller: str, override: str | None = None) -> str:
        """A poller's events topic: its ``topic`` setting, else ``<prefix>.events.<poller>``."""
        return override or f"{self.prefix}.events.{poller}"

    def dlq(self, poller: str) -> str:
        return f"{self.prefix}.dlq.{poller}"


@dataclass(frozen=True)
class TopicInfo:
    """What the cluster says about a topic, after :func:`ensure_topics` checked it."""

    name: str
    partitions: int
    cleanup_policy: str
    max_message_bytes: int
    durability: Durability | None = None
    topic_id: str = ""  # the cluster's id of the topic: another one when it is recreated
    delete_retention_ms: int = 86_400_000  # how long its tombstones are kept (compacted)


@dataclass(frozen=True)
class _Wanted:
    name: str
    kind: Literal["internal", "credentials", "events", "dlq"]
    path: str  # the config field that named this topic, for error messages

    @property
    def compacted(self) -> bool:
        return self.kind in ("internal", "credentials")


CREDENTIALS_CONFIG = {"min.compaction.lag.ms": str(3_600_000)}
"""Set on ``<prefix>.credentials`` when it is created: a refresh claim shares its key with the
other claims for the same serial, and compaction keeping only the last of them would change
which one was first; an hour is far beyond the time a claim matters (``credentials.lost_after``)."""


def ensure_topics(
    admin: AdminClient,
    layout: TopicLayout,
    pollers: Sequence[tuple[str, str | None]],
    *,
    timeout: float = 30.0,
    bootstrap: str | None = None,
) -> dict[str, TopicInfo]:
    """Create what is missing, then check every topic watukuy will use; idempotent.

    ``pollers`` holds ``(poller name, topic override or None)`` in config order (an override's
    errors name ``pollers[i].topic``). Internal topics are created with ``cleanup.policy=compact``,
    events and DLQ topics with ``delete``, all with ``layout.partitions`` partitions and the
    replicas :func:`~watukuy.store.kafka.durability.replicas_for` says (with
    ``min.insync.replicas=2`` from three up). Existing topics are checked, never altered:
    internal ones must be exactly ``compact`` with exactly ``layout.partitions`` partitions and
    settings that keep stored state through a broker's loss
    (:func:`~watukuy.store.kafka.durability.check_internal`); events and DLQ topics must not be
    compacted (any partition count).

    ``timeout`` bounds the whole call. ``bootstrap`` only names the cluster in errors.

    Raises :class:`ConfigError` for a topic that does not fit (or a layout the cluster cannot
    hold) and :class:`BrokerUnavailable` when the cluster does not answer in time.
    """
    return _ensure(admin, layout, _wanted_topics(layout, pollers), timeout, bootstrap)


def ensure_credentials_topic(
    admin: AdminClient, layout: TopicLayout, *, timeout: float = 30.0, bootstrap: str | None = None
) -> TopicInfo:
    """:func:`ensure_topics` for ``<prefix>.credentials`` alone: created (with
    :data:`CREDENTIALS_CONFIG`) and checked as an internal topic is, when a credential store
    is configured and only then."""
    name = layout.credentials
    _check_layout(layout)
    _check_name(name, "topics.prefix")
    wanted = {name: _Wanted(name, "credentials", "topics.prefix")}
    return _ensure(admin, layout, wanted, timeout, bootstrap)[name]


def _ensure(
    admin: AdminClient,
    layout: TopicLayout,
    wanted: dict[str, _Wanted],
    timeout: float,
    bootstrap: str | None,
) -> dict[str, TopicInfo]:
    deadline = time.monotonic() + timeout
    where = bootstrap or "the configured bootstrap.servers"

    def remaining() -> float:
        return max(deadline - time.monotonic(), 0.1)

    try:
        metadata = admin.list_topics(timeout=remaining())
    except KafkaException as exc:
        _raise_translated(exc, where, "listing topics")

    missing = [
        w
        for w in wanted.values()
        if w.name not in metadata.topics
        or _code(metadata.topics[w.name].error) == KafkaError.UNKNOWN_TOPIC_OR_PART
    ]
    brokers = len(metadata.brokers)
    if missing:
        _check_replication(layout, brokers, where)
        _create(
            admin,
            layout,
            replicas_for(layout.replication_factor, brokers),
            missing,
            remaining,
            where,
        )

    described, configs = _describe(admin, list(wanted), deadline, remaining, where)
    infos = {name: _info(name, described[name], configs[name]) for name in wanted}
    _validate(layout, wanted.values(), infos, brokers)
    return infos


def _info(name: str, described: tuple[int, int, str], config: dict[str, str]) -> TopicInfo:
    partitions, replicas, topic_id = described
    return TopicInfo(
        name=name,
        partitions=partitions,
        cleanup_policy=config.get("cleanup.policy", "delete"),
        max_message_bytes=int(config.get("max.message.bytes", "1048588")),
        durability=Durability.of(replicas, config),
        topic_id=topic_id,
        delete_retention_ms=int(config.get("delete.retention.ms", "86400000")),
    )


def _check_layout(layout: TopicLayout) -> None:
    if layout.partitions < 1:
        raise ConfigError(f"must be at least 1, got {layout.partitions}", "topics.partitions")
    if layout.replication_factor is not None and layout.replication_factor < 1:
        raise ConfigError(
            f"must be at least 1, got {layout.replication_factor}", "topics.replication.factor"
        )


def _wanted_topics(
    layout: TopicLayout, pollers: Sequence[tuple[str, str | None]]
) -> dict[str, _Wanted]:
    _check_layout(layout)
    wanted: dict[str, _Wanted] = {}
    for name in layout.internal():
        _check_name(name, "topics.prefix")
        wanted[name] = _Wanted(name, "internal", "topics.prefix")
    seen: set[str] = set()
    for i, (poller, _override) in enumerate(pollers):
        if poller in seen:
            raise ConfigError(f"poller name '{poller}' is used twice", f"pollers[{i}]")
        seen.add(poller)
        dlq = layout.dlq(poller)
        _check_name(dlq, "topics.prefix")
        wanted[dlq] = _Wanted(dlq, "dlq", "topics.prefix")
    for i, (poller, override) in enumerate(pollers):
        path = f"pollers[{i}].topic" if override else "topics.prefix"
        events = layout.events(poller, override)
        _check_name(events, path)
        other = wanted.get(events)
        if events == layout.credentials:  # checked here though created only when configured
            other = _Wanted(events, "credentials", "topics.prefix")
        if other is not None and other.kind != "events":
            what = "a DLQ" if other.kind == "dlq" else "an internal topic"
            raise ConfigError(
                f"events topic of poller '{poller}' is '{events}', which is also {what}; "
                "give the poller its own topic",
                path,
            )
        # Pollers may share an events topic: events are keyed poller/partition.
        wanted.setdefault(events, _Wanted(events, "events", path))
    return wanted


def _check_name(name: str, path: str) -> None:
    if not _LEGAL_TOPIC.fullmatch(name) or name in {".", ".."}:
        raise ConfigError(
            f"'{name}' is not a legal Kafka topic name "
            "(letters, digits, '.', '_', '-'; at most 249 characters)",
            path,
        )


def _check_replication(layout: TopicLayout, brokers: int, where: str) -> None:
    if layout.replication_factor is not None and layout.replication_factor > brokers:
        raise ConfigError(
            f"is {layout.replication_factor} but the cluster at {where} has only {brokers} "
            f"broker(s); lower it to at most {brokers}",
            "topics.replication.factor",
        )


def _create(
    admin: AdminClient,
    layout: TopicLayout,
    replicas: int,
    missing: list[_Wanted],
    remaining: Callable[[], float],
    where: str,
) -> None:
    new_topics = [
        NewTopic(
            w.name,
            num_partitions=layout.partitions,
            replication_factor=replicas,
            config={"cleanup.policy": "compact" if w.compacted else "delete"}
            | created_config(replicas)
            | (CREDENTIALS_CONFIG if w.kind == "credentials" else {}),
        )
        for w in missing
    ]
    budget = remaining()
    # operation_timeout makes the controller answer once the topics are created, not accepted.
    futures = admin.create_topics(new_topics, request_timeout=budget, operation_timeout=budget)
    for want in missing:
        try:
            _result(futures[want.name], remaining(), where, f"creating topic '{want.name}'")
        except KafkaException as exc:
            error = _error_of(exc)
            code = _code(error)
            if code == KafkaError.TOPIC_ALREADY_EXISTS:
                continue  # another instance created it since we listed: checked below
            if code == KafkaError.INVALID_REPLICATION_FACTOR:
                raise ConfigError(
                    f"is {replicas} but cannot be met by the cluster at {where}: {_message(exc)}",
                    "topics.replication.factor",
                ) from exc
            if code == KafkaError.INVALID_PARTITIONS:
                raise ConfigError(
                    f"{layout.partitions} is refused for topic '{want.name}': {_message(exc)}",
                    "topics.partitions",
                ) from exc
            if code in _UNREACHABLE or code in _ACCESS:
                _raise_translated(exc, where, f"creating topic '{want.name}'")
            raise ConfigError(
                f"cannot create topic '{want.name}': {_message(exc)}", want.path
            ) from exc


def _describe(
    admin: AdminClient,
    names: list[str],
    deadline: float,
    remaining: Callable[[], float],
    where: str,
) -> tuple[dict[str, tuple[int, int, str]], dict[str, dict[str, str]]]:
    """Partition counts with the fewest replicas of a partition and topic ids, and configs,
    of ``names``,
    waiting for just-created ones to appear."""
    partitions: dict[str, tuple[int, int, str]] = {}
    configs: dict[str, dict[str, str]] = {}
    while True:
        pending = [n for n in names if n not in partitions or n not in configs]
        if not pending:
            return partitions, configs
        not_visible: list[str] = []
        # Both calls refuse an empty list: only ask for what is still missing.
        undescribed = [n for n in pending if n not in partitions]
        described = (
            admin.describe_topics(TopicCollection(undescribed), request_timeout=remaining())
            if undescribed
            else {}
        )
        for name, future in described.items():
            try:
                description = _result(future, remaining(), where, f"describing topic '{name}'")
            except KafkaException as exc:
                if _code(_error_of(exc)) in _NOT_YET_VISIBLE:
                    not_visible.append(name)
                    continue
                _raise_translated(exc, where, f"describing topic '{name}'")
            replicas = min((len(p.replicas) for p in description.partitions), default=0)
            partitions[name] = (len(description.partitions), replicas, str(description.topic_id))
        resources = [ConfigResource("topic", n) for n in pending if n not in configs]
        configured = (
            admin.describe_configs(resources, request_timeout=remaining()) if resources else {}
        )
        for resource, future in configured.items():
            name = resource.name
            try:
                entries = _result(future, remaining(), where, f"describing topic '{name}'")
            except KafkaException as exc:
                if _code(_error_of(exc)) in _NOT_YET_VISIBLE:
                    not_visible.append(name)
                    continue
                _raise_translated(exc, where, f"describing topic '{name}'")
            configs[name] = {k: e.value for k, e in entries.items() if e.value is not None}
        if not_visible and time.monotonic() >= deadline:
            raise BrokerUnavailable(
                f"cannot reach Kafka at {where}: topic(s) {', '.join(sorted(set(not_visible)))} "
                "not visible in the cluster metadata in time"
            )
        if not_visible:
            time.sleep(min(0.2, remaining()))


def _validate(
    layout: TopicLayout, wanted: Iterable[_Wanted], infos: dict[str, TopicInfo], brokers: int
) -> None:
    co_partitioned = {layout.state, layout.items, layout.parked}
    for want in wanted:
        info = infos[want.name]
        if want.compacted and info.durability is not None:
            check_internal(info.name, info.durability, layout.replication_factor, brokers)
        policies = {p.strip() for p in info.cleanup_policy.split(",") if p.strip()}
        if want.compacted:
            if policies != {"compact"}:
                raise ConfigError(
                    f"topic '{info.name}' has cleanup.policy={info.cleanup_policy} but internal "
                    "topics need cleanup.policy=compact exactly (with delete, stored state would "
                    "expire); fix the topic or use another topics.prefix",
                    "topics.prefix",
                )
            if info.partitions != layout.partitions:
                why = (
                    " (state, items and parked are co-partitioned: a key's records must hash "
                    "to the same partition of each)"
                    if info.name in co_partitioned
                    else ""
                )
                raise ConfigError(
                    f"topic '{info.name}' has {info.partitions} partitions but "
                    f"topics.partitions is {layout.partitions}{why}; set topics.partitions to "
                    f"{info.partitions} or use another topics.prefix",
                    "topics.partitions",
                )
        elif policies != {"delete"}:
            what = "an events" if want.kind == "events" else "a DLQ"
            raise ConfigError(
                f"topic '{info.name}' has cleanup.policy={info.cleanup_policy} but {what} "
                "topic needs cleanup.policy=delete (compaction would drop records that share "
                "a key); fix the topic or choose another",
                want.path,
            )


def _result(future: Future[T], timeout: float, where: str, doing: str) -> T:
    try:
        return future.result(timeout=timeout)
    except TimeoutError as exc:
        raise BrokerUnavailable(
            f"cannot reach Kafka at {where}: no answer within {timeout:.1f}s while {doing}"
        ) from exc


def _raise_translated(exc: KafkaException, where: str, doing: str) -> NoReturn:
    code = _code(_error_of(exc))
    if code in _ACCESS:
        raise ConfigError(
            f"Kafka at {where} refused access while {doing}: {_message(exc)}", "kafka"
        ) from exc
    if code in _UNREACHABLE or code is None:
        raise BrokerUnavailable(f"cannot reach Kafka at {where}: {_message(exc)}") from exc
    error = _error_of(exc)
    if error is not None and error.retriable():
        raise BrokerUnavailable(f"cannot reach Kafka at {where}: {_message(exc)}") from exc
    raise WatukuyError(f"Kafka at {where} failed while {doing}: {_message(exc)}") from exc


def _error_of(exc: KafkaException) -> KafkaError | None:
    first = exc.args[0] if exc.args else None
    return first if isinstance(first, KafkaError) else None


def _code(error: KafkaError | None) -> int | None:
    return None if error is None else error.code()


def _message(exc: KafkaException) -> str:
    error = _error_of(exc)
    return error.str() if error is not None else str(exc)
