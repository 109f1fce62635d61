"""One poll of one key: plan with the core, execute the fetch, decide with the core, commit.

Each page is committed on its own, so a crash mid-poll resumes from the last committed page.
A key that was removed while its poll was in flight has its result dropped.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from watukuy.core.errors import Fenced
from watukuy.core.poll import Backoff, Emit, Trip, begin, decide, next_lane, next_page, plan
from watukuy.core.state import Lane
from watukuy.engine.budgets import BudgetGate
from watukuy.engine.fetching import execute
from watukuy.engine.keys import KeyRuntime
from watukuy.engine.registry import Registry
from watukuy.http import HttpClient
from watukuy.store.base import KeyCommit

log = logging.getLogger("watukuy.poll")


class KeyPoller:
    def __init__(
        self,
        registry: Registry,
        http: HttpClient,
        gates: dict[str, BudgetGate],
        stopping: asyncio.Event,
    ) -> None:
        self._registry = registry
        self._http = http
        self._gates = gates
        self._stopping = stopping

    async def poll(self, runtime: KeyRuntime) -> None:
        """Poll ``runtime`` if a lane is due; never raises for vendor or user-code failures."""
        registry = self._registry
        clock = registry.clock
        async with runtime.lock:
            if registry.keys.get(runtime.key) is not runtime:
                return  # removed while it waited for the lock
            lane = next_lane(runtime.state, clock.now())
            if lane is None:
                registry.reschedule(runtime)
                return
            poller = runtime.poller
            step = plan(poller, runtime.state, lane)
            while True:
                state = begin(runtime.state, clock.now())
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
                )
                decision = decide(poller, state, runtime.snapshot, step, outcome, clock.now())
                if registry.keys.get(runtime.key) is not runtime:
                    return
                commit = _commit_of(decision)
                try:
                    await registry.commit(runtime, commit)
                except Fenced:
                    log.warning("%s: fenced by another owner; dropping the key", runtime.key)
                    registry.keys.pop(runtime.key, None)
                    registry.due.discard(runtime.key)
                    return
                if isinstance(decision, Trip):
                    log.warning("%s: circuit opened: %s", runtime.key, decision.reason)
                elif isinstance(decision, Backoff):
                    log.info("%s: backing off: %s", runtime.key, decision.reason)
                if not isinstance(decision, Emit) or not decision.more or self._stopping.is_set():
                    return
                step = next_page(poller, step, decision)

    def _acquirer(self, runtime: KeyRuntime, lane: Lane) -> Callable[[], Awaitable[None]] | None:
        name = runtime.poller.budget
        if name is None:
            return None
        gate = self._gates[name]
        weight = runtime.poller.budget_weight

        async def acquire() -> None:
            await gate.acquire(runtime.key, lane, weight)

        return acquire


def _commit_of(decision: Emit | Backoff | Trip) -> KeyCommit:
    if isinstance(decision, Emit):
        return KeyCommit(
            state=decision.state,
            events=decision.events,
            upserts=decision.upserts,
            forget=decision.forget,
            parked=decision.parked,
        )
    return KeyCommit(state=decision.state)
