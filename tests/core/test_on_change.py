"""The pure rules of ``parent.poll: on_change``: a successful poll leaves the key with no due
time; an ``adopt`` (its parent item created or updated) makes it due now, through a throttle
window; a failure backs off on a timer; the move to waiting is never an unwritten idle poll;
a scheduled child keeps its timer."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from watukuy.core import schedule as schedules
from watukuy.core.children import sends
from watukuy.core.events import Event
from watukuy.core.onchange import WHEN_CHANGED, after_success, waiting
from watukuy.core.operations import KeyView, key_operation
from watukuy.core.poll import due_at, fresh_state
from watukuy.core.poller import define_poller
from watukuy.core.state import only_rescheduled

pytestmark = pytest.mark.unit


async def fetch(ctx: Any) -> dict[str, Any]:
    return {"items": [], "cursor": None}


def child(poll: str) -> Any:
    return define_poller(
        name="d.comments",
        parent={"poller": "d.tickets", "key": "id", "poll": poll},
        identity=lambda item: item["id"],
        fetch=fetch,
        schedule={"min": "1m", "max": "10m"},
    )


ON_CHANGE, SCHEDULED = child("on_change"), child("schedule")
NOW = 1_000_000.0


def test_a_new_child_is_due_at_once_and_waits_after_its_poll() -> None:
    state = fresh_state(ON_CHANGE, "acme/T1", NOW)
    assert due_at(state, NOW) == NOW
    after = after_success(
        ON_CHANGE, schedules.after_poll(ON_CHANGE.schedule, state.schedule, NOW + 1, False)
    )
    assert waiting(after) and after.next_due == WHEN_CHANGED
    assert due_at(replace(state, schedule=after), NOW + 10**9) is None


def test_a_scheduled_child_keeps_its_timer() -> None:
    state = fresh_state(SCHEDULED, "acme/T1", NOW)
    after = after_success(
        SCHEDULED, schedules.after_poll(SCHEDULED.schedule, state.schedule, NOW, False)
    )
    assert not waiting(after) and due_at(replace(state, schedule=after), NOW) == after.next_due


def waiting_state() -> Any:
    state = fresh_state(ON_CHANGE, "acme/T1", NOW)
    return replace(state, schedule=after_success(ON_CHANGE, state.schedule))


def test_an_adopt_is_the_trigger_of_an_on_change_child_only() -> None:
    adopt = key_operation("adopt")
    state = waiting_state()
    woken = adopt.apply(KeyView(ON_CHANGE, state, {}), {}, NOW + 50).state
    assert due_at(woken, NOW + 50) == NOW + 50
    # Twice before its poll: due once, at the first.
    again = adopt.apply(KeyView(ON_CHANGE, woken, {}), {}, NOW + 60).state
    assert due_at(again, NOW + 60) == NOW + 60

    scheduled = replace(
        state, poller=SCHEDULED.name, schedule=schedules.initial(SCHEDULED.schedule, NOW)
    )
    kept = adopt.apply(KeyView(SCHEDULED, scheduled, {}), {}, NOW + 50).state
    assert kept == scheduled


def test_a_trigger_waits_for_a_throttle_window() -> None:
    state = waiting_state()
    state = replace(state, schedule=replace(state.schedule, throttle_until=NOW + 100))
    woken = key_operation("adopt").apply(KeyView(ON_CHANGE, state, {}), {}, NOW).state
    assert due_at(woken, NOW) == NOW + 100


def test_a_paused_child_is_not_due_and_a_child_paused_by_its_parent_resumes_due() -> None:
    state = waiting_state().paused_by("parent", NOW)
    back = key_operation("adopt").apply(KeyView(ON_CHANGE, state, {}), {}, NOW + 5).state
    assert back.paused is None and due_at(back, NOW + 5) == NOW + 5
    user = waiting_state().paused_by("user", NOW)
    woken = key_operation("adopt").apply(KeyView(ON_CHANGE, user, {}), {}, NOW + 5).state
    assert due_at(woken, NOW + 5) is None  # paused by a user: waits for resume
    resumed = key_operation("resume").apply(KeyView(ON_CHANGE, woken, {}), {}, NOW + 9).state
    assert due_at(resumed, NOW + 9) == NOW + 9  # the change it missed is polled on resume


def test_a_failure_backs_off_on_a_timer() -> None:
    state = waiting_state()
    woken = key_operation("adopt").apply(KeyView(ON_CHANGE, state, {}), {}, NOW).state
    retry = schedules.backoff(ON_CHANGE.schedule, woken.schedule, NOW, 30)
    assert due_at(replace(woken, schedule=retry), NOW) == NOW + 30


def test_going_back_to_waiting_is_always_written() -> None:
    woken = key_operation("trigger").apply(KeyView(ON_CHANGE, waiting_state(), {}), {}, NOW).state
    assert not only_rescheduled(woken, waiting_state())
    assert not only_rescheduled(waiting_state(), woken)


def test_a_parent_update_sends_the_adopt_in_its_own_commit() -> None:
    parent = define_poller(
        name="d.tickets", identity=lambda i: i["id"], fetch=fetch, partitions=lambda: []
    )
    out = sends(parent, "acme", [ON_CHANGE], [_event("updated", {"id": "T1"})], NOW)
    assert [(c.op, c.partition) for c in out.commands] == [("adopt", "acme/T1")]


def _event(kind: Any, data: Any) -> Event:
    return Event(
        "e1",
        "d.tickets",
        "acme",
        str(data["id"]),
        kind,
        "v2",
        1,
        datetime.now(UTC),
        "live",
        1,
        data,
    )
