"""Plan, execute, decide: the pure halves of one poll.

The core plans the request (:func:`plan`), the engine performs it, and the core decides what
the outcome means (:func:`decide`): :class:`Emit` (a page to commit), :class:`Backoff` (retry
later, nothing to emit) or :class:`Trip` (the circuit opened). Every decision carries the
complete new state of the key, so the engine's only job is to commit it.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from watukuy.core import cursor as cursors
from watukuy.core import onchange
from watukuy.core import schedule as schedules
from watukuy.core.changes import Detected, deletions, detect, expired, identities
from watukuy.core.circuit import CircuitState
from watukuy.core.events import Event
from watukuy.core.observe import OutcomeKind
from watukuy.core.poller import FetchResult, Poller
from watukuy.core.state import (
    Lane,
    LaneState,
    ParkedItem,
    PartitionState,
    SnapshotEntry,
    Validators,
)


def fresh_state(poller: Poller, partition: str, now: float, epoch: int = 0) -> PartitionState:
    """A partition seen for the first time: initial cursor, fastest interval, due now."""
    return PartitionState(
        poller=poller.name,
        partition=partition,
        live=LaneState(cursor=poller.cursor.initial),
        schedule=schedules.initial(poller.schedule, now),
        reconcile_due=None if poller.reconcile is None else now + poller.reconcile,
        epoch=epoch,
        created=now,
    )


def next_lane(state: PartitionState, now: float) -> Lane | None:
    """The lane to poll at ``now``, by priority; ``None`` when nothing may run."""
    if state.paused is not None or not state.circuit.allows(now):
        return None
    if now < state.schedule.throttle_until:
        return None
    if now >= state.schedule.next_due:
        return Lane.LIVE
    if state.reconcile.active or (state.reconcile_due is not None and now >= state.reconcile_due):
        return Lane.RECONCILE
    if state.backfill.active:
        return Lane.BACKFILL
    return None


def due_at(state: PartitionState, now: float) -> float | None:
    """When the key next needs a poll (``None``: paused, a probe is out, or an on_change
    child waiting for its parent's next change)."""
    if state.paused is not None:
        return None
    ready = state.circuit.ready_at(now)
    if ready is None:
        return None
    wanted = state.schedule.next_due
    if state.backfill.active or state.reconcile.active:
        wanted = now
    elif state.reconcile_due is not None:
        wanted = min(wanted, state.reconcile_due)
    if wanted == onchange.WHEN_CHANGED:
        return None  # an on_change child between its parent's changes: no timer at all
    return max(wanted, ready, state.schedule.throttle_until)


@dataclass(frozen=True, slots=True)
class PollPlan:
    """One page request: which lane, from which cursor, and what the poll saw so far."""

    lane: Lane
    cursor: Any
    fetch_value: Any
    page: int = 0
    scan: int | None = None
    replaying: bool = False
    changed: bool = False
    late: float = 0.0
    """Seconds the poll started after its key was due (live lane): the next one then comes at
    the key's own point of its interval (:func:`watukuy.core.schedule.after_poll`)."""


def plan(poller: Poller, state: PartitionState, lane: Lane, now: float | None = None) -> PollPlan:
    """The first page of a poll of ``lane``, started at ``now`` (``None``: on time)."""
    current = state.lane(lane)
    cursor = current.cursor
    scan = None
    if lane is Lane.RECONCILE:
        # A pass that did not start yet begins at the initial cursor with a new scan number.
        cursor = current.cursor if current.active else poller.cursor.initial
        scan = current.scan if current.active else current.scan + 1
    return PollPlan(
        lane=lane,
        cursor=cursor,
        fetch_value=cursors.fetch_value(poller.cursor, cursor),
        scan=scan,
        replaying=lane is Lane.LIVE and state.live.replaying,
        late=_late(state, lane, now),
    )


def _late(state: PartitionState, lane: Lane, now: float | None) -> float:
    if lane is not Lane.LIVE or now is None:
        return 0.0
    due = max(state.schedule.next_due, state.schedule.throttle_until)
    return max(0.0, now - due)


def next_page(poller: Poller, previous: PollPlan, emit: Emit) -> PollPlan:
    current = emit.state.lane(previous.lane)
    return replace(
        previous,
        cursor=current.cursor,
        fetch_value=cursors.fetch_value(poller.cursor, current.cursor),
        page=previous.page + 1,
        changed=previous.changed or bool(emit.events),
    )


def begin(state: PartitionState, now: float) -> PartitionState:
    """A request starts: an open circuit past its cooldown sends its one probe."""
    circuit = state.circuit.attempt(now)
    return state if circuit is state.circuit else replace(state, circuit=circuit)


@dataclass(frozen=True, slots=True)
class Page:
    """What the engine got from ``fetch``: a result, or a 304 (``not_modified``)."""

    result: FetchResult
    not_modified: bool = False
    validators: Mapping[str, Validators] = field(default_factory=dict)
    throttle_until: float | None = None


@dataclass(frozen=True, slots=True)
class Failure:
    """A poll that failed. ``throttle_until`` set: the vendor said when (429, Retry-After).

    ``error`` is the redacted text (``last_error``), ``kind`` what it was, for observers."""

    error: str
    throttle_until: float | None = None
    kind: OutcomeKind = OutcomeKind.ERROR


@dataclass(frozen=True, slots=True)
class Emit:
    """A page to commit atomically: events, state, snapshot changes, parked items."""

    state: PartitionState
    events: list[Event]
    upserts: dict[str, SnapshotEntry]
    forget: list[str]
    parked: list[ParkedItem]
    more: bool
    at_limit: bool = False
    """The poll stopped at ``max_pages`` with more to read: the lane is due again at once."""


@dataclass(frozen=True, slots=True)
class Backoff:
    state: PartitionState
    reason: str
    kind: OutcomeKind = OutcomeKind.ERROR


@dataclass(frozen=True, slots=True)
class Trip:
    state: PartitionState
    reason: str
    kind: OutcomeKind = OutcomeKind.ERROR


Decision = Emit | Backoff | Trip


class Lookups(Enum):
    """What deciding an outcome reads of the key's snapshot."""

    NOTHING = "nothing"
    ENTRIES = "entries"  # those of the page's items (:func:`looked_up`)
    WHOLE = "whole"


def lookups(step: PollPlan, outcome: Page | Failure) -> Lookups:
    """What :func:`decide` will read of the snapshot for ``outcome``: nothing for a failure or
    a 304 (most polls of an idle key); the entries of the page's items for a live or backfill
    page; the whole snapshot for a reconcile page, since the pass's last one turns every entry
    it did not see into a deletion. A key with 5,000 entries and one changed item then reads
    one entry, not 5,000 (a failover's first polls read each moved key's)."""
    if isinstance(outcome, Failure) or outcome.not_modified:
        return Lookups.NOTHING
    return Lookups.WHOLE if step.lane is Lane.RECONCILE else Lookups.ENTRIES


def looked_up(poller: Poller, outcome: Page | Failure) -> list[str]:
    """The identities whose entries deciding ``outcome`` reads when it reads
    :attr:`Lookups.ENTRIES` (asked only of a key whose snapshot is not held)."""
    return [] if isinstance(outcome, Failure) else identities(poller, outcome.result.items)


def decide(
    poller: Poller,
    state: PartitionState,
    snapshot: Mapping[str, SnapshotEntry],
    step: PollPlan,
    outcome: Page | Failure,
    now: float,
    *,
    parked: Container[str] = (),
    publishable: Callable[[Event], str | None] | None = None,
) -> Decision:
    """What a page or a failure means for the key. ``parked`` holds the ids of its parked
    items (not parked twice); ``publishable`` is the store's check that an event can be
    published (its reason when not), consulted before the event takes a sequence number."""
    if isinstance(outcome, Failure):
        return _failed(poller, state, outcome, now)
    return _emitted(poller, state, snapshot, step, outcome, now, parked, publishable)


def _failed(poller: Poller, state: PartitionState, failure: Failure, now: float) -> Decision:
    if failure.kind is OutcomeKind.NEEDS_AUTHORIZATION:
        # Not the vendor failing: a person must authorise the tenant again. Its circuit is left
        # alone, and it is looked at again at its slowest interval: that look sends nothing
        # unless a new grant was handed in (which also triggers it at once).
        circuit = state.circuit.on_cancel() if state.circuit.probe_in_flight else state.circuit
        sched = schedules.backoff(poller.schedule, state.schedule, now, poller.schedule.max)
        new = replace(state, schedule=sched, circuit=circuit, last_error=failure.error)
        return Backoff(state=new, reason=failure.error, kind=failure.kind)
    if failure.throttle_until is not None:
        # The vendor asked us to wait: pacing, not a failure of the tenant's API.
        circuit = state.circuit.on_cancel() if state.circuit.probe_in_flight else state.circuit
        throttled = schedules.throttle(state.schedule, failure.throttle_until)
        new = replace(state, schedule=throttled, circuit=circuit, last_error=failure.error)
        return Backoff(state=new, reason=failure.error, kind=failure.kind)
    circuit = state.circuit.on_failure(poller.circuit, now)
    if circuit.state is CircuitState.OPEN:
        opened = replace(state, circuit=circuit, last_error=failure.error)
        ready = circuit.ready_at(now)
        sched = schedules.backoff(poller.schedule, state.schedule, now, (ready or now) - now)
        return Trip(state=replace(opened, schedule=sched), reason=failure.error, kind=failure.kind)
    delay = min(poller.schedule.min * 2 ** (circuit.consecutive_failures - 1), poller.schedule.max)
    sched = schedules.backoff(poller.schedule, state.schedule, now, delay)
    new = replace(state, circuit=circuit, schedule=sched, last_error=failure.error)
    return Backoff(state=new, reason=failure.error, kind=failure.kind)


def _emitted(
    poller: Poller,
    state: PartitionState,
    snapshot: Mapping[str, SnapshotEntry],
    step: PollPlan,
    page: Page,
    now: float,
    parked: Container[str] = (),
    publishable: Callable[[Event], str | None] | None = None,
) -> Emit:
    result = page.result
    if page.not_modified:
        result = FetchResult(items=[], cursor=step.cursor, has_more=False)
    scan = step.scan
    if scan is None and state.reconcile.active:
        # A pass is under way: what other lanes see now must not look missed when it ends.
        scan = state.reconcile.scan
    # An idle poll's page has nothing to read (most pages of an idle runner).
    detected = (
        Detected(state.sequence)
        if not result.items
        else detect(
            poller,
            state.partition,
            list(result.items),
            snapshot,
            lane=step.lane.value,
            sequence=state.sequence,
            now=now,
            scan=scan,
            replaying=step.replaying,
            parked=parked,
            publishable=publishable,
        )
    )
    # A 304 stands for "the same page again": each strategy moves on from it as from that page.
    more, new_cursor = _progress(poller, state, step, result)
    forget: list[str] = []
    finished = not more
    if step.lane is Lane.RECONCILE and finished and not page.not_modified:
        deletions(poller, state.partition, snapshot, detected, scan=step.scan or 0, now=now)
        forget = expired({**snapshot, **detected.upserts}, poller.retain, now)
    at_limit = more and step.page + 1 >= poller.max_pages
    new_state = _after_page(poller, state, step, detected, new_cursor, more, at_limit, page, now)
    for identity in forget:
        detected.upserts.pop(identity, None)
    return Emit(
        state=new_state,
        events=detected.events,
        upserts=detected.upserts,
        forget=forget,
        parked=detected.parked,
        more=more and not at_limit,
        at_limit=at_limit,
    )


def page_after(
    poller: Poller, state: PartitionState, step: PollPlan, outcome: Page | Failure
) -> PollPlan | None:
    """The page after ``outcome``'s, if deciding ``outcome`` will ask for it: that is known
    from the page alone (its cursor and whether there is more), so the engine may ask the
    vendor for it while this page is decided. ``None`` after a failure, a 304 or a last page."""
    if not isinstance(outcome, Page) or outcome.not_modified:
        return None
    more, new_cursor = _progress(poller, state, step, outcome.result)
    if not more or step.page + 1 >= poller.max_pages:
        return None
    return replace(
        step,
        cursor=new_cursor,
        fetch_value=cursors.fetch_value(poller.cursor, new_cursor),
        page=step.page + 1,
    )


def _progress(
    poller: Poller, state: PartitionState, step: PollPlan, result: FetchResult
) -> tuple[bool, Any]:
    """Whether the lane goes on after this page, and its cursor after it."""
    more = cursors.page_has_more(poller.cursor, step.cursor, result)
    new_cursor = cursors.advance(poller.cursor, step.cursor, result, list(result.items))
    if _walks_history(poller, step, result):
        # Backfill, reconcile and replay read history: a watermark that moved means more.
        more = bool(result.items) and not cursors.reached(step.cursor, new_cursor)
    until = state.lane(step.lane).until if step.lane is Lane.BACKFILL else None
    if until is not None:
        more = more and not cursors.reached(new_cursor, until)
    return more, new_cursor


def _walks_history(poller: Poller, step: PollPlan, result: FetchResult) -> bool:
    return (
        poller.cursor.strategy == "timestamp"
        and result.has_more is None
        and (step.lane is not Lane.LIVE or step.replaying)
    )


def _after_page(
    poller: Poller,
    state: PartitionState,
    step: PollPlan,
    detected: Detected,
    new_cursor: Any,
    more: bool,
    at_limit: bool,
    page: Page,
    now: float,
) -> PartitionState:
    lane = state.lane(step.lane)
    finished = not more
    if step.lane is Lane.LIVE:
        replaying = lane.replaying and not finished
        if lane.cursor != new_cursor or lane.replaying != replaying:  # else as it was (a 304)
            lane = replace(lane, cursor=new_cursor, replaying=replaying)
    elif step.lane is Lane.BACKFILL:
        lane = replace(lane, cursor=new_cursor, active=not finished)
    else:
        lane = replace(
            lane,
            cursor=None if finished else new_cursor,
            active=not finished,
            scan=step.scan if step.scan is not None else lane.scan,
        )
    # One replace of the whole state: an idle poll is mostly this.
    changes: dict[str, Any] = {
        _lane_field(step.lane): lane,
        "sequence": detected.sequence,
        "circuit": state.circuit.on_success(now),
        "last_success": now,
        "last_error": None,
    }
    # Only a page that ended the poll may answer "nothing changed" next time: a 304 on a page
    # in the middle of a listing would end the poll before the pages after it.
    if finished and page.validators:
        merged = dict(state.validators)
        merged.update(page.validators)
        changes["validators"] = tuple(sorted(merged.items()))
    sched = state.schedule
    if step.lane is Lane.LIVE and finished:
        changed = step.changed or bool(detected.events)
        phase = schedules.phase_of(state.key) if step.late > schedules.BEHIND else 0.0
        sched = schedules.after_poll(
            poller.schedule, sched, now, changed, late=step.late, phase=phase
        )
        sched = onchange.after_success(poller, sched)  # an on_change child waits again
    elif step.lane is Lane.LIVE and at_limit:
        sched = schedules.trigger(sched, now)  # more is waiting: come back as soon as allowed
    if step.lane is Lane.RECONCILE and finished and poller.reconcile is not None:
        changes["reconcile_due"] = now + poller.reconcile
    elif step.lane is Lane.RECONCILE and finished:
        changes["reconcile_due"] = None
    if page.throttle_until is not None:
        sched = schedules.throttle(sched, page.throttle_until)
    changes["schedule"] = sched
    return replace(state, **changes)


def _lane_field(lane: Lane) -> str:
    return "live" if lane is Lane.LIVE else "backfill" if lane is Lane.BACKFILL else "reconcile"
