"""One key's operations from REST (trigger, pause, reset_cursor, remove, retry...): accepted
here and carried out by the key's owner, wherever the key is or moves meanwhile."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from watukuy.control.connectors import ConnectorConfigs
from watukuy.control.stored import StoredKeys
from watukuy.core.errors import ConfigError, Fenced, Retriable
from watukuy.core.grants import GrantRef
from watukuy.engine.engine import Engine
from watukuy.rest.errors import NotFound

__all__ = ["APPLY_WAIT", "KeyOperations", "partition_arg"]

APPLY_WAIT = 10.0
"""Seconds an operation waits for this instance's engine to take a connector just written."""


def partition_arg(engine: Engine, name: str, key: str) -> str | None:
    """How the engine's ``operate`` names partition ``key`` of ``name``: ``None`` on an
    unpartitioned connector; by its key on a connector the engine does not have (yet)."""
    poller = engine.pollers.get(name)
    return key if poller is None or poller.partitioned else None


class KeyOperations:
    """Runs a key operation through this instance's engine, which applies it to a key it holds
    and sends it to the owner of any other."""

    def __init__(self, engine: Engine, connectors: ConnectorConfigs, stored: StoredKeys) -> None:
        self._engine = engine
        self._connectors = connectors
        self._stored = stored

    async def operate(self, name: str, key: str, operation: str, args: dict[str, Any]) -> None:
        name = self._connectors.poller(name)  # a connector, or one stream of it
        if not await self._lists(name, key) and not await self._removable(name, key, operation):
            raise NotFound(f"connector {name} has no partition {key!r}")
        partition = partition_arg(self._engine, name, key)
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

    async def hand_in_grant(self, name: str, key: str, grant: str) -> None:
        """Tenant ``key`` of connector ``name`` authorised again: ``grant`` is saved as its
        newest (every runner reads it from the credential store at the tenant's next poll) and
        its keys on every stream are triggered, wherever they are held."""
        named = self._connectors.named(name)
        listing = [poller for poller in named.pollers if await self._lists(poller, key)]
        if not listing:
            raise NotFound(f"connector {name} has no partition {key!r}")
        ref = GrantRef(named.connector, key)
        await self._engine.credentials.hand_in(ref, grant, self._engine.clock.now())
        for poller in listing:
            await self.operate(poller, key, "trigger", {})

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
        return operation == "remove" and key in await self._stored.states(name)
