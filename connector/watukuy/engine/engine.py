"""``Engine``: the public face of the runtime. It wires the pieces and owns the tasks.

``tick()`` refreshes partitions if due, polls the due keys (at most four at once), delivers
committed events to handlers, and returns. ``run()`` does the same continuously, every due key
concurrently up to ``max_concurrency``, until ``stop()``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Hashable, Iterable, Mapping
from typing import Any

from watukuy.core.clock import Clock, SystemClock
from watukuy.core.errors import ConfigError
from watukuy.core.events import Event
from watukuy.core.inspect import PollerInspect
from watukuy.core.observe import Fanout, Observer, OutcomeKind
from watukuy.core.poller import Partition, Poller
from watukuy.core.state import ParkedItem
from watukuy.core.validation import positive_int
from watukuy.engine import children, received
from watukuy.engine.budgets import split_budgets
from watukuy.engine.changes import KeyChanges
from watukuy.engine.child_streams import ChildStreams
from watukuy.engine.connectors import Connectors, OffsetsApi
from watukuy.engine.credentials import Vault
from watukuy.engine.definitions import budget_gates, checked_pollers, prepared
from watukuy.engine.figures import HeldFigures
from watukuy.engine.handlers import Dispatcher, Handler, Subscription
from watukuy.engine.inflight import PageLimits
from watukuy.engine.inspection import inspection, status_mark
from watukuy.engine.keys import KeyRuntime
from watukuy.engine.operations import Operations, ParkedApi
from watukuy.engine.partitions_api import PartitionsApi
from watukuy.engine.polling import KeyPoller
from watukuy.engine.progress import LaneProgress
from watukuy.engine.relisting import list_due
from watukuy.engine.roster import Roster
from watukuy.engine.snapshots import DEFAULT_BUDGET, Snapshots
from watukuy.engine.turns import Turns
from watukuy.http import HttpClient
from watukuy.store.base import KeyCommit, Store
from watukuy.store.memory import MemoryStore

log = logging.getLogger("watukuy.engine")

TICK_CONCURRENCY = 4
GATHER = 0.25
"""Seconds ``run()`` waits at least between two passes that start due keys: the keys that
come due meanwhile start together. Keys spread evenly over their interval (see
``core.schedule.after_poll``) would otherwise each get a pass of the loop, and a request of
its own at the vendor, at twice the CPU per poll on both sides (10,000 idle keys: 32.8% of a
core against 14.5% for the same polls bunched). A key starts at most this late (a trigger
wakes ``run()`` at once); 0.1 s cost a whole idle runner about 15% more CPU than 0.25 s, and
0.5 s saved nothing more (``integration/bench/RESULTS.md``, stop 40)."""
STOP_GRACE = 10.0  # seconds a stopping run() lets its polls end before it cancels them
SERVED_EVERY = 2.0
"""Seconds between two words to the store on what was served (:meth:`Engine._tell_served`):
after a crash, the next owner polls again at most the idle polls of this many seconds."""


class Engine:
    def __init__(
        self,
        pollers: Iterable[Poller],
        *,
        store: Store | None = None,
        budgets: Mapping[str, Any] | None = None,
        clock: Clock | None = None,
        http: HttpClient | None = None,
        max_concurrency: int = 256,
        pages_in_flight: int = 16,
        pages_in_flight_total: int = 1024,
        snapshot_cache: int = DEFAULT_BUDGET,
        owner: str | None = None,
        observers: Observer | Iterable[Observer] | None = None,
        credentials: Vault | None = None,  # the tenants' grants (else in memory only)
        stop_grace: float = STOP_GRACE,
    ) -> None:
        by_name = checked_pollers(pollers)
        positive_int(max_concurrency, "max_concurrency", repr(max_concurrency))
        self.clock: Clock = clock or SystemClock()
        self.store: Store = store if store is not None else MemoryStore()
        self.owner = owner
        self.credentials = credentials or Vault(runner=owner or "")
        # What happens is told to the observers (metrics, probes) and to the lanes' progress.
        self._progress = LaneProgress()
        extra = [observers] if isinstance(observers, Observer) else list(observers or ())
        self.observer: Observer = Fanout([self._progress, *extra], on_error=_observer_failed)
        self._gates = budget_gates(by_name, budgets, self.clock, self.observer)
        self._http, self._owns_http = http or HttpClient(), http is None
        self._max_concurrency, self._stop_grace = max_concurrency, stop_grace
        self._stopping, self._wake = asyncio.Event(), asyncio.Event()
        # run()'s own wake and its next pass's earliest start (GATHER); _tell_served's last.
        self._deadline = self._gathered = self._served_at = float("-inf")
        self._in_flight: dict[str, asyncio.Task[None]] | None = None  # run()'s polls, by key
        self._first: set[str] | None = None  # keys' first polls under way (None: not begun)
        self.store.bind(by_name)
        self._ownership_changed = True
        self.store.watch(self._on_store_change)
        streams = ChildStreams(children.child_listing, children.pause_dormant, children.wake)
        self._roster = Roster(by_name, self.store, self.clock, streams, self._split_budgets,
                              self.observer, snapshot_cache)  # fmt: skip
        self._poller = KeyPoller(
            self._roster, self._http, self._gates, self._stopping, self.observer, self._progress,
            PageLimits(pages_in_flight, pages_in_flight_total), self._turn_wanted, self.credentials,
        )  # fmt: skip
        feeds = {name: self.store.events(name) for name in by_name}
        self._dispatcher = Dispatcher(
            by_name, feeds, partition_of=self._partition_of, park=self._park_poison,
            clock=self.clock,
        )  # fmt: skip
        self._ops = Operations(self._roster, self._dispatcher, self._wake.set)
        self._received = received.Received(self._ops.received, self._wake.set)
        self.parked = ParkedApi(self._roster, self._ops)
        self.partitions = PartitionsApi(self._roster)
        self._connectors = Connectors(
            self._roster, self._dispatcher, self._ops, self._prepare, self._wake.set
        )
        self.offsets = OffsetsApi(self._connectors)
        self.figures = HeldFigures(self._roster)  # what metrics read of the held keys

    @property
    def snapshots(self) -> Snapshots:
        """Which keys hold their snapshot in memory (figures for metrics)."""
        return self._roster.snapshots

    def _prepare(self, poller: object, path: str) -> Poller:
        """A poller given at run time, checked as the constructor checks its list."""
        return prepared(poller, path, self._gates)

    def _split_budgets(self) -> None:
        """Each budget's share for this instance: the part of its keys the store gives us."""
        listed = self._roster.listings.current()
        split_budgets(self._gates, self._roster.definitions(), listed, self.store.owns)

    # -- running ----------------------------------------------------------------------------

    async def tick(self) -> None:
        """Refresh partitions if due, poll every due key (four at a time), deliver events."""
        await list_due(self._roster)
        await self._follow_store()
        due = self._roster.due.pop_due(self.clock.now())
        turns = Turns(TICK_CONCURRENCY)
        async with asyncio.TaskGroup() as group:
            for key in due:
                runtime = self._roster.runtime_of(key)
                if runtime is not None:
                    group.create_task(self._poll_limited(runtime, turns))
        self._tell_served(set(), every=0.0)
        await self._dispatcher.drain()

    async def run(self) -> None:
        """Poll every due key concurrently until :meth:`stop`; then return cleanly.

        A :meth:`stop` that comes before ``run()`` got going (a SIGTERM during start-up) still
        counts: the stop request is consumed when ``run()`` returns, not when it starts.
        """
        turns = Turns(self._max_concurrency)
        in_flight: dict[str, asyncio.Task[None]] = {}
        self._in_flight, self._first, first = in_flight, None, set()
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self._dispatcher.run(self._stopping))
                while not self._stopping.is_set():
                    # Cleared as a pass begins, not as it ends: a command or a change of
                    # ownership the store reports while the pass runs (its await points)
                    # makes another pass at once, not one at the next deadline (up to 1 s on).
                    self._wake.clear()
                    # The listings due (the first pass's: the keys to start with); a stop
                    # cuts them short.
                    await list_due(self._roster, self._stopping)
                    await self._follow_store(group)
                    self._tell_served(in_flight)
                    for key in self._roster.due.pop_due(self.clock.now()):
                        runtime = self._roster.runtime_of(key)
                        if runtime is None or key in in_flight:
                            continue
                        if not runtime.polled:
                            first.add(key)
                        in_flight[key] = group.create_task(
                            self._poll_tracked(runtime, turns, in_flight)
                        )
                    self._first = first  # the first pass is over: its keys are taken in
                    await self._sleep_until_due()
                await self._let_polls_end(set(in_flight.values()))
        finally:
            self._in_flight = None
            self._stopping.clear()

    async def _let_polls_end(self, polls: set[asyncio.Task[None]]) -> None:
        """On :meth:`stop`, polls end after their page; one still waiting after ``stop_grace``
        (for a budget's token an hour away, or a silent vendor) is cancelled rather than hold
        the stop past an orchestrator's SIGKILL: its key is due again, as after a crash."""
        late = (await asyncio.wait(polls, timeout=self._stop_grace))[1] if polls else ()
        if late:
            log.warning("stopping: %d poll(s) still waiting after %gs: cancelled", len(late),
                        self._stop_grace)  # fmt: skip
        for poll in late:
            poll.cancel()

    def _tell_served(self, polling: Collection[str], every: float = SERVED_EVERY) -> None:
        """At most ``every`` seconds apart, tell the store the time before which every poll
        due was made (:meth:`Store.served_until`), once the keys it owns are the keys held:
        while ownership moves, what this instance holds does not speak for them."""
        now, roster = self.clock.now(), self._roster
        if now - self._served_at < every:
            return
        if self._ownership_changed or roster.activation_pending:
            return
        self._served_at = now
        dues = [rt.state.schedule.next_due for k in polling if (rt := roster.runtime_of(k))]
        self.store.served_until(roster.due.served_until(dues, now))

    def _turn_wanted(self) -> bool:
        """Whether another key waits for its turn: due now, or for a turn of ``run()``
        (:mod:`.turns`), or landing its pages and due again soon. Out of ``run()``
        (``tick()``), every poll takes its turn as it comes."""
        in_flight = self._in_flight  # keys waiting for a turn, or landing a poll's pages
        if in_flight is None or len(in_flight) > self._max_concurrency:
            return True
        next_at = self._roster.due.next_at()
        return next_at is not None and next_at <= self.clock.now()

    def _on_store_change(self) -> None:
        self._ownership_changed = True
        self._wake.set()

    async def _follow_store(self, group: asyncio.TaskGroup | None = None) -> None:
        """Take on or give up keys as ownership moved; apply commands sent by other instances
        (in a task of ``group``'s, if given)."""
        if self._ownership_changed or self._roster.activation_pending:
            self._ownership_changed = False
            await self._roster.sync_ownership()
            self._end_polls_let_go()
        now = self.clock.now()
        due = self._received.due(self.store.take_commands(), now)
        if not due:
            return
        if group is None:
            await self._received.apply(due, now)
        else:  # not awaited by run(): a command waits for its key's poll to end
            group.create_task(self._received.apply(due, now))

    def _end_polls_let_go(self) -> None:
        """Polls of keys that moved away end now, not after what they await: their pages
        would be dropped, and one waiting for a budget's token waited for a share of 0, which
        never earns one; it held the runner's stop, and the key if it came back."""
        roster, in_flight = self._roster, self._in_flight or {}
        for key in [key for key in in_flight if roster.runtime_of(key) is None]:
            in_flight[key].cancel()

    async def stop(self) -> None:
        """Ask ``run()`` to finish: in-flight polls end after their current page."""
        self._stopping.set()
        self._wake.set()

    async def close(self) -> None:
        await self.stop()
        await self.credentials.close()  # refreshes under way store what they got
        if self._owns_http:
            await self._http.close()
        await self.store.close()

    async def __aenter__(self) -> Engine:
        await self.store.start()
        await self._http.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _poll_limited(self, runtime: KeyRuntime, turns: Turns) -> None:
        turn = turns.turn()
        try:
            await turn.take()
            await self._poller.poll(runtime, turn)
        except asyncio.CancelledError:
            # Popped from the due queue and cancelled before its poll began (waiting for a
            # slot or for the key): due again as it was. A poll that began rescheduled it.
            roster = self._roster
            if roster.still_holds(runtime) and roster.due.at(runtime.key) is None:
                roster.reschedule(runtime)
            raise
        finally:
            turn.give_back()

    async def _poll_tracked(
        self, runtime: KeyRuntime, turns: Turns, in_flight: dict[str, asyncio.Task[None]]
    ) -> None:
        try:
            await self._poll_limited(runtime, turns)
        finally:
            in_flight.pop(runtime.key, None)
            runtime.polled = True
            if self._first:
                self._first.discard(runtime.key)
            # Wake run() only if the key is now due before run() wakes anyway: at 10k keys a
            # wake per poll was a loop pass per poll. A key due within the pass's GATHER waits
            # for the pass it was gathered for (waking for it made 9 passes where 1 was due).
            next_at = self._roster.due.next_at()
            if next_at is not None and max(next_at, self._gathered) < self._deadline:
                self._wake.set()

    async def _sleep_until_due(self) -> None:
        now = self.clock.now()
        wake_at = self._roster.due.next_at()
        refresh_at = self._roster.next_refresh_at(now)
        if refresh_at is None:
            refresh_at = now + 1.0
        self._gathered = now + GATHER
        if wake_at is not None:
            wake_at = max(wake_at, self._gathered)
        deadline = min(wake_at if wake_at is not None else now + 1.0, refresh_at, now + 1.0)
        self._deadline = deadline
        # A timer setting the event rather than wait_for(): no task per pass of the loop.
        timer = asyncio.get_running_loop().call_later(max(0.0, deadline - now), self._wake.set)
        try:
            await self._wake.wait()
        finally:
            timer.cancel()
            self._deadline = float("-inf")

    def _partition_of(self, poller: str, key: str) -> Partition | None:
        """The partition with its data as last listed, whether this instance holds the key or
        not: on Kafka, handlers get the events of keys other instances poll."""
        held = self._roster.partition_named(poller, key)
        if held is not None:
            return held
        return self._roster.listings.partition(poller, key)

    async def _park_poison(self, event: Event, error: str, attempts: int) -> None:
        item = ParkedItem(
            id=event.id,
            poller=event.poller,
            partition=event.partition,
            kind="poison",
            item=event.data,
            error=error,
            attempts=attempts,
            parked_at=self.clock.now(),
            lane=event.lane,
            subject=event.subject,
            event=event.to_dict(),
        )
        runtime = self._roster.runtime_of(event.key)
        # Another instance holds the key (Kafka), or it waits for a newer release here (its
        # parked records are not ours to write): the DLQ copy only.
        if runtime is None or not runtime.held:
            if await self._dispatcher.dead_letter(item):
                log.warning("%s: event #%d copied to the DLQ", event.key, event.sequence)
            else:
                log.warning("%s: cannot park event #%d, key not held", event.key, event.sequence)
            return
        async with runtime.lock:
            await self._roster.commit(runtime, KeyCommit(state=runtime.state, parked=[item]))
        self.observer.item_parked(event.poller, event.partition, "poison", OutcomeKind.ERROR)

    # -- per-partition operations -------------------------------------------------------------

    # Thin adapters over watukuy.core.operations: the names, arguments and effects live there.

    async def trigger(self, poller: str, *, partition: str | None = None) -> None:
        await self._ops.run("trigger", poller, partition)

    async def pause(self, poller: str, *, partition: str | None = None) -> None:
        await self._ops.run("pause", poller, partition)

    async def resume(self, poller: str, *, partition: str | None = None) -> None:
        await self._ops.run("resume", poller, partition)

    async def backfill(
        self, poller: str, *, from_: Any = None, partition: str | None = None
    ) -> None:
        await self._ops.run("backfill", poller, partition, from_=from_)

    async def replay(self, poller: str, *, from_: Any, partition: str | None = None) -> None:
        await self._ops.run("replay", poller, partition, from_=from_)

    async def reset_cursor(
        self,
        poller: str,
        *,
        partition: str | None = None,
        to: Any = None,
        clear_snapshot: bool = False,
    ) -> None:
        await self._ops.run("reset_cursor", poller, partition, to=to, clear_snapshot=clear_snapshot)

    async def reconcile(self, poller: str, *, partition: str | None = None) -> None:
        """Start a full reconcile scan now (finds deletions)."""
        await self._ops.run("reconcile", poller, partition)

    async def operate(
        self, operation: str, poller: str, *, partition: str | None = None, args: object = None
    ) -> Any:
        """Any per-key operation by name with its arguments in JSON form (a REST body):
        ``operate("backfill", "invoices", partition="t_42", args={"from": None})``.

        Returns what the engine method would (the retried ids for ``retry``)."""
        return await self._ops.run_json(operation, poller, partition, args)

    # -- connectors at run time -------------------------------------------------------------

    async def add_poller(self, poller: Poller, *, target: str | None = None) -> None:
        """Add a poller, or redefine one of that name (its keys restart, state kept)."""
        await self._connectors.add(poller, target)

    async def remove_poller(self, name: str) -> None:
        """Remove a poller: its keys stop; their state stays in the store."""
        await self._connectors.remove(name)

    def target(self, name: str) -> str:
        """The poller's target: ``"RUNNING"``, ``"PAUSED"`` or ``"STOPPED"``."""
        return self._connectors.target(name)

    async def set_target(self, name: str, target: str) -> None:
        """RUNNING polls; PAUSED keeps the keys without polling; STOPPED lets them go (state
        kept) and allows :meth:`alter_offsets`. A key paused by the user stays paused."""
        await self._connectors.set_target(name, target)

    async def restart(self, name: str) -> None:
        """Hold every key of the poller again, reloaded from the store."""
        await self._connectors.restart(name)

    async def control(self, name: str, operation: str) -> None:
        """A connector operation by name: ``pause``, ``resume``, ``stop`` or ``restart``."""
        await self._connectors.control(name, operation)

    def listed(self, name: str) -> list[str]:
        """The partition keys of ``name`` as last listed (every key, owned here or not), in
        key order; ``[]`` before its first refresh or for an unknown poller."""
        return self._roster.listings.listed(name)

    # -- observing --------------------------------------------------------------------------

    def inspect(self, keys: Iterable[str] | None = None) -> list[PollerInspect]:
        """One entry per active partition (of ``keys`` alone, when given), from memory: cheap
        enough for every health check."""
        now, roster = self.clock.now(), self._roster
        if keys is None:
            runtimes = roster.held()
        else:
            runtimes = [rt for key in keys if (rt := roster.runtime_of(key)) is not None]
        return [inspection(rt, roster, self._progress, self.owner, now) for rt in runtimes]

    def watch_keys(self) -> KeyChanges:
        """The held keys touched from now on (:mod:`~watukuy.engine.changes`): whatever
        :meth:`inspect` shows of a key not touched since the watcher's last ``take()`` is
        the same but for the time (its lag, whether a throttle still holds). The watcher
        holds every key held now to begin with, and tells their status marks."""
        roster, progress = self._roster, self._progress

        def marks(keys: Iterable[str]) -> dict[str, Hashable]:
            return {
                key: status_mark(runtime, roster, progress)
                for key in keys
                if (runtime := roster.runtime_of(key)) is not None
            }

        held = [runtime.key for runtime in roster.held()]
        return roster.changes.watch(held, marks, self._backlogged)

    def _backlogged(self) -> bool:
        """Whether ``run()`` is still listing and taking in its keys, or polling keys for the
        first time since they were taken in (a start, a takeover), or more keys are due than
        it polls at once."""
        in_flight, first = self._in_flight, self._first
        return in_flight is not None and (
            first is None or bool(first) or len(in_flight) > self._max_concurrency
        )

    def on(self, poller: str, handler: Handler) -> None:
        self._roster.poller(poller)
        if not callable(handler):
            raise ConfigError("must be callable", "handler")
        self._dispatcher.on(poller, handler)

    def subscribe(self, poller: str) -> Subscription:
        self._roster.poller(poller)
        return self._dispatcher.subscribe(poller)

    @property
    def pollers(self) -> dict[str, Poller]:
        return self._roster.definitions()


def _observer_failed(observer: Observer, hook: str, error: Exception) -> None:
    # An observer's bug costs its own numbers, never a poll or a commit.
    log.error("observer %s failed in %s: %r", type(observer).__name__, hook, error)


__all__ = ["Engine", "PartitionsApi"]
