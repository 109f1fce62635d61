"""The start-up timeline a runner logs: each step once, in order, from the process start."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import time

import pytest

from watukuy.core.observe import OutcomeKind, fanout
from watukuy.observe.startup import StartupObserver, Timeline, process_age


def shown(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "watukuy.runner"]


def test_process_age_is_the_time_since_the_process_started() -> None:
    code = "import time; time.sleep(0.3); from watukuy.observe.startup import process_age; "
    code += "print(process_age())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    age = float(out.stdout)
    assert 0.3 <= age < 5.0  # a tick of resolution, and however slow the interpreter started
    here = process_age()
    assert here is not None and here > 0


def test_each_step_is_shown_once_in_the_order_it_ended(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "watukuy.runner")
    timeline = Timeline(origin=time.monotonic() - 2.0)
    timeline.mark("config loaded")
    timeline.mark("topics checked")
    timeline.mark("config loaded")  # again: the first time counts
    timeline.show("runner started")
    timeline.show("nothing new")  # no line
    timeline.mark("REST listening")
    timeline.show("later")
    lines = shown(caplog)
    assert len(lines) == 2
    first = re.fullmatch(
        r"start-up, runner started; seconds since the process started: "
        r"config loaded (\d+\.\d{3}), topics checked (\d+\.\d{3})",
        lines[0],
    )
    assert first is not None
    assert 2.0 <= float(first[1]) <= float(first[2]) < 10.0
    assert re.fullmatch(r"start-up, later; .*: REST listening \d+\.\d{3}", lines[1])


def test_the_observer_marks_the_assignment_restore_first_poll_and_first_commit(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "watukuy.runner")
    timeline = Timeline(origin=time.monotonic())
    observers = fanout([StartupObserver(timeline)])
    observers.leases_gained((0, 1))
    observers.restore_done(0, 0, 0, 0.0)
    timeline.show("runner started")  # partition 1 is still restoring
    observers.restore_done(1, 3, 9, 0.1)
    observers.leases_gained((2,))  # a later assignment is not the start-up's
    observers.restore_done(2, 0, 0, 0.0)
    for _ in range(2):
        observers.poll_decided("p", "t1", "live", OutcomeKind.OK, 0.1)
        observers.events_committed("p", "t1", "live", {"created": 2})
    lines = shown(caplog)
    assert [line.split(";")[0] for line in lines] == [
        "start-up, runner started",
        "start-up, first poll",
        "start-up, first events committed",
    ]
    assert re.search(r": group joined \(assigned\) \d\.\d{3}$", lines[0])
    assert re.search(r": restored \d\.\d{3}, first poll decided \d\.\d{3}$", lines[1])
    assert re.search(r": first events committed \d\.\d{3}$", lines[2])
