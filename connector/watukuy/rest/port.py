"""REST's port onto the control plane: everything the REST routes ask of a runner, and nothing
about HTTP. (:mod:`watukuy.control` is the runner's side of it.)

The routes validate names, queries and bodies, call one :class:`Control` method and shape the
answer. Per-key and per-connector operations are the ones :mod:`watukuy.core.operations`
declares, by its names and with the arguments its ``KeyOperation.decode`` checked: the REST
layer adds none of its own. The runner implements ``Control`` over its engine, its Kafka
store and the ``<prefix>.configs`` / ``<prefix>.status`` topics. A method signals a failure
by raising:

- :class:`~watukuy.rest.errors.NotFound` (404): no such connector / partition;
- :class:`~watukuy.rest.errors.Conflict` (409): e.g. the connector exists already, it comes
  from the config file and cannot be reconfigured, offsets change only while STOPPED;
- :class:`~watukuy.core.errors.ConfigError` (400): a config that does not compile. Its
  ``path`` is relative to the connector's config mapping (``request.url``, not
  ``pollers[0].request.url``); the route prefixes it where the config sits in the body.
- :class:`~watukuy.core.errors.Retriable` (503): Kafka cannot be reached now;
  :class:`~watukuy.core.errors.Fenced` (503 too): the key moved to another runner meanwhile.

Anything else is a 500 whose body says nothing of the exception. Messages are shown to the
caller as they are: they must not hold secrets or partition data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, Protocol, TypeAlias, TypedDict

from watukuy.core.errors import ConfigError
from watukuy.core.lifecycle import Target, TaskState
from watukuy.core.operations import KEY_OPERATIONS, KeyOperation
from watukuy.rest.webhooks import WebhookControl

JsonValue: TypeAlias = Any
"""A JSON value as ``json.loads`` returns it."""
Config: TypeAlias = dict[str, JsonValue]
"""A connector's config: a declarative poller entry without ``name``, with secrets as their
``${...}`` placeholders (never resolved in anything read back)."""

ConnectorOrigin = Literal["config-file", "rest"]
ParkedKind = Literal["invalid", "poison"]
PARKED_KINDS: tuple[ParkedKind, ...] = ("invalid", "poison")
PLUGINS = ("http", "python")
"""Connector classes: ``http`` (declarative) and ``python`` (``define_poller``)."""


@dataclass(frozen=True, slots=True)
class Validated:
    """What ``validate`` found: the first error, or none and maybe warnings (a poller of the
    config whose transform changed since it last published, from ``<prefix>.status``)."""

    error: ConfigError | None = None
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ConnectorRef:
    """A connector's name and where it was defined."""

    name: str
    origin: ConnectorOrigin


@dataclass(frozen=True, slots=True)
class ConnectorRecord:
    """A connector as written: ``config`` shows secrets as their ``${...}`` placeholders."""

    name: str
    origin: ConnectorOrigin
    config: Config


class ClusterInfo(TypedDict):
    version: str
    commit: str
    kafka_cluster_id: str | None


class WorkerState(TypedDict):
    state: TaskState
    worker_id: str | None


class TaskStatus(TypedDict):
    """One partition of the connector, as Connect shows a task."""

    id: int
    """Index of the partition in key order."""
    state: TaskState
    worker_id: str | None
    partition: str
    lag: float | None
    circuit: str
    parked: dict[str, int]
    backfill: bool
    trace: NotRequired[str]
    """Why a FAILED or UNASSIGNED task is so (the key's redacted ``last_error``)."""
    stream: NotRequired[str]
    """The stream of the key, in the status of a connector with streams."""


class ConnectorStatus(TypedDict):
    name: str
    connector: WorkerState
    type: Literal["source"]
    tasks: list[TaskStatus]


class PartitionInfo(TypedDict):
    key: str
    state: TaskState
    owner: str | None


class KeyName(TypedDict):
    key: str


class KeyOffsets(TypedDict):
    """Connect's offsets entry: ``offset`` holds one cursor per lane (``live``, ``backfill``,
    ``reconcile``); ``None`` in a PATCH resets the key."""

    partition: KeyName
    offset: dict[str, JsonValue] | None


class LoggerLevel(TypedDict):
    """KIP-495's entry of one logger: Connect's level name, and when it was last changed
    through the API here (epoch milliseconds; ``None``: never)."""

    level: str
    last_modified: int | None


LoggerScope = Literal["worker", "cluster"]
LOGGER_SCOPES: tuple[LoggerScope, ...] = ("worker", "cluster")
"""``worker``: this instance only; ``cluster``: every instance, through ``<prefix>.configs``."""


class LoggerControl(Protocol):
    """KIP-495's log levels at run time, the part of :class:`Control` that
    ``/admin/loggers`` uses."""

    async def levels(self) -> dict[str, LoggerLevel]:
        """``GET /admin/loggers``: ``root`` and every logger whose level is set here."""
        ...

    async def level(self, name: str) -> LoggerLevel:
        """One logger of :meth:`levels`; ``NotFound`` for any other."""
        ...

    async def set_level(self, name: str, level: str, scope: LoggerScope) -> list[str]:
        """Set ``name`` and the loggers below it to ``level`` (one of Connect's names,
        already checked). ``worker``: here, now; returns the loggers it named, sorted.
        ``cluster``: written to ``<prefix>.configs`` for every instance (this one applies it
        before the call returns), returns ``[]``."""
        ...


@dataclass(frozen=True, slots=True)
class Health:
    """KIP-1017: ``healthy`` (200), ``starting`` (503) or ``unhealthy`` (500)."""

    status: Literal["healthy", "starting", "unhealthy"]
    message: str


@dataclass(frozen=True, slots=True)
class Metrics:
    """What ``GET /metrics`` serves (Prometheus' text exposition format, usually), in the
    pieces it was written in: the route joins them a megabyte at a time as it sends them.
    100,000 keys make 120 MB of text, and joining it whole cost more than making most of
    it (each scrape's new memory given its pages by the kernel)."""

    pieces: Sequence[bytes]
    content_type: str


PARTITION_OPERATIONS: Mapping[str, KeyOperation] = {
    op.called: op for op in KEY_OPERATIONS.values() if op.partition_route
}
"""The key operations served as ``POST /connectors/{name}/partitions/{key}/{verb}``, by verb
(``reset`` is ``reset_cursor``). ``remove`` is ``DELETE .../partitions/{key}`` and ``retry``
is ``POST .../parked/retry``; all reach :meth:`Control.operate` by their registry names."""


class GrantControl(Protocol):
    """``PUT .../partitions/{key}/credentials``: a part of its own, as ``loggers``."""

    async def hand_in(self, name: str, key: str, grant: str) -> None:
        """Tenant ``key`` of connector ``name`` authorised again: save ``grant`` (a refresh
        token) in the credential store as its newest and trigger its keys on every stream.
        ``NotFound`` when no stream lists the key. The grant is never logged or shown."""
        ...


class Control(Protocol):
    """What the REST API needs from a runner. Every method may raise ``NotFound`` for an
    unknown connector (or partition, where one is named)."""

    grants: GrantControl
    """Grants handed in for tenants that authorised again."""

    webhooks: WebhookControl
    """The connectors' webhook routes."""

    async def cluster(self) -> ClusterInfo:
        """``GET /``."""
        ...

    async def connectors(self) -> list[ConnectorRef]:
        """Every connector, config-file and REST ones, in name order."""
        ...

    async def connector(self, name: str) -> ConnectorRecord:
        """One connector with its config as written."""
        ...

    async def create_connector(self, name: str, config: Config, initial_state: Target) -> None:
        """A new REST connector. ``Conflict`` if the name is taken; ``ConfigError`` if the
        config does not compile."""
        ...

    async def put_connector_config(self, name: str, config: Config) -> bool:
        """Create (``True``) or replace (``False``) a REST connector's config. ``Conflict``
        for a config-file connector."""
        ...

    async def patch_connector_config(self, name: str, patch: Config) -> None:
        """Merge ``patch`` into the config (:func:`merge_patch`: ``None`` removes a key),
        atomically. ``Conflict`` for a config-file connector."""
        ...

    async def delete_connector(self, name: str) -> None:
        """Remove a REST connector; its keys stop, their state is kept. ``Conflict`` for a
        config-file connector."""
        ...

    async def validate(self, plugin: str, config: Config) -> Validated:
        """Check the nested ``config`` for connector class ``plugin`` (one of
        :data:`PLUGINS`) without storing it: the first error, its path relative to the
        config; for a valid one, its warnings. The route shapes Connect's report
        (:func:`watukuy.rest.validation.validation_report`)."""
        ...

    async def status(self, name: str) -> ConnectorStatus:
        """Read from ``<prefix>.status``, so any instance answers."""
        ...

    async def pause(self, name: str) -> None: ...

    async def resume(self, name: str) -> None: ...

    async def stop(self, name: str) -> None: ...

    async def restart(self, name: str, *, include_tasks: bool, only_failed: bool) -> None:
        """Restart the connector and, with ``include_tasks``, its partitions (only the FAILED
        ones with ``only_failed``)."""
        ...

    async def offsets(self, name: str) -> list[KeyOffsets]: ...

    async def alter_offsets(self, name: str, offsets: list[KeyOffsets]) -> None:
        """Set the listed keys' cursors (``offset: None`` resets a key). ``Conflict`` unless
        the connector is STOPPED."""
        ...

    async def reset_offsets(self, name: str) -> None:
        """Reset every key. ``Conflict`` unless the connector is STOPPED."""
        ...

    async def active_topics(self, name: str) -> list[str]:
        """KIP-558: the topics the connector published to (events, dead letters), by name."""
        ...

    async def reset_active_topics(self, name: str) -> None:
        """KIP-558: forget them; the next publish to a topic lists it again."""
        ...

    async def partitions(self, name: str) -> list[PartitionInfo]:
        """Refresh the connector's partition list now and return it, in key order."""
        ...

    async def operate(
        self, name: str, key: str, operation: str, args: dict[str, JsonValue]
    ) -> None:
        """Accept the key operation named ``operation`` (a name of
        :data:`~watukuy.core.operations.KEY_OPERATIONS`: ``reset_cursor``, ``remove``,
        ``retry``...) on partition ``key`` (``''`` on an unpartitioned connector); its owner
        carries it out. ``args`` is its arguments' JSON form, already checked and complete
        (``KeyOperation.encode(KeyOperation.decode(body))``: ``{"from": None}``,
        ``{"to": "tok-9", "clear_snapshot": False}``, ``{"ids": ["p1"]}``).

        ``ConfigError`` (400) for arguments the key refuses (a parked id it does not hold);
        ``Conflict`` (409) when the connector's target does not allow the operation
        (``KeyOperation.allowed``: nothing but ``remove`` runs while it is STOPPED)."""
        ...

    async def parked(
        self, name: str, *, partition: str | None, kind: ParkedKind | None
    ) -> list[dict[str, JsonValue]]:
        """Parked items (``id``, ``partition``, ``kind``, ``subject``, ``error``,
        ``attempts``, ``parked_at``, ``lane``...), never partition data."""
        ...

    @property
    def loggers(self) -> LoggerControl:
        """``/admin/loggers``: a part of its own, the seam being wide enough already."""
        ...

    async def health(self) -> Health: ...

    async def healthz(self) -> dict[str, JsonValue]:
        """This instance's keys with lag, circuit and parked counts."""
        ...

    async def metrics(self) -> Metrics: ...


def merge_patch(config: Mapping[str, JsonValue], patch: Mapping[str, JsonValue]) -> Config:
    """JSON Merge Patch (RFC 7386): ``None`` removes a key, a mapping merges into a mapping,
    anything else replaces. On Connect's flat configs it is KIP-477's PATCH exactly."""
    merged = dict(config)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge_patch(merged[key], value)
        elif isinstance(value, Mapping):
            merged[key] = merge_patch({}, value)
        else:
            merged[key] = value
    return merged


def relative_path(path: str | None, where: str) -> str:
    """``config.request.url`` -> ``request.url`` for ``where='config'``."""
    if not path:
        return ""
    if where and path == where:
        return ""
    if where and path.startswith((f"{where}.", f"{where}[")):
        return path[len(where) :].lstrip(".")
    return path
