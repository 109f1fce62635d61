"""The runner's :class:`~watukuy.rest.port.Control`: what REST asks, answered from the engine,
``<prefix>.configs``, ``<prefix>.status`` and the state topics.

Writes travel through Kafka so that every instance acts on them: connector configs and target
states through the configs topic (each instance's
:class:`~watukuy.control.applier.ConfigApplier` applies what it reads), per-partition
operations as command records to the key's owner (the engine sends them). Reads that must
cover keys other instances own come from Kafka too: status from the status topic, offsets and
parked items from the compacted state topics.

:class:`RunnerControl` is the one object REST sees; each concern is a collaborator of its own:

- :class:`~watukuy.control.connectors.ConnectorConfigs`: configs and targets;
- :class:`~watukuy.control.tasks.ConnectorTasks`: status, partitions, restart;
- :class:`~watukuy.control.offsets.ConnectorOffsets`: offsets and parked items;
- :class:`~watukuy.control.keyops.KeyOperations`: one key's operations;
- :class:`~watukuy.control.health.RunnerHealth`: health, this instance's keys, metrics;
- :class:`~watukuy.control.loggers.RunnerLoggers`: log levels at run time (KIP-495), the
  ``loggers`` attribute itself (REST reaches it as :attr:`Control.loggers`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from watukuy.config.pollers import PollerSource
from watukuy.control.cluster import ClusterId
from watukuy.control.configs import ConfigTopic
from watukuy.control.connectors import ConnectorConfigs
from watukuy.control.health import RunnerHealth
from watukuy.control.keyops import KeyOperations
from watukuy.control.loggers import LoggerLevels, RunnerLoggers
from watukuy.control.offsets import ConnectorOffsets
from watukuy.control.status import StatusTopic
from watukuy.control.stored import StoredKeys
from watukuy.control.tasks import ConnectorTasks
from watukuy.control.webhooks import WebhookIntake, engine_hooks
from watukuy.core.lifecycle import Target
from watukuy.engine.engine import Engine
from watukuy.rest.port import (
    ClusterInfo,
    Config,
    ConnectorRecord,
    ConnectorRef,
    ConnectorStatus,
    GrantControl,
    Health,
    KeyOffsets,
    Metrics,
    ParkedKind,
    PartitionInfo,
    Validated,
)
from watukuy.rest.webhooks import WebhookControl
from watukuy.store.kafka.topics import TopicLayout

__all__ = ["RunnerControl"]


class HandedGrants:
    """The REST seam's ``grants``: a tenant's new grant, handed to its key operations."""

    def __init__(self, keys: KeyOperations) -> None:
        self._keys = keys

    async def hand_in(self, name: str, key: str, grant: str) -> None:
        await self._keys.hand_in_grant(name, key, grant)


class RunnerControl:
    """The seam the REST server calls; see the module's text. Each method hands the request to
    the collaborator of its concern."""

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
        adrift: Callable[[], str | None] = lambda: None,
        metrics: Callable[[], Awaitable[Metrics]] | None = None,
        stored: StoredKeys | None = None,
        loggers: LoggerLevels | None = None,
    ) -> None:
        connectors = ConnectorConfigs(configs, file_pollers, base_dir)
        if stored is None:  # given only to read the state topics some other way (tests)
            stored = StoredKeys(kafka, layout, runner_id)
        self._connectors = connectors
        self._status = status
        self._tasks = ConnectorTasks(engine, connectors, status, runner_id)
        self._offsets = ConnectorOffsets(engine, connectors, stored)
        self._keys = KeyOperations(engine, connectors, stored)
        self._health = RunnerHealth(
            engine,
            runner_id,
            started=started,
            broken=broken,
            adrift=adrift,
            metrics=metrics,
            cluster_id=ClusterId(kafka).get,
        )
        self.loggers = RunnerLoggers(loggers or LoggerLevels(), configs)
        self.grants: GrantControl = HandedGrants(self._keys)
        self.webhooks: WebhookControl = WebhookIntake(engine, engine_hooks(engine))

    # -- connectors -----------------------------------------------------------------------------

    async def cluster(self) -> ClusterInfo:
        return await self._health.cluster()

    async def connectors(self) -> list[ConnectorRef]:
        return await self._connectors.connectors()

    async def connector(self, name: str) -> ConnectorRecord:
        return await self._connectors.connector(name)

    async def create_connector(self, name: str, config: Config, initial_state: Target) -> None:
        await self._connectors.create_connector(name, config, initial_state)

    async def put_connector_config(self, name: str, config: Config) -> bool:
        return await self._connectors.put_connector_config(name, config)

    async def patch_connector_config(self, name: str, patch: Config) -> None:
        await self._connectors.patch_connector_config(name, patch)

    async def delete_connector(self, name: str) -> None:
        await self._connectors.delete_connector(name)

    async def validate(self, plugin: str, config: Config) -> Validated:
        return await self._connectors.validate(plugin, config, self._status.transforms())

    # -- targets and status -------------------------------------------------------------------

    async def pause(self, name: str) -> None:
        await self._connectors.set_target(name, Target.PAUSED)

    async def resume(self, name: str) -> None:
        await self._connectors.set_target(name, Target.RUNNING)

    async def stop(self, name: str) -> None:
        await self._connectors.set_target(name, Target.STOPPED)

    async def status(self, name: str) -> ConnectorStatus:
        return await self._tasks.status(name)

    async def restart(self, name: str, *, include_tasks: bool, only_failed: bool) -> None:
        await self._tasks.restart(name, include_tasks=include_tasks, only_failed=only_failed)

    async def active_topics(self, name: str) -> list[str]:
        return await self._tasks.active_topics(name)

    async def reset_active_topics(self, name: str) -> None:
        await self._tasks.reset_active_topics(name)

    async def partitions(self, name: str) -> list[PartitionInfo]:
        return await self._tasks.partitions(name)

    # -- offsets, parked items, key operations --------------------------------------------------

    async def offsets(self, name: str) -> list[KeyOffsets]:
        return await self._offsets.offsets(name)

    async def alter_offsets(self, name: str, offsets: list[KeyOffsets]) -> None:
        await self._offsets.alter_offsets(name, offsets)

    async def reset_offsets(self, name: str) -> None:
        await self._offsets.reset_offsets(name)

    async def parked(
        self, name: str, *, partition: str | None, kind: ParkedKind | None
    ) -> list[dict[str, Any]]:
        return await self._offsets.parked(name, partition=partition, kind=kind)

    async def operate(self, name: str, key: str, operation: str, args: dict[str, Any]) -> None:
        await self._keys.operate(name, key, operation, args)

    # -- health -------------------------------------------------------------------------------

    async def health(self) -> Health:
        return await self._health.health()

    async def healthz(self) -> dict[str, Any]:
        return await self._health.healthz()

    async def metrics(self) -> Metrics:
        return await self._health.metrics()
