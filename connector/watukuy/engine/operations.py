"""Per-partition operations: trigger, pause, resume, backfill, replay, reset_cursor, reconcile,
and the parked-items API. Each one takes the key's lock, so it never interleaves with a page,
and commits the key's new state like a poll does."""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import datetime
from typing import Any

from watukuy.core import schedule as schedules
from watukuy.core.changes import detect
from watukuy.core.errors import ConfigError
from watukuy.core.events import Event
from watukuy.core.poller import Poller
from watukuy.core.state import LaneState, ParkedItem, PartitionState
from watukuy.engine.handlers import Dispatcher
from watukuy.engine.keys import KeyRuntime
from watukuy.engine.registry import Registry
from watukuy.store.base import Command, KeyCommit

Change = Callable[[KeyRuntime, float], KeyCommit]


def change_for(poller: Poller, op: str, args: dict[str, Any]) -> Change:
    """The commit an operation makes on a key: the same whether it is called here or arrives
    as a command record from another instance (``args`` are then its JSON form)."""
    if op == "trigger":
        return _state_change(_trigger)
    if op == "pause":
        return _state_change(lambda s, _: replace(s, paused="user"))
    if op == "resume":
        return _state_change(lambda s, _: replace(s, paused=None))
    if op == "reconcile":
        return _state_change(lambda s, now: replace(s, reconcile_due=now))
    if op == "backfill":

        def start_backfill(state: PartitionState, now: float) -> PartitionState:
            until = state.live.cursor if poller.cursor.strategy == "timestamp" else None
            backfill = LaneState(cursor=args.get("from_"), active=True, until=until)
            return replace(state, backfill=backfill)

        return _state_change(start_backfill)
    if op == "replay":

        def start_replay(state: PartitionState, now: float) -> PartitionState:
            live = LaneState(cursor=args.get("from_"), replaying=True)
            # Validators would let the vendor answer 304 and the replay would see nothing.
            return _trigger(replace(state, live=live, validators=()), now)

        return _state_change(start_replay)
    if op == "reset_cursor":

        def reset(runtime: KeyRuntime, now: float) -> KeyCommit:
            state = replace(runtime.state, live=LaneState(cursor=args.get("to")), validators=())
            forget = list(runtime.snapshot) if args.get("clear_snapshot") else []
            return KeyCommit(state=_trigger(state, now), forget=forget)

        return reset
    raise ConfigError(f"unknown operation {op!r}", "op")


class Operations:
    """Applies operations to keys this instance owns; hands the others to their owner."""

    def __init__(self, registry: Registry, wake: Callable[[], None]) -> None:
        self._registry = registry
        self._wake = wake

    async def run(
        self, op: str, poller: str, partition: str | None, args: dict[str, Any] | None = None
    ) -> None:
        args = dict(args or {})
        definition = self._registry.poller(poller)
        change = change_for(definition, op, args)  # unknown ops fail before anything is sent
        registry = self._registry
        key = registry.key_name(poller, partition)
        if not registry.store.owns(poller, key) and registry.is_listed(poller, key):
            command = Command(
                uuid.uuid4().hex, op, poller, key, _jsonable(args), registry.clock.now()
            )
            await registry.store.send_command(command)
            return
        await self.apply(poller, partition, change)

    async def apply(
        self,
        poller: str,
        partition: str | None,
        change: Change,
        command: bytes | None = None,
    ) -> PartitionState:
        runtime = await self._registry.resolve(poller, partition)
        async with runtime.lock:
            commit = change(runtime, self._registry.clock.now())
            if command is not None:
                commit = replace(commit, commands=(command,))
            await self._registry.commit(runtime, commit)
        self._wake()
        return runtime.state

    async def received(self, command: Command) -> None:
        """Apply a command from another instance; it is tombstoned in the same commit."""
        if command.op == "remove":
            await self._registry.remove(command.poller, command.partition, command.record_key)
            return
        definition = self._registry.poller(command.poller)
        change = change_for(definition, command.op, dict(command.args))
        partition = command.partition if definition.partitioned else None
        await self.apply(command.poller, partition, change, command.record_key)

    async def trigger(self, poller: str, partition: str | None = None) -> None:
        await self.run("trigger", poller, partition)

    async def pause(self, poller: str, partition: str | None = None) -> None:
        await self.run("pause", poller, partition)

    async def resume(self, poller: str, partition: str | None = None) -> None:
        await self.run("resume", poller, partition)

    async def backfill(self, poller: str, *, from_: Any, partition: str | None = None) -> None:
        await self.run("backfill", poller, partition, {"from_": from_})

    async def replay(self, poller: str, *, from_: Any, partition: str | None = None) -> None:
        await self.run("replay", poller, partition, {"from_": from_})

    async def reset_cursor(
        self,
        poller: str,
        *,
        partition: str | None = None,
        to: Any = None,
        clear_snapshot: bool = False,
    ) -> None:
        await self.run(
            "reset_cursor", poller, partition, {"to": to, "clear_snapshot": clear_snapshot}
        )

    async def reconcile(self, poller: str, partition: str | None = None) -> None:
        """Start a full reconcile scan now (finds deletions)."""
        await self.run("reconcile", poller, partition)


def _jsonable(args: dict[str, Any]) -> dict[str, Any]:
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in args.items()}


def _trigger(state: PartitionState, now: float) -> PartitionState:
    return replace(state, schedule=schedules.trigger(state.schedule, now))


def _state_change(change: Callable[[PartitionState, float], PartitionState]) -> Change:
    return lambda runtime, now: KeyCommit(state=change(runtime.state, now))


class ParkedApi:
    """``engine.parked``: list and retry parked items of a partition."""

    def __init__(self, registry: Registry, dispatcher: Dispatcher) -> None:
        self._registry = registry
        self._dispatcher = dispatcher

    async def list(
        self, poller: str, *, partition: str | None = None, kind: str | None = None
    ) -> builtins.list[ParkedItem]:
        if kind not in (None, "invalid", "poison"):
            raise ConfigError(f"must be 'invalid' or 'poison', got {kind!r}", "kind")
        runtime = await self._registry.resolve(poller, partition)
        items = sorted(runtime.parked.values(), key=lambda p: (p.parked_at, p.id))
        return [p for p in items if kind is None or p.kind == kind]

    async def retry(
        self, poller: str, ids: Iterable[str], *, partition: str | None = None
    ) -> builtins.list[str]:
        """Re-deliver parked items; those that now succeed are removed. Returns their ids."""
        runtime = await self._registry.resolve(poller, partition)
        wanted = list(ids)
        unknown = [i for i in wanted if i not in runtime.parked]
        if unknown:
            raise ConfigError(f"no parked item {unknown[0]!r} in {runtime.key}", "ids")
        done: list[str] = []
        for parked_id in wanted:
            item = runtime.parked[parked_id]
            if item.kind == "poison":
                ok = await self._retry_poison(runtime, item)
            else:
                ok = await self._retry_invalid(runtime, item)
            if ok:
                done.append(parked_id)
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
            await self._registry.commit(runtime, commit)
        return error is None

    async def _retry_invalid(self, runtime: KeyRuntime, item: ParkedItem) -> bool:
        async with runtime.lock:
            now = self._registry.clock.now()
            detected = detect(
                runtime.poller,
                runtime.state.partition,
                [item.item],
                runtime.snapshot,
                lane=item.lane,
                sequence=runtime.state.sequence,
                now=now,
            )
            if detected.parked:
                again = replace(item, attempts=item.attempts + 1, error=detected.parked[0].error)
                await self._registry.commit(runtime, KeyCommit(state=runtime.state, parked=[again]))
                return False
            commit = KeyCommit(
                state=replace(runtime.state, sequence=detected.sequence),
                events=detected.events,
                upserts=detected.upserts,
                unpark=[item.id],
            )
            await self._registry.commit(runtime, commit)
            return True


def _event_from(item: ParkedItem) -> Event:
    raw = dict(item.event or {})
    raw["time"] = datetime.fromisoformat(str(raw["time"]).replace("Z", "+00:00"))
    return Event(**raw)
