"""Applies ``<prefix>.configs`` to this instance's engine: what REST wrote on any instance
reaches every instance's engine through the topic."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from watukuy.control.connectors import compile_connector
from watukuy.control.streams import stream_pollers
from watukuy.core.errors import WatukuyError
from watukuy.core.lifecycle import Target
from watukuy.engine.engine import Engine

__all__ = ["ConfigApplier"]

log = logging.getLogger("watukuy.control")

Change = tuple[str, Mapping[str, Any] | None, Target | None]
"""``(name, config, target)``; ``config`` and ``target`` are ``None`` once deleted."""


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
        self._queue: asyncio.Queue[Change] = asyncio.Queue()
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
                for poller in self._pollers_of(name):
                    await engine.set_target(poller, target)
            return
        if config is None or target is None:
            for poller in self._pollers_of(name):
                await engine.remove_poller(poller)
            self._applied.pop(name, None)
            return
        running = self._pollers_of(name)
        if self._applied.get(name) != config or not running:
            compiled = compile_connector(name, config, self._base_dir)
            kept = {each.name for each in compiled}
            for gone in running:  # a stream no longer listed (or streams given up)
                if gone not in kept:
                    await engine.remove_poller(gone)
            for each in compiled:
                await engine.add_poller(each, target=target)
            self._applied[name] = config
            return
        for poller in running:
            if engine.target(poller) != target:
                await engine.set_target(poller, target)

    def _pollers_of(self, connector: str) -> list[str]:
        """The engine's pollers of ``connector``: its streams', or its own."""
        pollers = self._engine.pollers
        streams = stream_pollers(pollers, connector)
        if streams:
            return streams
        return [connector] if connector in pollers else []
