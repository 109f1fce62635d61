"""An in-memory :class:`watukuy.rest.port.Control`, good enough to drive every route.

It keeps what a runner would (connectors with their origin, config as written and target
state; keys with pause, failure and cursors; parked items; the operations accepted) and
behaves as the seam's documentation says: ``Conflict`` for config-file connectors and for
offsets changed while not STOPPED, ``NotFound`` for unknown names and keys, ``ConfigError``
with a path relative to the config when the declarative compiler refuses it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from watukuy.core import webhooks
from watukuy.core.errors import ConfigError
from watukuy.core.lifecycle import Target, TaskState
from watukuy.core.loglevels import ROOT, affected
from watukuy.core.operations import KEY_OPERATIONS, LANES
from watukuy.core.validation import message_of
from watukuy.declarative import compile_connector_entry
from watukuy.options.secrets import resolve_references
from watukuy.rest.errors import Conflict, NotFound
from watukuy.rest.port import (
    ClusterInfo,
    Config,
    ConnectorOrigin,
    ConnectorRecord,
    ConnectorRef,
    ConnectorStatus,
    Health,
    KeyOffsets,
    LoggerLevel,
    LoggerScope,
    Metrics,
    ParkedKind,
    PartitionInfo,
    TaskStatus,
    Validated,
    merge_patch,
    relative_path,
)

WORKER = "runner-1"
NOW_MS = 1_767_225_600_000
"""``last_modified`` of what the fake's loggers change."""
WHERE = "config"


@dataclass
class FakeKey:
    paused: bool = False
    failed: bool = False
    owner: str | None = WORKER
    offset: dict[str, Any] = field(default_factory=lambda: dict.fromkeys(LANES))


@dataclass
class FakeConnector:
    origin: ConnectorOrigin
    config: Config
    state: Target = Target.RUNNING
    keys: dict[str, FakeKey] = field(default_factory=dict)
    parked: list[dict[str, Any]] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)


def keys_of(config: Mapping[str, Any]) -> list[str]:
    """The keys a config's ``partitions.static`` lists, or the one key ``''``."""
    partitions = config.get("partitions")
    if isinstance(partitions, Mapping) and isinstance(partitions.get("static"), list):
        return [str(entry["key"]) for entry in partitions["static"]]
    return [""]


class FakeLoggers:
    """The fake's log levels: ``root`` and ``watukuy`` at INFO to begin with."""

    def __init__(self, control: FakeControl) -> None:
        self._control = control
        self.known: dict[str, LoggerLevel] = {
            ROOT: {"level": "INFO", "last_modified": None},
            "watukuy": {"level": "INFO", "last_modified": None},
        }
        self.cluster_levels: list[tuple[str, str]] = []
        """``(logger, level)`` written with ``scope=cluster``, in order."""

    async def levels(self) -> dict[str, LoggerLevel]:
        self._control._maybe_fail()
        return copy.deepcopy(self.known)

    async def level(self, name: str) -> LoggerLevel:
        self._control._maybe_fail()
        if name not in self.known:
            raise NotFound(f"logger {name} has no level set here")
        return copy.deepcopy(self.known[name])

    async def set_level(self, name: str, level: str, scope: LoggerScope) -> list[str]:
        """As the runner's: the logger and those below it; ``cluster`` is also recorded as
        what every instance would read."""
        self._control._maybe_fail()
        names = affected(name, self.known)
        for each in names:
            self.known[each] = {"level": level, "last_modified": NOW_MS}
        if scope == "cluster":
            self.cluster_levels.append((name, level))
            return []
        return names


class FakeGrants:
    """As the runner's: a key no stream lists is 404; the grant is kept, never shown."""

    def __init__(self, control: FakeControl) -> None:
        self._control = control
        self.handed: dict[tuple[str, str], str] = {}

    async def hand_in(self, name: str, key: str, grant: str) -> None:
        connector = self._control._get(name)
        if key not in connector.keys:
            raise NotFound(f"connector {name} has no partition {key!r}")
        self.handed[(name, key)] = grant


@dataclass(frozen=True)
class FakeAnswer:
    status: int
    message: str = ""


class FakeWebhooks:
    """One webhook path, GitHub-signed with :data:`HOOK_SECRET`: 202 and recorded when the
    signature holds, 401 when not; a body over the limit is counted ``too_large``."""

    PATH = "/webhooks/fake"

    def __init__(self) -> None:
        self.received: list[bytes] = []
        self.counted: list[str] = []

    def paths(self) -> list[str]:
        return [self.PATH]

    def handles(self, path: str) -> bool:
        return path == self.PATH

    def refused(self, path: str, result: str) -> None:
        self.counted.append(result)

    async def receive(self, path: str, headers: Mapping[str, str], body: bytes) -> FakeAnswer:
        given = webhooks.header_value(headers, "X-Hub-Signature-256")
        if not webhooks.verify_hmac(HOOK_SECRET, body, given, encoding="hex", prefix="sha256="):
            self.counted.append("bad_signature")
            return FakeAnswer(401, "the webhook's signature does not hold")
        self.received.append(body)
        self.counted.append("accepted")
        return FakeAnswer(202)


HOOK_SECRET = b"fake-hook-secret"


class FakeControl:
    def __init__(
        self, environ: Mapping[str, str] | None = None, base_dir: Path = Path(".")
    ) -> None:
        self.environ = dict(environ or {})
        self.base_dir = base_dir
        self.connectors_by_name: dict[str, FakeConnector] = {}
        self.accepted: list[tuple[str, str, str, Any]] = []
        """``(operation, connector, key, args)`` for every operation accepted (``restart``
        with its two flags as ``args``)."""
        self.grants = FakeGrants(self)
        self.webhooks = FakeWebhooks()
        self.health_state = Health("healthy", "the runner has started and owns its keys")
        self.loggers = FakeLoggers(self)
        self.fail_with: BaseException | None = None
        """Raised by every call when set (to see how the routes answer a broken seam)."""

    # --- test helpers (not part of the seam) ---------------------------------------------

    def add(
        self,
        name: str,
        config: Config,
        *,
        origin: ConnectorOrigin = "rest",
        state: Target = Target.RUNNING,
        parked: list[dict[str, Any]] | None = None,
    ) -> FakeConnector:
        connector = FakeConnector(origin, copy.deepcopy(config), state)
        connector.keys = {key: FakeKey() for key in keys_of(config)}
        connector.parked = list(parked or [])
        self.connectors_by_name[name] = connector
        return connector

    def snapshot(self) -> Any:
        """Everything a request could change, as plain data to compare."""
        return copy.deepcopy(
            (
                self.connectors_by_name,
                self.accepted,
                self.loggers.known,
                self.loggers.cluster_levels,
            )
        )

    # --- the seam ------------------------------------------------------------------------

    def _get(self, name: str) -> FakeConnector:
        self._maybe_fail()
        connector = self.connectors_by_name.get(name)
        if connector is None:
            raise NotFound(f"connector {name} not found")
        return connector

    def _maybe_fail(self) -> None:
        if self.fail_with is not None:
            raise self.fail_with

    def _writable(self, name: str, connector: FakeConnector) -> None:
        if connector.origin == "config-file":
            raise Conflict(
                f"connector {name} comes from the config file: it can be paused, resumed, "
                "stopped and operated over REST, not reconfigured"
            )

    def _compile(self, name: str, config: Config) -> None:
        try:
            resolved, secrets = resolve_references({WHERE: config}, self.base_dir, self.environ)
            compile_connector_entry(
                {**resolved[WHERE], "name": name},
                where=WHERE,
                base_dir=self.base_dir,
                written=secrets.written,
            )
        except ConfigError as exc:
            raise ConfigError(message_of(exc), relative_path(exc.path, WHERE) or None) from None

    async def cluster(self) -> ClusterInfo:
        self._maybe_fail()
        return {"version": "0.1.0", "commit": "fake", "kafka_cluster_id": "fake-cluster"}

    async def connectors(self) -> list[ConnectorRef]:
        self._maybe_fail()
        return [
            ConnectorRef(name, connector.origin)
            for name, connector in sorted(self.connectors_by_name.items())
        ]

    async def connector(self, name: str) -> ConnectorRecord:
        connector = self._get(name)
        return ConnectorRecord(name, connector.origin, copy.deepcopy(connector.config))

    async def create_connector(self, name: str, config: Config, initial_state: Target) -> None:
        self._maybe_fail()
        if name in self.connectors_by_name:
            raise Conflict(f"connector {name} exists already")
        self._compile(name, config)
        self.add(name, config, state=initial_state)

    async def put_connector_config(self, name: str, config: Config) -> bool:
        self._maybe_fail()
        existing = self.connectors_by_name.get(name)
        if existing is not None:
            self._writable(name, existing)
        self._compile(name, config)
        if existing is None:
            self.add(name, config)
            return True
        existing.config = copy.deepcopy(config)
        existing.keys = {key: existing.keys.get(key, FakeKey()) for key in keys_of(config)}
        return False

    async def patch_connector_config(self, name: str, patch: Config) -> None:
        connector = self._get(name)
        self._writable(name, connector)
        merged = merge_patch(connector.config, patch)
        self._compile(name, merged)
        connector.config = merged

    async def delete_connector(self, name: str) -> None:
        connector = self._get(name)
        self._writable(name, connector)
        del self.connectors_by_name[name]

    async def validate(self, plugin: str, config: Config) -> Validated:
        # No transform history here: tests/rest/test_rest_validate_warnings.py has one.
        return Validated(self._error(plugin, config))

    def _error(self, plugin: str, config: Config) -> ConfigError | None:
        self._maybe_fail()
        error: ConfigError | None = None
        if plugin == "python":
            ref = config.get("python")
            if not isinstance(ref, str) or ":" not in ref:
                error = ConfigError("must be 'module:attr'", "python")
        else:
            try:
                self._compile(str(config.get("name", "validate")), config)
            except ConfigError as exc:
                error = exc
        return error

    async def status(self, name: str) -> ConnectorStatus:
        connector = self._get(name)
        tasks: list[TaskStatus] = []
        for index, (key, state) in enumerate(sorted(connector.keys.items())):
            task_state: TaskState = connector.state
            if state.failed:
                task_state = "FAILED"
            elif state.paused and task_state == "RUNNING":
                task_state = "PAUSED"
            tasks.append(
                {
                    "id": index,
                    "state": task_state,
                    "worker_id": state.owner,
                    "partition": key,
                    "lag": 1.5,
                    "circuit": "open" if state.failed else "closed",
                    "parked": {"invalid": 0, "poison": 0},
                    "backfill": False,
                }
            )
        return {
            "name": name,
            "connector": {"state": connector.state, "worker_id": WORKER},
            "type": "source",
            "tasks": tasks,
        }

    async def pause(self, name: str) -> None:
        self._get(name).state = "PAUSED"

    async def resume(self, name: str) -> None:
        self._get(name).state = "RUNNING"

    async def stop(self, name: str) -> None:
        self._get(name).state = "STOPPED"

    async def active_topics(self, name: str) -> list[str]:
        return sorted(self._get(name).topics)

    async def reset_active_topics(self, name: str) -> None:
        self._get(name).topics.clear()

    async def restart(self, name: str, *, include_tasks: bool, only_failed: bool) -> None:
        connector = self._get(name)
        self.accepted.append(("restart", name, "", (include_tasks, only_failed)))
        if include_tasks:
            for state in connector.keys.values():
                state.failed = False

    async def offsets(self, name: str) -> list[KeyOffsets]:
        connector = self._get(name)
        return [
            {"partition": {"key": key}, "offset": dict(state.offset)}
            for key, state in sorted(connector.keys.items())
        ]

    def _stopped(self, name: str, connector: FakeConnector) -> None:
        if connector.state != "STOPPED":
            raise Conflict(
                f"connector {name} is {connector.state}: stop it (PUT /connectors/{name}/stop) "
                "before changing its offsets"
            )

    async def alter_offsets(self, name: str, offsets: list[KeyOffsets]) -> None:
        connector = self._get(name)
        self._stopped(name, connector)
        for entry in offsets:  # all checked before any is applied
            if entry["partition"]["key"] not in connector.keys:
                raise NotFound(f"connector {name} has no partition {entry['partition']['key']!r}")
        for entry in offsets:
            state = connector.keys[entry["partition"]["key"]]
            offset = entry["offset"]
            state.offset = dict.fromkeys(LANES) if offset is None else {**state.offset, **offset}

    async def reset_offsets(self, name: str) -> None:
        connector = self._get(name)
        self._stopped(name, connector)
        for state in connector.keys.values():
            state.offset = dict.fromkeys(LANES)

    async def partitions(self, name: str) -> list[PartitionInfo]:
        connector = self._get(name)
        return [
            {
                "key": key,
                "state": "PAUSED" if state.paused else connector.state,
                "owner": state.owner,
            }
            for key, state in sorted(connector.keys.items())
        ]

    async def operate(self, name: str, key: str, operation: str, args: dict[str, Any]) -> None:
        """As the runner's: the registry's operation by name, refused (409) under a target it
        does not allow, its effect on this fake's keys and parked items."""
        connector = self._get(name)
        op = KEY_OPERATIONS[operation]  # a route passing anything else is a bug: a 500
        # The seam takes the complete JSON form (what a command record carries): hold the
        # routes to it, or the engine would read another value than the one checked here.
        assert op.encode(op.decode(args)) == args, (operation, args)
        state = connector.keys.get(key)
        if state is None:
            raise NotFound(f"connector {name} has no partition {key!r}")
        if Target(connector.state) not in op.allowed:
            raise Conflict(
                f"connector '{name}' is {connector.state}, so its partitions are not running; "
                f"resume it first to {op.name}"
            )
        if operation == "retry":  # checked before anything is accepted, as the engine does
            known = {item["id"] for item in connector.parked if item["partition"] == key}
            unknown = [parked_id for parked_id in args["ids"] if parked_id not in known]
            if unknown:
                raise ConfigError(f"no parked item {unknown[0]!r} in {name}/{key}", "ids")
        self.accepted.append((operation, name, key, copy.deepcopy(args)))
        match operation:
            case "pause":
                state.paused = True
            case "resume":
                state.paused = False
            case "reset_cursor":
                state.offset["live"] = args["to"]
            case "backfill":
                state.offset["backfill"] = args["from"]
            case "replay":
                state.offset["live"] = args["from"]
            case "remove":
                del connector.keys[key]
            case "retry":
                connector.parked = [
                    item for item in connector.parked if item["id"] not in args["ids"]
                ]

    async def parked(
        self, name: str, *, partition: str | None, kind: ParkedKind | None
    ) -> list[dict[str, Any]]:
        connector = self._get(name)
        return [
            dict(item)
            for item in connector.parked
            if (partition is None or item["partition"] == partition)
            and (kind is None or item["kind"] == kind)
        ]

    async def health(self) -> Health:
        return self.health_state

    async def healthz(self) -> dict[str, Any]:
        self._maybe_fail()
        keys = [
            {"poller": name, "partition": key, "lag": 1.5, "circuit": "closed", "parked": {}}
            for name, connector in sorted(self.connectors_by_name.items())
            for key in sorted(connector.keys)
        ]
        return {"runner": WORKER, "keys": keys}

    async def metrics(self) -> Metrics:
        self._maybe_fail()
        body = b"# HELP watukuy_up 1 when the runner runs\n# TYPE watukuy_up gauge\nwatukuy_up 1\n"
        return Metrics([body], "text/plain; version=0.0.4; charset=utf-8")
