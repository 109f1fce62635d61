"""A connector's offsets (each key's cursors per lane) and parked items as REST shows them,
read from the state topics so any instance answers for every key; offsets are changed, while
the connector is STOPPED, through the ``alter_offsets`` operation of each key."""

from __future__ import annotations

from typing import Any

from watukuy.control.connectors import ConnectorConfigs
from watukuy.control.keyops import partition_arg
from watukuy.control.stored import StoredKeys
from watukuy.core.operations import offsets_of
from watukuy.engine.engine import Engine
from watukuy.rest.port import KeyOffsets, ParkedKind

__all__ = ["ConnectorOffsets"]


class ConnectorOffsets:
    def __init__(self, engine: Engine, connectors: ConnectorConfigs, stored: StoredKeys) -> None:
        self._engine = engine
        self._connectors = connectors
        self._stored = stored

    async def offsets(self, name: str) -> list[KeyOffsets]:
        name = self._connectors.poller(name)
        states = await self._stored.states(name)
        entries = (offsets_of(state) for _, state in sorted(states.items()))
        # offsets_of is already a whole entry ({"partition", "offset"}): not wrapped again
        return [{"partition": e["partition"], "offset": e["offset"]} for e in entries]

    async def alter_offsets(self, name: str, offsets: list[KeyOffsets]) -> None:
        name = self._connectors.poller(name)
        self._connectors.require_stopped(name)
        for entry in offsets:
            await self._alter(name, entry["partition"]["key"], entry["offset"])

    async def reset_offsets(self, name: str) -> None:
        name = self._connectors.poller(name)
        self._connectors.require_stopped(name)
        keys = set(await self._stored.states(name)) | set(self._engine.listed(name))
        for key in sorted(keys):
            await self._alter(name, key, None)

    async def parked(
        self, name: str, *, partition: str | None, kind: ParkedKind | None
    ) -> list[dict[str, Any]]:
        name = self._connectors.poller(name)
        items = await self._stored.parked(name)
        return [
            item
            for item in items
            if (partition is None or item["partition"] == partition)
            and (kind is None or item["kind"] == kind)
        ]

    async def _alter(self, name: str, key: str, offset: dict[str, Any] | None) -> None:
        await self._engine.operate(
            "alter_offsets",
            name,
            partition=partition_arg(self._engine, name, key),
            args={"offset": offset},
        )
