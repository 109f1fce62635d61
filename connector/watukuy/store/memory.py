"""The in-memory store: tests and embedding. Same contract as the Kafka store, no durability.

Atomicity comes for free: a batch is checked in full first, then applied without an await in
between, so no other coroutine ever sees half of it.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence

from watukuy.core.commands import Command
from watukuy.core.errors import ConfigError, Fenced, Retriable
from watukuy.core.events import Event
from watukuy.core.keys import key_text
from watukuy.core.poller import Poller
from watukuy.core.state import ParkedItem, PartitionState, SnapshotEntry
from watukuy.store import apply as commit_rule
from watukuy.store.base import KeyCommit, StoredKey


class MemoryStore:
    def __init__(self) -> None:
        self.states: dict[str, PartitionState] = {}
        self.snapshots: dict[str, dict[str, SnapshotEntry]] = defaultdict(dict)
        self.parked: dict[str, dict[str, ParkedItem]] = defaultdict(dict)
        self.outbox: dict[str, list[Event]] = defaultdict(list)
        self.commits = 0
        self._listeners: dict[str, list[asyncio.Queue[Event]]] = defaultdict(list)
        # Commands sent by commits (a parent's to its children), pending until a commit names
        # them; handed over again to every engine that starts watching (a restart).
        self.pending: dict[str, Command] = {}
        self._handed: list[Command] = []
        self._watchers: list[Callable[[], None]] = []
        self._runs = commit_rule.PageRuns()

    def bind(self, pollers: Mapping[str, Poller]) -> None:
        return None

    async def add_poller(self, poller: Poller) -> None:
        return None  # events live in memory: nothing to create

    def owns(self, poller: str, partition: str) -> bool:
        return True  # one process, no group: every key is ours

    def watch(self, changed: Callable[[], None]) -> None:
        self._watchers.append(changed)
        self._handed = list(self.pending.values())  # a new engine: nothing was applied yet

    def take_commands(self) -> list[Command]:
        taken, self._handed = self._handed, []
        return taken

    async def send_command(self, command: Command) -> None:
        raise ConfigError(f"no owner to send {command.op} to: the memory store owns every key")

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def load(self, poller: str, partition: str, *, snapshot: bool = True) -> StoredKey | None:
        key = key_text(poller, partition)
        state = self.states.get(key)
        if state is None:
            return None
        return StoredKey(
            state=state,
            snapshot=dict(self.snapshots.get(key, {})) if snapshot else {},
            parked=dict(self.parked.get(key, {})),
        )

    def entries(
        self, poller: str, partition: str, identities: Iterable[str]
    ) -> dict[str, SnapshotEntry]:
        snapshot = self.snapshots.get(key_text(poller, partition), {})
        return {i: snapshot[i] for i in identities if i in snapshot}

    async def commit(self, batch: Sequence[KeyCommit]) -> None:
        try:
            for entry in batch:
                if not self._runs.admits(entry.key, entry.run):
                    raise Retriable(f"{entry.key}: a page it builds on was not committed")
            commit_rule.check_epochs(batch, self.states.get)
        except (Retriable, Fenced):
            for entry in batch:
                self._runs.refused(entry.key, entry.run)
            raise
        for entry in batch:
            self._apply(entry)
        self.commits += 1
        if any(entry.sends for entry in batch):
            for changed in self._watchers:
                changed()

    def unpublishable(self, event: Event) -> str | None:
        return None  # no topic, no size limit

    def served_until(self, until: float) -> None:
        """Nothing to keep: every commit is written whole, due times included."""

    def _apply(self, entry: KeyCommit) -> None:
        key = entry.key
        self.states[key] = commit_rule.apply(entry, self.snapshots[key], self.parked[key])
        for command_id in entry.commands:
            self.pending.pop(command_id, None)
        for command in entry.sends:
            self.pending[command.id] = command
            self._handed.append(command)
        if entry.events:
            poller = entry.state.poller
            self.outbox[poller].extend(entry.events)
            for queue in self._listeners[poller]:
                for event in entry.events:
                    queue.put_nowait(event)

    async def remove(self, poller: str, partition: str, command: str | None = None) -> None:
        key = key_text(poller, partition)
        if command is not None:
            self.pending.pop(command, None)
        self.states.pop(key, None)
        self.snapshots.pop(key, None)
        self.parked.pop(key, None)

    async def partitions(self, poller: str) -> list[str]:
        return [state.partition for state in self.states.values() if state.poller == poller]

    def states_of(self, poller: str, *, waiting: bool = True) -> list[PartitionState]:
        # Every state, waiting or not: this store holds them all decoded anyway.
        return [state for state in self.states.values() if state.poller == poller]

    def events(self, poller: str) -> LocalFeed:
        return LocalFeed(self._listeners[poller])

    def keys_with_records(self) -> set[str]:
        """Every key that has any record left (tests assert ``remove`` leaves none)."""
        return {
            key
            for key in set(self.states) | set(self.snapshots) | set(self.parked)
            if key in self.states or self.snapshots.get(key) or self.parked.get(key)
        }


class LocalFeed:
    """Events committed by this process, for handlers and subscribers of the memory store.

    Registered at creation, so nothing committed after ``events()`` returns is missed."""

    def __init__(self, listeners: list[asyncio.Queue[Event]]) -> None:
        self._queue: asyncio.Queue[Event] = asyncio.Queue()
        self._listeners = listeners
        listeners.append(self._queue)

    def __aiter__(self) -> LocalFeed:
        return self

    async def __anext__(self) -> Event:
        return await self._queue.get()

    def ready(self) -> list[Event]:
        out: list[Event] = []
        while not self._queue.empty():
            out.append(self._queue.get_nowait())
        return out

    def listen(self) -> None:
        return None  # registered at creation

    def done(self, event: Event) -> None:
        return None  # nothing to commit: the outbox is the store itself

    async def dead_letter(self, item: ParkedItem) -> bool:
        return False  # every key is held here: poison is always parked

    async def aclose(self) -> None:
        if self._queue in self._listeners:
            self._listeners.remove(self._queue)
