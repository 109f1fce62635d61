"""The runner's :class:`~watukuy.rest.control.Control`: what REST asks, answered from the engine,
``<prefix>.configs``, ``<prefix>.status`` and the state topics.

Writes travel through Kafka so that every instance acts on them: connector configs and target
states through the configs topic (each instance's :class:`ConfigApplier` applies what it
reads), per-partition operations as command records to the key's owner (the engine sends
them). Reads that must cover keys other instances own come from Kafka too: status from the
status topic, offsets and parked items from the compacted state topics.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from watukuy import __version__
from watukuy.config.pollers import PollerSource
from watukuy.config.references import Secrets, resolve_references
from watukuy.control.configs import ConfigTopic, UnknownConnector
from watukuy.control.keystatus import KeyStatus
from watukuy.control.reader import Message, TopicReader
from watukuy.control.status import StatusTopic
from watukuy.core.errors import ConfigError, Conflict, Fenced, Retriable, WatukuyError
from watukuy.core.keys import KeyId, key_text
from watukuy.core.lifecycle import Target, TaskState
from watukuy.core.operations import offsets_of
from watukuy.core.poller import Poller
from watukuy.core.validation import message_of
from watukuy.declarative import compile_poller
from watukuy.engine.engine import Engine
from watukuy.rest.control import (
    PLUGINS,
    ClusterInfo,
    Config,
    ConnectorRecord,
    ConnectorRef,
    ConnectorStatus,
    Health,
    KeyOffsets,
    Metrics,
    ParkedKind,
    PartitionInfo,
    TaskStatus,
    ValidationReport,
    merge_patch,
    relative_path,
    validation_report,
)
from watukuy.rest.errors import NotFound
from watukuy.serde.state import decode_parked, decode_state
from watukuy.store.kafka.records import is_command
from watukuy.store.kafka.topics import TopicLayout

__all__ = ["ConfigApplier", "RunnerControl", "compile_connector"]

log = logging.getLogger("watukuy.control")

APPLY_WAIT = 10.0
"""Seconds an operation waits for this instance's engine to take a connector just written."""
WHERE = "config"
"""Where a REST connector's config sits: its errors are named relative to it."""


def compile_connector(name: str, config: Mapping[str, Any], base_dir: Path) -> Poller:
    """The poller a REST connector's ``config`` (``${...}`` unresolved) describes; a
    ``ConfigError`` names the field relative to the config (``request.url``)."""
    secrets: Secrets | None = None
    try:
        resolved, secrets = resolve_references({WHERE: dict(config)}, base_dir)
        body = {key: value for key, value in resolved[WHERE].items() if key != "name"}
        return compile_poller(
            {**body, "name": name}, where=WHERE, base_dir=base_dir, written=secrets.written
        )
    except ConfigError as exc:
        # A validator quotes the value it refused: a resolved ${env:...} one must not reach
        # the REST answer (the file loader scrubs its errors the same way).
        message = message_of(exc) if secrets is None else secrets.scrub(message_of(exc))
        raise ConfigError(message, relative_path(exc.path, WHERE) or None) from None


class ConfigApplier:
    """Applies ``<prefix>.configs`` to this instance's engine, one change at a time, in order.

    The topic's listener only queues (it runs on the loop and must not block); :meth:`run`,
    owned by the runner's task group, compiles and applies. A config that no longer compiles
    (a secret that went away) is logged and leaves the connector as it was.
    """

    def __init__(self, engine: Engine, file_pollers: Sequence[str], base_dir: Path) -> None:
        self._engine = engine
        self._file = frozenset(file_pollers)
        self._base_dir = base_dir
        self._queue: asyncio.Queue[tuple[str, Mapping[str, Any] | None, Target | None]] = (
            asyncio.Queue()
        )
        self._applied: dict[str, Mapping[str, Any]] = {}

    def changed(self, name: str, config: Mapping[str, Any] | None, target: Target | None) -> None:
        self._queue.put_nowait((name, config, target))

    async def apply_view(self, view: Mapping[str, tuple[Mapping[str, Any] | None, Target]]) -> None:
        for name, (config, target) in view.items():
            await self.apply(name, config, target)

    async def run(self) -> None:
        while True:
            name, config, target = await self._queue.get()
            await self.apply(name, config, target)

    async def apply(
        self, name: str, config: Mapping[str, Any] | None, target: Target | None
    ) -> None:
        try:
            await self._apply(name, config, target)
        except WatukuyError as exc:
            log.warning("connector '%s': change not applied: %s", name, exc)

    async def _apply(
        self, name: str, config: Mapping[str, Any] | None, target: Target | None
    ) -> None:
        engine = self._engine
        if name in self._file:
            if target is not None:  # a config-file poller's target alone lives in the topic
                await engine.set_target(name, target)
            return
        if config is None or target is None:
            if name in engine.pollers:
                await engine.remove_poller(name)
            self._applied.pop(name, None)
            return
        if self._applied.get(name) != config or name not in engine.pollers:
            poller = compile_connector(name, config, self._base_dir)
            await engine.add_poller(poller, target=target)
            self._applied[name] = config
        elif engine.target(name) != target:
            await engine.set_target(name, target)


class RunnerControl:
    """The seam the REST server calls; see the module's text."""

    def __init__(
        self,
        *,
        engine: Engine,
        configs: ConfigTopic,
        status: StatusTopic,
        file_pollers: Mapping[str, PollerSource],
        kafka: Mapping[str, Any],
        layout: TopicLayout,
        runner_id: str,
        base_dir: Path,
        started: Callable[[], bool],
        broken: Callable[[], BaseException | None],
        metrics: Callable[[], Awaitable[Metrics]] | None = None,
    ) -> None:
        self._engine = engine
        self._configs = configs
        self._status = status
        self._file = dict(file_pollers)
        self._kafka = kafka
        self._layout = layout
        self._runner_id = runner_id
        self._base_dir = base_dir
        self._started = started
        self._broken = broken
        self._metrics = metrics

    # -- connectors -----------------------------------------------------------------------------

    async def cluster(self) -> ClusterInfo:
        return {"version": __version__, "commit": "", "kafka_cluster_id": None}

    async def connectors(self) -> list[ConnectorRef]:
        refs = [ConnectorRef(name, "config-file") for name in self._file]
        refs += [
            ConnectorRef(name, "rest")
            for name, (config, _) in self._configs.view().items()
            if config is not None and name not in self._file
        ]
        return sorted(refs, key=lambda ref: ref.name)

    async def connector(self, name: str) -> ConnectorRecord:
        if name in self._file:
            return ConnectorRecord(name, "config-file", _as_written(self._file[name]))
        found = self._configs.get(name)
        if found is None or found.config is None:
            raise NotFound(f"connector {name} not found")
        return ConnectorRecord(name, "rest", dict(found.config))

    async def create_connector(self, name: str, config: Config, initial_state: Target) -> None:
        self._writable(name)
        if self._rest_config(name) is not None:
            raise Conflict(f"connector {name} already exists")
        compile_connector(name, config, self._base_dir)
        await self._configs.put(name, _stored(config), initial_state, expected_version=0)

    async def put_connector_config(self, name: str, config: Config) -> bool:
        self._writable(name)
        compile_connector(name, config, self._base_dir)
        found = self._configs.get(name)
        created = found is None or found.config is None
        target = Target.RUNNING if created or found is None else found.target
        version = 0 if found is None else found.version
        await self._configs.put(name, _stored(config), target, expected_version=version)
        return created

    async def patch_connector_config(self, name: str, patch: Config) -> None:
        self._writable(name)
        found = self._configs.get(name)
        if found is None or found.config is None:
            raise NotFound(f"connector {name} not found")
        merged = merge_patch(found.config, patch)
        compile_connector(name, merged, self._base_dir)
        await self._configs.put(name, _stored(merged), found.target, expected_version=found.version)

    async def delete_connector(self, name: str) -> None:
        self._writable(name)
        found = self._configs.get(name)
        if found is None or found.config is None:
            raise NotFound(f"connector {name} not found")
        await self._configs.delete(name, expected_version=found.version)

    async def validate(self, plugin: str, config: Config) -> ValidationReport:
        if plugin not in PLUGINS:
            raise NotFound(f"connector plugin {plugin} not found")
        error: ConfigError | None = None
        if plugin == "http":
            try:
                compile_connector(str(config.get("name", "validate")), config, self._base_dir)
            except ConfigError as exc:
                error = exc
        else:
            from watukuy.config.pollers import import_poller

            ref = config.get("python")
            try:
                if not isinstance(ref, str):
                    raise ConfigError("needs 'python: module:attr' naming a Poller", "python")
                import_poller(ref, "python")
            except ConfigError as exc:
                error = exc
        return validation_report(plugin, config, error)

    # -- status and targets -------------------------------------------------------------------

    async def status(self, name: str) -> ConnectorStatus:
        target = self._target(name)
        statuses = {status.partition: status for status in self._status.view(name)}
        keys = sorted(set(statuses) | set(self._engine.listed(name)))
        tasks = [
            self._task(index, key, statuses.get(key), target) for index, key in enumerate(keys)
        ]
        return {
            "name": name,
            "connector": {"state": TaskState(target), "worker_id": self._runner_id},
            "type": "source",
            "tasks": tasks,
        }

    def _task(self, index: int, key: str, status: KeyStatus | None, target: Target) -> TaskStatus:
        if status is None:
            missing = TaskState.STOPPED if target == Target.STOPPED else TaskState.UNASSIGNED
            return {
                "id": index,
                "state": missing,
                "worker_id": None,
                "partition": key,
                "lag": None,
                "circuit": "closed",
                "parked": {},
                "backfill": False,
            }
        state = status.state
        if target == Target.STOPPED and state != TaskState.UNASSIGNED:
            state = TaskState.STOPPED  # the target applies at once; the owner's record follows
        elif target == Target.PAUSED and state != TaskState.UNASSIGNED:
            state = TaskState.PAUSED
        task: TaskStatus = {
            "id": index,
            "state": state,
            "worker_id": status.owner,
            "partition": key,
            "lag": status.lag,
            "circuit": status.circuit,
            "parked": dict(status.parked),
            "backfill": status.backfill is not None,
        }
        if state in (TaskState.FAILED, TaskState.UNASSIGNED) and status.last_error:
            task["trace"] = status.last_error  # as Connect: why, only where it says something
        return task

    async def pause(self, name: str) -> None:
        await self._set_target(name, Target.PAUSED)

    async def resume(self, name: str) -> None:
        await self._set_target(name, Target.RUNNING)

    async def stop(self, name: str) -> None:
        await self._set_target(name, Target.STOPPED)

    async def restart(self, name: str, *, include_tasks: bool, only_failed: bool) -> None:
        self._target(name)
        await self._engine.restart(name)
        if not include_tasks:
            return
        statuses = {status.partition: status for status in self._status.view(name)}
        for key in self._engine.listed(name):
            found = statuses.get(key)
            if only_failed and (found is None or found.state != TaskState.FAILED):
                continue
            try:
                await self._engine.operate("trigger", name, partition=self._partition(name, key))
            except Conflict as exc:  # a key that cannot run here (waiting for a newer release)
                log.info("restart of %s: %s not restarted: %s", name, KeyId(name, key), exc)

    # -- offsets ----------------------------------------------------------------------------------

    async def offsets(self, name: str) -> list[KeyOffsets]:
        self._target(name)
        states = await self._read_states(name)
        return [
            {"partition": {"key": key}, "offset": offsets_of(state)}
            for key, state in sorted(states.items())
        ]

    async def alter_offsets(self, name: str, offsets: list[KeyOffsets]) -> None:
        self._stopped(name)
        for entry in offsets:
            key = entry["partition"]["key"]
            await self._engine.operate(
                "alter_offsets",
                name,
                partition=self._partition(name, key),
                args={"offset": entry["offset"]},
            )

    async def reset_offsets(self, name: str) -> None:
        self._stopped(name)
        keys = set(await self._read_states(name)) | set(self._engine.listed(name))
        for key in sorted(keys):
            await self._engine.operate(
                "alter_offsets", name, partition=self._partition(name, key), args={"offset": None}
            )

    # -- partitions ---------------------------------------------------------------------------

    async def partitions(self, name: str) -> list[PartitionInfo]:
        self._target(name)
        listed = await self._engine.partitions.list(name)
        statuses = {status.partition: status for status in self._status.view(name)}
        out: list[PartitionInfo] = []
        for partition in sorted(listed, key=lambda p: p.key):
            found = statuses.get(partition.key)
            state = TaskState.UNASSIGNED if found is None else found.state
            out.append(
                {
                    "key": partition.key,
                    "state": state,
                    "owner": None if found is None else found.owner,
                }
            )
        return out

    async def operate(self, name: str, key: str, operation: str, args: dict[str, Any]) -> None:
        self._target(name)
        if not await self._lists(name, key) and not await self._removable(name, key, operation):
            raise NotFound(f"connector {name} has no partition {key!r}")
        partition = self._partition(name, key)
        try:
            await self._engine.operate(operation, name, partition=partition, args=args)
        except Fenced:
            # The key moved to another runner while this one applied the operation, so nothing
            # was committed. Once it is another's, the engine sends it the operation instead.
            if self._engine.store.owns(name, key):
                raise
            await self._engine.operate(operation, name, partition=partition, args=args)
        except ConfigError as exc:
            # Listed and ours, but not held right now: the connector is being redefined (a PUT
            # of its config) or the key is being restored. Not the caller's error: wait until
            # it is held again (or another's), then apply it once more.
            if exc.path != "partition":
                raise
            await self._until_held(name, key)
            await self._engine.operate(operation, name, partition=partition, args=args)

    async def _until_held(self, name: str, key: str) -> None:
        """Wait until this instance holds ``key`` of ``name`` again, or no longer owns it;
        ``Retriable`` (503) after :data:`APPLY_WAIT` seconds."""
        deadline = time.monotonic() + APPLY_WAIT
        while self._engine.store.owns(name, key):
            if any(e.poller == name and e.partition == key for e in self._engine.inspect()):
                return
            if time.monotonic() > deadline:
                raise Retriable(f"partition {key!r} of {name} is restarting here; try again")
            await asyncio.sleep(0.05)

    async def _lists(self, name: str, key: str) -> bool:
        """Whether this instance's engine lists ``key`` of ``name``. A connector written moments
        ago (here or on another instance) reaches the engine apart from the request that wrote
        it: until the engine has it and has listed its partitions once, wait for it (for up to
        :data:`APPLY_WAIT`), rather than answer 404 for a partition that exists."""
        listed = self._engine.listed(name)
        if listed:
            return key in listed
        deadline = time.monotonic() + APPLY_WAIT
        while name not in self._engine.pollers:
            if time.monotonic() > deadline:
                raise Retriable(f"connector {name} is not running on this runner yet; try again")
            await asyncio.sleep(0.05)
        return any(p.key == key for p in await self._engine.partitions.list(name))

    async def _removable(self, name: str, key: str, operation: str) -> bool:
        """Whether ``remove`` may delete an unlisted key: one its partitions source dropped
        keeps its state (it resumes if listed again), and deleting that state is what the
        route is for. Deleting a key while the source still lists it brings it back fresh."""
        return operation == "remove" and key in await self._read_states(name)

    async def parked(
        self, name: str, *, partition: str | None, kind: ParkedKind | None
    ) -> list[dict[str, Any]]:
        self._target(name)
        items = await self._read_parked(name)
        return [
            item
            for item in items
            if (partition is None or item["partition"] == partition)
            and (kind is None or item["kind"] == kind)
        ]

    # -- health -------------------------------------------------------------------------------

    async def health(self) -> Health:
        broken = self._broken()
        if broken is not None:
            return Health("unhealthy", f"the Kafka store failed: {type(broken).__name__}")
        if not self._started():
            return Health("starting", "the runner is starting")
        return Health("healthy", "the runner is running")

    async def healthz(self) -> dict[str, Any]:
        """This instance's keys from ``inspect()``: lag, circuit, parked counts, and each lane
        (cursor; a running backfill's pages, items and end; the reconcile pass). A key with
        ``waiting_newer`` is owned but not run here (``last_error`` says why)."""
        now = time.time()
        keys = [
            {
                "poller": entry.poller,
                "partition": entry.partition,
                "paused": entry.paused,
                "circuit": entry.circuit,
                "lag": entry.lag,
                "parked": dict(entry.parked),
                "next_due": None if entry.next_due is None else entry.next_due.isoformat(),
                "throttled_until": _iso(entry.throttled_until),
                "last_error": entry.last_error,
                "waiting_newer": entry.waiting_newer,
                "lanes": entry.lanes,
            }
            for entry in self._engine.inspect()
        ]
        return {"runner": self._runner_id, "time": now, "keys": keys}

    async def metrics(self) -> Metrics:
        if self._metrics is None:
            return Metrics(b"", "text/plain; version=0.0.4; charset=utf-8")
        return await self._metrics()

    # -- helpers ----------------------------------------------------------------------------

    def _writable(self, name: str) -> None:
        if name in self._file:
            raise Conflict(
                f"connector {name} comes from the runner's config file: it can be paused, "
                "resumed, stopped and operated over REST, but not reconfigured (edit the file)"
            )

    def _rest_config(self, name: str) -> Mapping[str, Any] | None:
        found = self._configs.get(name)
        return None if found is None else found.config

    def _target(self, name: str) -> Target:
        """The connector's target; ``NotFound`` when there is no such connector."""
        if name not in self._file and self._rest_config(name) is None:
            raise NotFound(f"connector {name} not found")
        found = self._configs.get(name)
        if found is not None:
            return found.target
        return Target.RUNNING

    def _stopped(self, name: str) -> None:
        if self._target(name) != Target.STOPPED:
            raise Conflict(
                f"connector {name} must be STOPPED to change its offsets: "
                f"PUT /connectors/{name}/stop first"
            )

    async def _set_target(self, name: str, target: Target) -> None:
        self._target(name)
        if name in self._file:
            await self._configs.put_target(name, target)
            return
        try:
            await self._configs.set_target(name, target)
        except UnknownConnector as exc:
            raise NotFound(f"connector {name} not found") from exc

    def _partition(self, name: str, key: str) -> str | None:
        poller = self._engine.pollers.get(name)
        return key if poller is None or poller.partitioned else None

    async def _read_states(self, name: str) -> dict[str, Any]:
        prefix = _keys_of(name)
        states: dict[str, Any] = {}

        def keep(message: Message) -> None:
            key = message.key
            if key is None or not key.startswith(prefix) or is_command(key):
                return
            partition = KeyId.parse_bytes(key).partition
            if message.value is None:
                states.pop(partition, None)
            else:
                states[partition] = decode_state(message.value)

        await self._read_whole(self._layout.state, keep)
        return states

    async def _read_parked(self, name: str) -> list[dict[str, Any]]:
        prefix = _keys_of(name)
        found: dict[bytes, dict[str, Any]] = {}

        def keep(message: Message) -> None:
            key = message.key
            if key is None or not key.startswith(prefix):
                return
            if message.value is None:
                found.pop(key, None)
                return
            item = decode_parked(message.value)
            found[key] = {
                "id": item.id,
                "partition": item.partition,
                "kind": item.kind,
                "subject": item.subject,
                "error": item.error,
                "attempts": item.attempts,
                "parked_at": item.parked_at,
                "lane": item.lane,
            }

        await self._read_whole(self._layout.parked, keep)
        return sorted(found.values(), key=lambda item: (item["partition"], item["id"]))

    async def _read_whole(self, topic: str, keep: Callable[[Message], None]) -> None:
        """Every committed record of a compacted topic up to its current end, to ``keep``."""

        def apply(batch: list[Message]) -> None:
            for message in batch:
                keep(message)

        reader = TopicReader(
            self._kafka, topic, group=f"{self._layout.prefix}.rest.{self._runner_id}", apply=apply
        )
        await reader.start()
        try:
            await reader.caught_up()
        finally:
            await reader.stop()


def _keys_of(poller: str) -> bytes:
    """What the record key of each of ``poller``'s keys starts with (a poller's name holds no
    ``/``, so no other poller's keys do)."""
    return key_text(poller, "").encode()


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def _as_written(source: PollerSource) -> Config:
    if isinstance(source, str):
        return {"python": source}
    return {key: value for key, value in source.items() if key != "name"}


def _stored(config: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in config.items() if key != "name"}
