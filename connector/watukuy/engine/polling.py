"""One poll of one key: plan with the core, execute the fetch, decide with the core, commit.

Each page is committed on its own, so a crash mid-poll resumes from the last committed page.
A key let go while its poll was in flight (removed, fenced, its connector stopped) has its
result dropped; a key whose connector was paused meanwhile stops after the page in flight.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable

from watukuy.core.children import children_of
from watukuy.core.children import sends as child_sends
from watukuy.core.circuit import CircuitState
from watukuy.core.errors import Fenced, Retriable
from watukuy.core.observe import Observer, OutcomeKind, parked_reason
from watukuy.core.poll import (
    Backoff,
    Decision,
    Emit,
    Failure,
    Page,
    PollPlan,
    Trip,
    begin,
    decide,
    next_lane,
    next_page,
    plan,
)
from watukuy.core.state import Lane, PartitionState
from watukuy.engine.budgets import BudgetGate
from watukuy.engine.fetching import execute
from watukuy.engine.keys import KeyRuntime
from watukuy.engine.progress import LaneProgress
from watukuy.engine.roster import Roster
from watukuy.http import HttpClient
from watukuy.logs import log_context
from watukuy.store.base import KeyCommit

log = logging.getLogger("watukuy.poll")

STORE_RETRY = 1.0  # seconds before a key whose commit the store refused is polled again


class KeyPoller:
    def __init__(
        self,
        roster: Roster,
        http: HttpClient,
        gates: dict[str, BudgetGate],
        stopping: asyncio.Event,
        observer: Observer | None = None,
        progress: LaneProgress | None = None,
    ) -> None:
        self._roster = roster
        self._http = http
        self._gates = gates
        self._stopping = stopping
        self._observer = observer or Observer()
        self._progress = progress or LaneProgress()

    async def poll(self, runtime: KeyRuntime) -> None:
        """Poll every lane of ``runtime`` that is due, in priority order, once each.

        Live first; then reconcile and backfill get their turn in the same call, so a
        caller that ticks less often than the key's interval still moves them forward.
        Never raises for vendor or user-code failures.
        """
        with log_context(poller=runtime.poller.name, partition=runtime.partition.key):
            await self._poll_key(runtime)

    async def _poll_key(self, runtime: KeyRuntime) -> None:
        roster = self._roster
        async with runtime.lock:
            done: set[Lane] = set()
            while self._may_go_on(runtime):
                lane = next_lane(runtime.state, roster.clock.now())
                if lane is None or lane in done:
                    break
                done.add(lane)
                with log_context(lane=lane.value):
                    if not await self._poll_lane(runtime, lane):
                        break
            if roster.still_holds(runtime):
                roster.reschedule(runtime)

    async def _poll_lane(self, runtime: KeyRuntime, lane: Lane) -> bool:
        """Page through one lane; ``False`` when the key must not be polled further now."""
        roster = self._roster
        clock = roster.clock
        poller = runtime.poller
        step = plan(poller, runtime.state, lane)
        while True:
            state = begin(runtime.state, clock.now())
            responses: list[Answer] = []
            started = clock.now()
            outcome = await execute(
                poller,
                runtime.partition,
                step,
                http=self._http,
                # Only the live lane asks "changed since?": a full scan must see everything.
                validators=dict(state.validators) if lane is Lane.LIVE else {},
                acquire=self._acquirer(runtime, lane),
                now=clock.now,
                signal=self._stopping,
                on_response=_collect(responses),
            )
            fetched = clock.now() - started
            circuit = runtime.state.circuit.state  # before begin(): a probe moves it
            decision = decide(
                poller,
                state,
                runtime.snapshot,
                step,
                outcome,
                clock.now(),
                parked=runtime.parked,
                publishable=roster.store.unpublishable,
            )
            if not roster.still_holds(runtime):
                return False  # let go meanwhile: the result is dropped
            try:
                await roster.commit(runtime, self._commit_of(runtime, decision))
            except Fenced:
                return False  # the roster let the key go
            except Retriable as exc:
                # Not committed: the page is fetched again once the store can take it.
                log.warning("%s: commit failed, retrying in %gs: %s", runtime.key, STORE_RETRY, exc)
                roster.due.hold(runtime.key, clock.now() + STORE_RETRY)
                return False
            # Told once committed: a result dropped or refused is fetched again, and a key let
            # go meanwhile must not grow series again.
            self._observed(runtime, step, outcome, decision, fetched, responses)
            self._circuit_moved(runtime, circuit, state, decision)
            if isinstance(decision, Trip):
                log.warning("%s: circuit opened: %s", runtime.key, decision.reason)
                return False
            if isinstance(decision, Backoff):
                log.info("%s: backing off: %s", runtime.key, decision.reason)
                return False
            if not decision.more or self._stopping.is_set():
                return True
            if not self._may_go_on(runtime):
                return False
            step = next_page(poller, step, decision)

    def _commit_of(self, runtime: KeyRuntime, decision: Decision) -> KeyCommit:
        if not isinstance(decision, Emit):
            return KeyCommit(state=decision.state)
        parked, sent = decision.parked, []
        children = children_of(self._roster.definitions(), runtime.poller.name)
        if children and decision.events:
            asked = child_sends(
                runtime.poller,
                runtime.partition.key,
                children,
                decision.events,
                self._roster.clock.now(),
                runtime.parked.keys() | {item.id for item in parked},
            )
            parked, sent = [*parked, *asked.parked], asked.commands
        return KeyCommit(
            state=decision.state,
            events=decision.events if runtime.poller.publishes else (),
            upserts=decision.upserts,
            forget=decision.forget,
            parked=parked,
            sends=sent,
        )

    def _observed(
        self,
        runtime: KeyRuntime,
        step: PollPlan,
        outcome: Page | Failure,
        decision: Decision,
        seconds: float,
        responses: list[Answer],
    ) -> None:
        observer = self._observer
        poller, partition, lane = runtime.poller.name, runtime.partition.key, step.lane.value
        for method, status, took in responses:
            observer.http_response(poller, partition, method, status, took)
        if not isinstance(decision, Emit):
            observer.poll_decided(poller, partition, lane, decision.kind, seconds)
            return
        assert isinstance(outcome, Page)  # only a page is emitted
        kind = OutcomeKind.NOT_MODIFIED if outcome.not_modified else OutcomeKind.OK
        observer.poll_decided(poller, partition, lane, kind, seconds)
        items = len(outcome.result.items)
        observer.page_fetched(poller, partition, lane, items, outcome.not_modified)
        if decision.events:
            counts: Counter[str] = Counter(event.type for event in decision.events)
            observer.events_committed(poller, partition, lane, counts)
        for item in decision.parked:
            reason = parked_reason(item.kind, item.error)
            observer.item_parked(poller, partition, item.kind, reason)
        self._progress.page_done(runtime.key, step.lane, step.cursor, items, decision.state)

    def _circuit_moved(
        self, runtime: KeyRuntime, before: CircuitState, begun: PartitionState, decision: Decision
    ) -> None:
        """Each move of the key's circuit in this page: the probe's, then the outcome's."""
        poller, partition = runtime.poller.name, runtime.partition.key
        probe, after = begun.circuit.state, decision.state.circuit.state
        if probe is not before:
            self._observer.circuit_moved(poller, partition, before.value, probe.value)
        if after is not probe:
            self._observer.circuit_moved(poller, partition, probe.value, after.value)

    def _may_go_on(self, runtime: KeyRuntime) -> bool:
        """Still held, its connector still polling, and the engine not stopping."""
        roster = self._roster
        return (
            roster.still_holds(runtime)
            and roster.target(runtime.poller.name).polls
            and not self._stopping.is_set()
        )

    def _acquirer(self, runtime: KeyRuntime, lane: Lane) -> Callable[[], Awaitable[None]] | None:
        name = runtime.poller.budget
        if name is None:
            return None
        gate = self._gates[name]
        weight = runtime.poller.budget_weight

        async def acquire() -> None:
            await gate.acquire(runtime.key, lane, weight)

        return acquire


Answer = tuple[str, int | None, float]  # method, status (None: no answer), seconds


def _collect(into: list[Answer]) -> Callable[[str, int | None, float], None]:
    def answered(method: str, status: int | None, seconds: float) -> None:
        into.append((method, status, seconds))

    return answered
