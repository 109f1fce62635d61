"""A connector's status and partitions as Kafka Connect shows a connector's tasks (one task per
partition), read from ``<prefix>.status`` so any instance answers for every key; and restart.

The connector's target decides over an owner's last record: a connector stopped or paused
moments ago shows so at once, while the owners' records follow.
"""

from __future__ import annotations

import logging

from watukuy.control.connectors import ConnectorConfigs
from watukuy.control.keyops import partition_arg
from watukuy.control.keystatus import KeyStatus
from watukuy.control.status import StatusTopic
from watukuy.control.streams import Named
from watukuy.core.errors import Conflict
from watukuy.core.keys import KeyId
from watukuy.core.lifecycle import Target, TaskState
from watukuy.engine.engine import Engine
from watukuy.rest.port import ConnectorStatus, PartitionInfo, TaskStatus

__all__ = ["ConnectorTasks"]

log = logging.getLogger("watukuy.control")


class ConnectorTasks:
    def __init__(
        self, engine: Engine, connectors: ConnectorConfigs, status: StatusTopic, runner_id: str
    ) -> None:
        self._engine = engine
        self._connectors = connectors
        self._status = status
        self._runner_id = runner_id

    async def status(self, name: str) -> ConnectorStatus:
        """One task per key; for a connector with streams, every stream's keys in (stream,
        key) order, numbered across them, each task naming its stream."""
        named = self._connectors.named(name)
        target = self._connectors.target(name)
        tasks: list[TaskStatus] = []
        for stream, poller in zip(_streams(named), named.pollers, strict=True):
            statuses = self._statuses(poller)
            for key in sorted(set(statuses) | set(self._engine.listed(poller))):
                task = _task(len(tasks), key, statuses.get(key), target)
                if named.grouped and stream is not None:
                    task["stream"] = stream
                tasks.append(task)
        return {
            "name": name,
            "connector": {"state": TaskState(target), "worker_id": self._runner_id},
            "type": "source",
            "tasks": tasks,
        }

    async def active_topics(self, name: str) -> list[str]:
        pollers = self._connectors.named(name).pollers
        return sorted({topic for poller in pollers for topic in self._status.active_topics(poller)})

    async def reset_active_topics(self, name: str) -> None:
        for poller in self._connectors.named(name).pollers:
            await self._status.reset_topics(poller)

    async def partitions(self, name: str) -> list[PartitionInfo]:
        name = self._connectors.poller(name)
        keys = {partition.key for partition in await self._engine.partitions.list(name)}
        statuses = self._statuses(name)
        if self._engine.pollers[name].parent is not None:
            # A child stream's keys are state, not a listing: this runner lists only those it
            # holds; the status topic has every owner's.
            keys |= set(statuses)
        out: list[PartitionInfo] = []
        for key in sorted(keys):
            found = statuses.get(key)
            state = TaskState.UNASSIGNED if found is None else found.state
            out.append(
                {"key": key, "state": state, "owner": None if found is None else found.owner}
            )
        return out

    async def restart(self, name: str, *, include_tasks: bool, only_failed: bool) -> None:
        for poller in self._connectors.named(name).pollers:
            await self._restart(poller, include_tasks=include_tasks, only_failed=only_failed)

    async def _restart(self, name: str, *, include_tasks: bool, only_failed: bool) -> None:
        await self._engine.restart(name)
        if not include_tasks:
            return
        statuses = self._statuses(name)
        for key in self._engine.listed(name):
            found = statuses.get(key)
            if only_failed and (found is None or found.state != TaskState.FAILED):
                continue
            partition = partition_arg(self._engine, name, key)
            try:
                await self._engine.operate("trigger", name, partition=partition)
            except Conflict as exc:  # a key that cannot run here (waiting for a newer release)
                log.info("restart of %s: %s not restarted: %s", name, KeyId(name, key), exc)

    def _statuses(self, name: str) -> dict[str, KeyStatus]:
        """The last status of each key of ``name``, by partition key."""
        return {status.partition: status for status in self._status.view(name)}


def _streams(named: Named) -> list[str | None]:
    if named.stream is not None:
        return [named.stream]
    return list(named.streams) or [None]


def _task(index: int, key: str, status: KeyStatus | None, target: Target) -> TaskStatus:
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
    if state in (TaskState.FAILED, TaskState.UNASSIGNED, TaskState.NEEDS_AUTHORIZATION) and (
        status.last_error
    ):
        task["trace"] = status.last_error  # as Connect: why, only where it says something
    return task
