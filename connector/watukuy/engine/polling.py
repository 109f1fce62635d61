"""One poll of one key: plan with the core, execute the fetch, decide with the core, commit.

Each page is committed on its own, so a crash mid-poll resumes from the last committed page;
the next page is fetched while earlier ones wait for their commit (:mod:`.inflight`).
A key let go while its poll was in flight (removed, fenced, its connector stopped) has its
result dropped; a key whose connector was paused meanwhile stops after the page in flight.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import replace
from functools import partial

from watukuy.core.children import children_of
from watukuy.core.children import sends as child_sends
from watukuy.core.circuit import CircuitState
from watukuy.core.errors import Fenced, NewerRelease, Retriable, StateCorrupted
from watukuy.core.observe import Observer, OutcomeKind, parked_reason
from watukuy.core.onchange import dormant
from watukuy.core.poll import (
    Backoff,
    Decision,
    Emit,
    Failure,
    Lookups,
    Page,
    PollPlan,
    Trip,
    begin,
    decide,
    looked_up,
    lookups,
    next_lane,
    next_page,
    page_after,
    plan,
)
from watukuy.core.state import Lane, PartitionState
from watukuy.engine import commits
from watukuy.engine.budgets import Gate, acquirer
from watukuy.engine.children import rest
from watukuy.engine.credentials import Vault
from watukuy.engine.fetching import execute
from watukuy.engine.inflight import (
    Ahead,
    Answer,
    Fetched,
    InFlight,
    PageLimits,
    SentPage,
)
from watukuy.engine.keys import KeyRuntime
from watukuy.engine.progress import LaneProgress
from watukuy.engine.roster import Roster
from watukuy.engine.turns import Turn, waiting_for_token
from watukuy.http import HttpClient
from watukuy.logs import log_context
from watukuy.store.base import KeyCommit

log = logging.getLogger("watukuy.poll")

STORE_RETRY = 1.0  # seconds before a key whose commit the store refused is polled again
NEWER_RETRY = 60.0  # seconds before a key whose snapshot a newer release wrote is tried again


class KeyPoller:
    def __init__(
        self,
        roster: Roster,
        http: HttpClient,
        gates: dict[str, Gate],
        stopping: asyncio.Event,
        observer: Observer | None = None,
        progress: LaneProgress | None = None,
        limits: PageLimits | None = None,
        turn_wanted: Callable[[], bool] | None = None,
        vault: Vault | None = None,
    ) -> None:
        """``turn_wanted``: whether another key waits for its turn to poll. A key's poll that
        stopped at ``max_pages`` goes straight on into its next one only while it says no;
        without it, every poll ends at ``max_pages`` and the key waits for its next turn."""
        self._roster = roster
        self._turn_wanted = turn_wanted
        self._limits = limits or PageLimits()
        self._slots = asyncio.Semaphore(self._limits.total)
        self._http = http
        self._gates = gates
        self._stopping = stopping
        self._observer = observer or Observer()
        self._progress = progress or LaneProgress()
        self._vault = vault

    async def poll(self, runtime: KeyRuntime, turn: Turn | None = None) -> None:
        """Poll every lane of ``runtime`` that is due, in priority order, once each.

        Live first; then reconcile and backfill get their turn in the same call, so a
        caller that ticks less often than the key's interval still moves them forward.
        ``turn``: taken (again) before each lane fetches, given back as its last page is
        sent. Never raises for vendor or user-code failures.
        """
        with log_context(poller=runtime.poller.name, partition=runtime.partition.key):
            await self._poll_key(runtime, turn)

    async def _poll_key(self, runtime: KeyRuntime, turn: Turn | None) -> None:
        roster = self._roster
        async with runtime.lock:
            done: set[Lane] = set()
            try:
                while self._may_go_on(runtime):
                    lane = next_lane(runtime.state, roster.clock.now())
                    if lane is None or lane in done:
                        break
                    done.add(lane)
                    if turn is not None and not turn.held:  # given back by a lane before
                        await turn.take()
                    with log_context(lane=lane.value):
                        if not await self._poll_lane(runtime, lane, turn):
                            break
            finally:  # however the poll ended, cancelled included: the key is due again
                if roster.still_holds(runtime) and dormant(runtime.poller, runtime.state):
                    rest(roster, runtime)  # an on_change child done: let go until triggered
                elif roster.still_holds(runtime):
                    roster.reschedule(runtime)
        roster.snapshots.trim()  # its lock is free: its snapshot may go too

    async def _poll_lane(self, runtime: KeyRuntime, lane: Lane, turn: Turn | None) -> bool:
        """Page through one lane; ``False`` when the key must not be polled further now.

        Pages are fetched while earlier ones wait for their commit (:mod:`.inflight`); the
        lane ends once every page it sent was answered.
        """
        flight = InFlight(runtime, turn)
        failed: Exception | None = None
        async with asyncio.TaskGroup() as answers:
            try:
                go_on = await self._page_through(runtime, lane, flight, answers)
            except Exception as exc:  # raised again once the pages sent are answered
                failed, go_on = exc, False
            flight.last_page_sent()
            landed = await self._land(runtime, flight, keep=0)
        error = failed or flight.error
        if error is not None:
            raise error
        return go_on and landed

    async def _page_through(
        self, runtime: KeyRuntime, lane: Lane, flight: InFlight, answers: asyncio.TaskGroup
    ) -> bool:
        clock = self._roster.clock
        step = plan(runtime.poller, flight.state, lane, clock.now())
        ahead: Ahead | None = None
        try:
            while True:
                begun = begin(flight.state, clock.now())
                got = await self._fetched(runtime, lane, step, begun, ahead, flight.turn)
                ahead = self._ask_ahead(
                    runtime, lane, step, begun, got.outcome, answers, flight.turn
                )
                if ahead is not None:
                    await asyncio.sleep(0)  # lets it send its request before this is decided
                decision = await self._send_page(runtime, step, begun, got, flight, answers)
                if decision is None:
                    return False  # let go meanwhile, or a page before it refused: dropped
                if not isinstance(decision, Emit):
                    return False  # tripped or backing off
                if self._stopping.is_set():
                    return True
                if decision.more:
                    step = next_page(runtime.poller, step, decision)
                elif self._goes_on(runtime, lane, decision):
                    # The next poll of the lane, begun at once: no other key waits for its
                    # turn, so this one's pages need not commit first (draining them cost a
                    # tenant's backlog a commit interval every max_pages pages).
                    step = plan(runtime.poller, flight.state, lane, clock.now())
                else:
                    return True
                if not await self._land(runtime, flight, keep=self._limits.per_key - 1):
                    return False
                if not self._may_go_on(runtime):
                    return False
        finally:
            if ahead is not None:
                ahead.task.cancel()  # asked for and not needed: its answer is dropped

    async def _send_page(
        self,
        runtime: KeyRuntime,
        step: PollPlan,
        begun: PartitionState,
        got: Fetched,
        flight: InFlight,
        answers: asyncio.TaskGroup,
    ) -> Decision | None:
        """Decide the page and send it to the store; ``None`` when it is to be dropped."""
        roster = self._roster
        reads = lookups(step, got.outcome)
        try:
            if reads is Lookups.ENTRIES and runtime.snapshot is None:
                found = roster.snapshots.read(runtime, looked_up(runtime.poller, got.outcome))
                snapshot = flight.snapshot_over(found)
            else:
                if reads is not Lookups.NOTHING:  # loaded whole, or held: a hit, kept recent
                    await roster.snapshots.hold(runtime)
                    flight.rebase()
                snapshot = flight.snapshot()
        except (Fenced, Retriable) as exc:  # let go meanwhile, or the store is busy
            self._refused(runtime, exc, flight)
            return None
        except NewerRelease as exc:
            # Its snapshot holds a newer release's records: left for an instance that
            # reads them (ownership moves it there), looked at again now and then.
            log.warning("%s: not polled: %s", runtime.key, exc)
            roster.due.hold(runtime.key, roster.clock.now() + NEWER_RETRY)
            return None
        decision = decide(
            runtime.poller,
            begun,
            snapshot,
            step,
            got.outcome,
            roster.clock.now(),
            parked=flight.parked(),
            publishable=roster.store.unpublishable,
        )
        if flight.broken or not roster.still_holds(runtime):
            return None
        commit = self._commit_of(runtime, decision, flight)
        page = SentPage(
            commit, step, got.outcome, decision, got.seconds, got.responses,
            flight.state.circuit.state, begun,
        )  # fmt: skip
        await self._slots.acquire()
        if not flight.pages and _ends_the_lane(decision):
            flight.last_page_sent()
            await self._commit_here(runtime, page, flight)
            return decision
        page.answer = answers.create_task(self._answer(runtime, commit))
        # Given back however the task ends: one cancelled before it ran never reaches a
        # ``finally`` of its own.
        page.answer.add_done_callback(self._give_back_slot)
        flight.sent(page)
        return decision

    async def _commit_here(self, runtime: KeyRuntime, page: SentPage, flight: InFlight) -> None:
        """Commit ``page`` in this task, a slot taken for it: nothing is fetched while it
        commits, so it needs no task of its own (most polls of an idle runner are one page)."""
        flight.sent(page)
        try:
            error = await self._answer(runtime, page.commit)
        finally:
            self._slots.release()
        self._took(runtime, flight, error)

    async def _fetched(
        self,
        runtime: KeyRuntime,
        lane: Lane,
        step: PollPlan,
        begun: PartitionState,
        ahead: Ahead | None,
        turn: Turn | None,
    ) -> Fetched:
        """The page ``step`` asks for: asked for ahead already, or now."""
        if ahead is not None:
            if replace(ahead.step, changed=step.changed) == step:
                return await ahead.task
            ahead.task.cancel()
        return await self._fetch(runtime, lane, step, begun, turn)

    def _ask_ahead(
        self,
        runtime: KeyRuntime,
        lane: Lane,
        step: PollPlan,
        begun: PartitionState,
        outcome: Page | Failure,
        answers: asyncio.TaskGroup,
        turn: Turn | None,
    ) -> Ahead | None:
        """Ask for the next page now, while this one is decided, if deciding it will ask for
        it: the vendor's answer time then hides the deciding and the commit's encoding (one
        tenant's backlog moved at 0.73 of a 20 ms vendor's pace without it)."""
        if begun.circuit.state is not CircuitState.CLOSED or self._stopping.is_set():
            return None  # a probe is one request
        after = page_after(runtime.poller, begun, step, outcome)
        if after is None:
            return None
        return Ahead(after, answers.create_task(self._fetch(runtime, lane, after, begun, turn)))

    async def _fetch(
        self,
        runtime: KeyRuntime,
        lane: Lane,
        step: PollPlan,
        state: PartitionState,
        turn: Turn | None,
    ) -> Fetched:
        """``step``'s page; ``turn`` is set aside while a request waits for a budget's token."""
        clock = self._roster.clock
        responses: list[Answer] = []
        started = clock.now()
        outcome = await execute(
            runtime.poller,
            runtime.partition,
            step,
            http=self._http,
            # Only the live lane asks "changed since?": a full scan must see everything.
            validators=dict(state.validators) if lane is Lane.LIVE else {},
            acquire=self._acquirer(runtime, lane, turn),
            now=clock.now,
            signal=self._stopping,
            on_response=_collect(responses),
            credentials=self._vault,
        )
        return Fetched(outcome, responses, clock.now() - started)

    async def _answer(self, runtime: KeyRuntime, commit: KeyCommit) -> BaseException | None:
        """The store's answer to one page: ``None`` once committed, else what it raised."""
        try:
            await commits.send(self._roster, runtime, commit)
        except Exception as exc:  # answered to the lane, which lands pages in order
            return exc
        return None

    def _give_back_slot(self, _: asyncio.Task[BaseException | None]) -> None:
        self._slots.release()

    async def _land(self, runtime: KeyRuntime, flight: InFlight, *, keep: int) -> bool:
        """Wait for the oldest pages until ``keep`` are in flight, taking each one in as it is
        answered; ``False`` once one was refused."""
        while len(flight.pages) > keep:
            page = flight.pages[0]
            if page.answer is None:
                raise RuntimeError(f"{runtime.key}: a page in flight was never sent")
            self._took(runtime, flight, await page.answer)
        return not flight.broken

    def _took(self, runtime: KeyRuntime, flight: InFlight, error: BaseException | None) -> None:
        """The oldest page in flight was answered with ``error`` (``None``: committed)."""
        page = flight.land()
        if error is None and not flight.broken:
            # Not queued again yet: a key polling is no other key waiting for its turn.
            commits.take_in(self._roster, runtime, page.commit, reschedule=False)
            self._landed(runtime, page)
            return
        if error is None:  # committed after one before it was refused: the rule broke
            flight.error = StateCorrupted(f"{runtime.key}: a page committed out of order")
        elif not flight.broken:
            self._refused(runtime, error, flight)
        flight.broken = True

    def _refused(self, runtime: KeyRuntime, error: BaseException, flight: InFlight) -> None:
        if isinstance(error, Fenced):
            return  # the roster let the key go
        if isinstance(error, Retriable):
            # Not committed: the page is fetched again once the store can take it.
            clock = self._roster.clock
            log.warning("%s: commit failed, retrying in %gs: %s", runtime.key, STORE_RETRY, error)
            self._roster.due.hold(runtime.key, clock.now() + STORE_RETRY)
            return
        flight.error = error

    def _landed(self, runtime: KeyRuntime, page: SentPage) -> None:
        """Told once committed: a result dropped or refused is fetched again, and a key let go
        meanwhile must not grow series again."""
        decision = page.decision
        self._observed(runtime, page.step, page.outcome, decision, page.fetched, page.responses)
        if runtime.woken_at is not None:
            waited = self._roster.clock.now() - runtime.woken_at
            runtime.woken_at = None
            self._observer.wake_served(runtime.poller.name, runtime.partition.key, waited)
        self._circuit_moved(runtime, page.circuit, page.begun, decision)
        if isinstance(decision, Trip):
            log.warning("%s: circuit opened: %s", runtime.key, decision.reason)
        elif isinstance(decision, Backoff):
            log.info("%s: backing off: %s", runtime.key, decision.reason)

    def _commit_of(self, runtime: KeyRuntime, decision: Decision, flight: InFlight) -> KeyCommit:
        """What committing ``decision`` writes, as the next page of ``flight``'s run."""
        run = flight.run_of()
        if not isinstance(decision, Emit):
            return KeyCommit(state=decision.state, run=run)
        parked, sent = decision.parked, []
        children = children_of(self._roster.definitions(), runtime.poller.name)
        if children and decision.events:
            asked = child_sends(
                runtime.poller,
                runtime.partition.key,
                children,
                decision.events,
                self._roster.clock.now(),
                flight.parked().keys() | {item.id for item in parked},
            )
            parked, sent = [*parked, *asked.parked], asked.commands
        return KeyCommit(
            state=decision.state,
            events=decision.events if runtime.poller.publishes else (),
            upserts=decision.upserts,
            forget=decision.forget,
            parked=parked,
            sends=sent,
            run=run,
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

    def _goes_on(self, runtime: KeyRuntime, lane: Lane, emit: Emit) -> bool:
        """Whether a poll that stopped at ``max_pages`` is followed by the next one at once:
        the same lane comes first again, and nothing else waits for a turn (another key due
        or waiting for a slot, an operation waiting for this key)."""
        if not emit.at_limit or self._turn_wanted is None or runtime.lock.wanted:
            return False
        if next_lane(emit.state, self._roster.clock.now()) is not lane:
            return False
        return not self._turn_wanted()

    def _may_go_on(self, runtime: KeyRuntime) -> bool:
        """Still held, its connector still polling, and the engine not stopping."""
        roster = self._roster
        return (
            roster.still_holds(runtime)
            and roster.target(runtime.poller.name).polls
            and not self._stopping.is_set()
        )

    def _acquirer(
        self, runtime: KeyRuntime, lane: Lane, turn: Turn | None
    ) -> Callable[[], Awaitable[None]] | None:
        names = runtime.poller.budgets
        if not names:
            return None
        gates = [self._gates[name] for name in names]
        waiting = partial(waiting_for_token, runtime.lock, turn)
        return acquirer(gates, runtime.key, lambda: runtime.partition, lane,
                        runtime.poller.budget_weight, waiting)  # fmt: skip


def _ends_the_lane(decision: Decision) -> bool:
    """Whether no page of the lane follows ``decision``'s (a failure, or the last page)."""
    return not isinstance(decision, Emit) or not (decision.more or decision.at_limit)


def _collect(into: list[Answer]) -> Callable[[str, int | None, float], None]:
    def answered(method: str, status: int | None, seconds: float) -> None:
        into.append((method, status, seconds))

    return answered
