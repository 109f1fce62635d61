"""Connectors (pollers) at run time: added, redefined, removed, paused, stopped, restarted;
and their offsets, in the shape Kafka Connect's KIP-875 gives them.

A connector's target (:class:`~watukuy.core.lifecycle.Target`) is what the user asked of the
whole poller, apart from each key's own pause: RUNNING polls its keys, PAUSED keeps them held
and restored but polls none, STOPPED lets them go (state kept in the store) and is the only
target under which offsets may be altered. A key the user paused stays paused whatever the
connector's target does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from watukuy.core.lifecycle import KeyPhase, Target, parse_target
from watukuy.core.operations import (
    KEY_OPERATIONS,
    connector_operation,
    decode_offsets,
    offsets_of,
)
from watukuy.core.poller import Poller
from watukuy.engine.handlers import Dispatcher
from watukuy.engine.keys import KeyRuntime
from watukuy.engine.operations import Operations
from watukuy.engine.roster import Roster

log = logging.getLogger("watukuy.connectors")

Prepare = Callable[[object, str], Poller]
"""Checks a definition given at run time the way the constructor checks its list."""


class Connectors:
    def __init__(
        self,
        roster: Roster,
        dispatcher: Dispatcher,
        operations: Operations,
        prepare: Prepare,
        wake: Callable[[], None],
    ) -> None:
        self._roster = roster
        self._dispatcher = dispatcher
        self._ops = operations
        self._prepare = prepare
        self._wake = wake

    # -- definitions ------------------------------------------------------------------------

    async def add(self, poller: object, target: object = None) -> None:
        """Add a poller, or replace the definition of that name.

        The store first makes what the poller needs (on Kafka: its topics, its schema), so a
        failure there leaves everything as it was. A replaced poller's keys are let go and
        held again under the new definition, their state kept; its target is kept unless
        ``target`` is given. A new poller starts RUNNING unless ``target`` says otherwise.
        """
        definition = self._prepare(poller, "poller")
        wanted = None if target is None else parse_target(target)
        roster = self._roster
        name = definition.name
        replaced = roster.defines(name)
        await roster.store.add_poller(definition)
        dropped = self._drop(name) if replaced else []
        # Installed before the old keys' polls and writes end: a key held meanwhile (a pass
        # over ownership) is held under this definition, once listed, and not from the old
        # one's listing with its state as it was before those writes (a trigger lost).
        roster.install(definition)
        if wanted is not None:
            roster.set_target(name, wanted)
        await self._ended(dropped)
        self._dispatcher.add(definition, None if replaced else roster.store.events(name))
        await self._hold(name)
        log.info(
            "poller '%s' %s (%s)", name, "redefined" if replaced else "added", self.target(name)
        )

    async def remove(self, name: str) -> None:
        """Remove a poller: its keys stop, their state stays in the store."""
        roster = self._roster
        roster.poller(name)
        dropped = self._drop(name)
        roster.uninstall(name)  # before they end: nothing holds its keys again meanwhile
        await self._ended(dropped)
        await self._dispatcher.remove(name)
        roster.keys_changed()
        log.info("poller '%s' removed; its state is kept", name)

    # -- targets ------------------------------------------------------------------------------

    def target(self, name: str) -> str:
        """``"RUNNING"``, ``"PAUSED"`` or ``"STOPPED"``."""
        self._roster.poller(name)
        return self._roster.target(name).value

    async def set_target(self, name: str, target: object) -> None:
        roster = self._roster
        roster.poller(name)
        new = parse_target(target)
        old = roster.target(name)
        if new is old:
            return
        roster.set_target(name, new)
        if new is Target.STOPPED:
            await self._let_go(name)
        elif old is Target.STOPPED:
            await self._hold(name)
        else:  # RUNNING <-> PAUSED: the keys stay; only their due times change
            for runtime in self._runtimes(name):
                roster.reschedule(runtime)
            self._wake()
        log.info("poller '%s': %s -> %s", name, old.value, new.value)

    async def restart(self, name: str) -> None:
        """Let every key go and hold it again from the store (a stopped poller stays so)."""
        roster = self._roster
        poller = roster.poller(name)
        if not roster.target(name).holds_keys:
            return
        dropped = self._drop(name)
        roster.install(poller)  # listed again before its keys are held again (see add)
        await self._ended(dropped)
        await self._hold(name)

    async def control(self, name: str, operation: str) -> None:
        """A connector operation by name (``pause``, ``resume``, ``stop``, ``restart``)."""
        op = connector_operation(operation)
        if op.target is None:
            await self.restart(name)
        else:
            await self.set_target(name, op.target)

    # -- offsets ------------------------------------------------------------------------------

    def offsets(self, name: str) -> list[dict[str, Any]]:
        """Each stored key this instance owns: ``{"partition": {"key"}, "offset": {lanes}}``."""
        self._roster.poller(name)
        states = sorted(self._roster.store.states_of(name), key=lambda s: s.partition)
        return [offsets_of(state) for state in states]

    async def alter_offsets(self, name: str, offsets: object) -> None:
        """Set (or, with ``"offset": None``, reset) the offsets of keys; only while STOPPED.

        Every entry is checked before any is written. Keys this instance does not own are
        sent to their owner as commands.
        """
        poller = self._roster.poller(name)
        op = KEY_OPERATIONS["alter_offsets"]
        self._ops.check_target(op, name)  # Conflict first: the body may be fine
        entries = decode_offsets(offsets, partitioned=poller.partitioned)
        for key, offset in entries:
            await self._ops.dispatch(op, name, key or None, {"offset": offset})

    async def reset_offsets(self, name: str) -> None:
        """Start every key over (``DELETE .../offsets``); only while STOPPED.

        The keys are those this instance has stored and those the poller last listed (the
        listed ones another instance owns are sent to it as commands). A key another instance
        stores that is no longer listed is that instance's to reset.
        """
        self._ops.check_target(KEY_OPERATIONS["alter_offsets"], name)
        keys = {s.partition for s in self._roster.store.states_of(name)}
        keys |= set(self._roster.listings.listed(name))
        await self.alter_offsets(
            name, [{"partition": {"key": k}, "offset": None} for k in sorted(keys)]
        )

    # -- holding and letting go ---------------------------------------------------------------

    def _runtimes(self, name: str) -> list[KeyRuntime]:
        return self._roster.held(name)

    async def _let_go(self, name: str) -> None:
        """Let go of every key of ``name``, then wait for what was running on them."""
        await self._ended(self._drop(name))

    def _drop(self, name: str) -> list[KeyRuntime]:
        """Let go of every key of ``name`` (:meth:`_ended` waits for what runs on them)."""
        dropped = self._runtimes(name)
        for runtime in dropped:
            self._roster.drop(runtime, KeyPhase.STOPPED)
        return dropped

    async def _ended(self, dropped: list[KeyRuntime]) -> None:
        """Wait for what was running on the ``dropped`` keys: a poll ends after its page,
        an operation after its commit; nothing of theirs commits after this."""
        for runtime in dropped:
            async with runtime.lock:
                pass
        self._roster.keys_changed()

    async def _hold(self, name: str) -> None:
        """Hold the listed keys of ``name`` this instance owns, if its target holds keys."""
        roster = self._roster
        if roster.target(name).holds_keys:
            await roster.refresh(name, force=False)
            await roster.activate_listed(name)
        roster.keys_changed()
        self._wake()


class OffsetsApi:
    """``engine.offsets``: each key's lane cursors, in Kafka Connect's KIP-875 shape."""

    def __init__(self, connectors: Connectors) -> None:
        self._connectors = connectors

    def list(self, name: str) -> list[dict[str, Any]]:
        """``[{"partition": {"key": K}, "offset": {"live", "backfill", "reconcile"}}]`` for
        the stored keys this instance owns."""
        return self._connectors.offsets(name)

    async def alter(self, name: str, offsets: Iterable[Mapping[str, Any]]) -> None:
        """Set each key's lane cursors (``"offset": None`` starts it over); only while the
        poller is STOPPED, else :class:`~watukuy.core.errors.Conflict`."""
        await self._connectors.alter_offsets(name, offsets)

    async def reset(self, name: str) -> None:
        """Start every key this instance stores or the poller lists over; only while STOPPED."""
        await self._connectors.reset_offsets(name)
