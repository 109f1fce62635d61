"""Per-key operations, as declared in :mod:`watukuy.core.operations`, applied or handed on.

``run`` takes an engine method's keywords, ``run_json`` the JSON form a REST body carries; both
check the arguments with the registry, check the connector's target (``Conflict`` otherwise),
then apply the operation to a key this instance owns or write a command for the key's owner.
A command arriving from another instance goes through ``received``: the same registry, the same
apply, and the command record tombstoned in the commit that applies it (a command for a key
this instance has not listed yet lists the poller again first: see ``watukuy.core.arrivals``).
Each apply takes the key's lock, so it never interleaves with a page, and commits the key's new
state like a poll.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from watukuy.core.changes import detect
from watukuy.core.errors import ConfigError, Conflict
from watukuy.core.events import Event
from watukuy.core.keys import key_text
from watukuy.core.lifecycle import KeyPhase, Target
from watukuy.core.operations import Effect, KeyOperation, KeyView, key_operation
from watukuy.core.poll import fresh_state
from watukuy.core.poller import Partition
from watukuy.core.state import ParkedItem
from watukuy.engine import children
from watukuy.engine.handlers import Dispatcher
from watukuy.engine.keys import KeyRuntime
from watukuy.engine.roster import KeyNotActive, Roster
from watukuy.logs import log_context
from watukuy.store.base import Command, KeyCommit

log = logging.getLogger("watukuy.operations")


def commit_of(
    op: KeyOperation, runtime: KeyRuntime, values: Mapping[str, Any], now: float
) -> KeyCommit:
    """The commit a state operation makes on a key (the CLI's offline path uses it too)."""
    change = op.apply(KeyView(runtime.poller, runtime.state, runtime.held_snapshot), values, now)
    return KeyCommit(state=change.state, forget=change.forget)


class Operations:
    """Applies operations to keys this instance owns; hands the others to their owner."""

    def __init__(self, roster: Roster, dispatcher: Dispatcher, wake: Callable[[], None]) -> None:
        self._roster = roster
        self._dispatcher = dispatcher
        self._wake = wake

    async def run(self, name: str, poller: str, partition: str | None, **keywords: Any) -> Any:
        """An engine method: ``run("backfill", "invoices", "t_42", from_=None)``."""
        op = key_operation(name)
        return await self.dispatch(op, poller, partition, op.values(keywords))

    async def run_json(
        self, name: str, poller: str, partition: str | None, args: object = None
    ) -> Any:
        """The JSON form a REST body carries:
        ``run_json("backfill", "invoices", "t_42", {"from": 1})``."""
        op = key_operation(name)
        return await self.dispatch(op, poller, partition, op.decode(args))

    async def dispatch(
        self, op: KeyOperation, poller: str, partition: str | None, values: Mapping[str, Any]
    ) -> Any:
        roster = self._roster
        key = roster.key_name(poller, partition)
        self.check_target(op, poller)
        if op.effect is Effect.REMOVE:
            await roster.remove(poller, key)
            return None
        # Another instance's key goes to it as a command: a listed key, a child stream's key
        # (listed only where it is owned), or any key for an operation that works on keys
        # nobody holds (offsets, while the connector is stopped).
        remote = (
            roster.listings.is_listed(poller, key)
            or roster.poller(poller).parent is not None
            or Target.STOPPED in op.allowed
        )
        if not roster.store.owns(poller, key) and remote:
            command = Command.issue(op.name, poller, key, op.encode(values), roster.clock.now())
            await roster.store.send_command(command)
            return None
        return await self.apply(op, poller, key, values)

    def check_target(self, op: KeyOperation, poller: str) -> None:
        """``Conflict`` unless the connector's target allows ``op``, named by what to do."""
        target = self._roster.target(poller)
        if target in op.allowed:
            return
        if Target.STOPPED in op.allowed:
            raise Conflict(
                f"connector '{poller}' is {target.value}; stop it first: {op.name} is allowed "
                "only while it is STOPPED"
            )
        raise Conflict(
            f"connector '{poller}' is STOPPED, so its partitions are not running; resume it "
            f"first to {op.name} (only offsets can be altered while it is stopped)"
        )

    async def apply(
        self,
        op: KeyOperation,
        poller: str,
        key: str,
        values: Mapping[str, Any],
        command: str | None = None,
    ) -> Any:
        with log_context(poller=poller, partition=key):
            if op.effect is Effect.RETRY:
                return await self._retry(poller, key, values["ids"], command)
            if self._roster.target(poller) is Target.STOPPED:
                runtime = await self._stopped(poller, key)
            else:
                runtime = await self._roster.resolve(poller, key)
            async with runtime.lock:
                await self._roster.snapshots.hold(runtime)
                commit = commit_of(op, runtime, values, self._roster.clock.now())
                if command is not None:
                    commit = replace(commit, commands=(command,))
                await self._roster.commit(runtime, commit)
            self._wake()
            return None

    async def _stopped(self, poller: str, key: str) -> KeyRuntime:
        """A key of a stopped connector, as stored (or fresh): not held, only written."""
        definition = self._roster.poller(poller)
        stored = await self._roster.store.load(poller, key)
        now = self._roster.clock.now()
        if stored is None:
            state, snapshot, parked = fresh_state(definition, key, now), {}, {}
        else:
            state, snapshot, parked = stored.state, stored.snapshot, stored.parked
        runtime = KeyRuntime(definition, Partition(key), state, snapshot, parked)
        runtime.phase = KeyPhase.STOPPED  # a view of a key that is let go: never held
        return runtime

    async def received(self, command: Command) -> None:
        """Apply a command from another instance; it is tombstoned in the same commit."""
        op = key_operation(command.op)
        if op.name in children.CHILD_OPERATIONS:
            await children.received(self._roster, command)
            return
        values = op.decode(command.args, "args")
        if not self._roster.defines(command.poller):
            # A connector written moments ago on another instance may reach this engine after
            # its first commands (they travel apart): tried again for a while, not dropped.
            raise KeyNotActive(f"poller {command.poller!r} is not defined here yet", "poller")
        definition = self._roster.poller(command.poller)
        self.check_target(op, command.poller)
        if op.effect is Effect.REMOVE:
            await self._roster.remove(command.poller, command.partition, command.id)
            return
        key = command.partition if definition.partitioned else ""
        # Sent for a key the sender listed: if this listing lacks it yet, list again now.
        await self._roster.list_for_command(command.poller, key)
        await self.apply(op, command.poller, key, values, command.id)
        if op.name == "wake":  # timed from the webhook to the commit it causes
            runtime = self._roster.runtime_of(key_text(command.poller, key))
            if runtime is not None:
                runtime.woke(command.issued_at)

    # -- retry --------------------------------------------------------------------------------

    async def _retry(
        self, poller: str, key: str, ids: list[str], command: str | None
    ) -> builtins.list[str]:
        """Re-deliver parked items; those that now succeed are removed. Returns their ids.

        Called in process, an unknown id is a ``ConfigError``; from a command, ids already
        gone (retried by an earlier delivery of the same command) are skipped.
        """
        runtime = await self._roster.resolve(poller, key)
        unknown = [i for i in ids if i not in runtime.parked]
        if unknown and command is None:
            raise ConfigError(f"no parked item {unknown[0]!r} in {runtime.key}", "ids")
        done: list[str] = []
        for parked_id in ids:
            item = runtime.parked.get(parked_id)
            if item is None:
                log.info("%s: parked item %s is gone; not retried", runtime.key, parked_id)
                continue
            if item.kind == "poison":
                ok = await self._retry_poison(runtime, item)
            else:
                ok = await self._retry_invalid(runtime, item)
            if ok:
                done.append(parked_id)
        if command is not None:
            async with runtime.lock:
                commit = KeyCommit(state=runtime.state, commands=(command,))
                await self._roster.commit(runtime, commit)
        return done

    async def _retry_poison(self, runtime: KeyRuntime, item: ParkedItem) -> bool:
        event = _event_from(item)
        error = await self._dispatcher.deliver_once(event, item.attempts + 1)
        async with runtime.lock:
            if error is None:
                commit = KeyCommit(state=runtime.state, unpark=[item.id])
            else:
                again = replace(item, attempts=item.attempts + 1, error=error)
                commit = KeyCommit(state=runtime.state, parked=[again])
            await self._roster.commit(runtime, commit)
        return error is None

    async def _retry_invalid(self, runtime: KeyRuntime, item: ParkedItem) -> bool:
        async with runtime.lock:
            if item.is_cut or item.is_transformed:  # no vendor's item: say what brings it back
                why = (
                    f"parked cut to its first bytes ({item.item.get('original_bytes')} bytes"
                    " were too large for the parked topic)"
                    if item.is_cut
                    else "parked as its poller publishes it (the vendor's item is not kept)"
                )
                error = (
                    f"{why}: it cannot be retried from here; replay the partition from before"
                    " it to fetch it again"
                )
                again = replace(item, attempts=item.attempts + 1, error=error)
                await self._roster.commit(runtime, KeyCommit(state=runtime.state, parked=[again]))
                return False
            now = self._roster.clock.now()
            snapshot = await self._roster.snapshots.hold(runtime)
            detected = detect(
                runtime.poller,
                runtime.state.partition,
                [item.item],
                snapshot,
                lane=item.lane,
                sequence=runtime.state.sequence,
                now=now,
                publishable=self._roster.store.unpublishable,
            )
            if detected.parked:
                again = replace(item, attempts=item.attempts + 1, error=detected.parked[0].error)
                await self._roster.commit(runtime, KeyCommit(state=runtime.state, parked=[again]))
                return False
            commit = KeyCommit(
                state=replace(runtime.state, sequence=detected.sequence),
                events=detected.events,
                upserts=detected.upserts,
                unpark=[item.id],
            )
            await self._roster.commit(runtime, commit)
            return True


class ParkedApi:
    """``engine.parked``: list and retry parked items of a partition."""

    def __init__(self, roster: Roster, operations: Operations) -> None:
        self._roster = roster
        self._ops = operations

    async def list(
        self, poller: str, *, partition: str | None = None, kind: str | None = None
    ) -> builtins.list[ParkedItem]:
        if kind not in (None, "invalid", "poison"):
            raise ConfigError(f"must be 'invalid' or 'poison', got {kind!r}", "kind")
        runtime = await self._roster.resolve(poller, partition)
        items = sorted(runtime.parked.values(), key=lambda p: (p.parked_at, p.id))
        return [p for p in items if kind is None or p.kind == kind]

    async def retry(
        self, poller: str, ids: Iterable[str], *, partition: str | None = None
    ) -> builtins.list[str]:
        """Re-deliver parked items; those that now succeed are removed. Returns their ids
        (none when the key is another instance's: the command is then written for it)."""
        given: object = ids
        if isinstance(ids, Iterable) and not isinstance(ids, str | bytes | Mapping):
            given = list(ids)  # a generator or a set reads as the list it yields
        done = await self._ops.run("retry", poller, partition, ids=given)
        return list(done or [])


def _event_from(item: ParkedItem) -> Event:
    raw = dict(item.event or {})
    raw["time"] = datetime.fromisoformat(str(raw["time"]).replace("Z", "+00:00"))
    return Event(**raw)
