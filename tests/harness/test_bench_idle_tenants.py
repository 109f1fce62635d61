"""The idle-tenants benchmark (issues 13 and 25) at a tiny size, so its options cannot rot.

The schedule option of issue 25 (``--schedule-max``: idle keys back off toward ``max``) runs
here with 20 tenants and a schedule of seconds instead of minutes: every poll in the window is
a 304, and as many polls are made as the schedules asked for.
"""

from __future__ import annotations

import pytest

from integration.bench import idle_tenants
from integration.bench.idle_measures import polls_due
from integration.bench.idle_tenants import parse_args, targets
from watukuy.core.schedule import KeySchedule, ScheduleSpec

pytestmark = pytest.mark.unit


def test_the_schedule_option_reads_durations_and_defaults_max_to_min() -> None:
    assert parse_args(["--schedule-max", "15m"]).spec == ScheduleSpec(30.0, 900.0)
    assert parse_args([]).spec == ScheduleSpec(30.0, 30.0)
    assert parse_args(["--schedule-min", "2s"]).spec == ScheduleSpec(2.0, 2.0)


def test_a_max_below_min_or_not_a_duration_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--schedule-max", "10s"], ["--schedule-max", "soon"]):
        with pytest.raises(SystemExit):
            parse_args(argv)
    assert "--schedule-max" in capsys.readouterr().err


def test_the_polls_due_follow_an_idle_key_backing_off_toward_max() -> None:
    spec = ScheduleSpec(30.0, 900.0)  # a step of 87 s
    # after its first poll (a 200: interval min): due at 30, 147, 351, 642, ...
    polled = KeySchedule(interval=30.0, next_due=30.0)
    assert polls_due([polled], spec, 0.0, 352.0) == 3
    assert polls_due([polled], spec, 31.0, 351.0) == 1  # [start, end)
    at_max = KeySchedule(interval=900.0, next_due=100.0)
    assert polls_due([polled, at_max], spec, 0.0, 1000.0) == 4 + 1
    assert polls_due([at_max], ScheduleSpec(30.0, 30.0), 0.0, 161.0) == 3  # clamped to 30 s


def test_the_targets_are_issue_13s_up_to_10000_tenants_and_issue_25s_above() -> None:
    assert targets(10_000) == (10.0, 300.0)
    assert targets(10_001) == targets(100_000) == targets(200_000) == (100.0, 2048.0)


def test_a_tiny_run_with_a_backing_off_schedule_polls_as_the_schedules_ask() -> None:
    tiny = ["--tenants", "20", "--window", "4", "--settle", "0.5", "--runner-gc"]
    args = parse_args([*tiny, "--schedule-min", "1s", "--schedule-max", "3s"])
    command = idle_tenants.child_command(args, 20)
    assert {"--schedule-max", "--settle", "--runner-gc"} <= set(command)
    [result] = idle_tenants.run(args)

    assert result["tenants"] == 20 and result["schedule"] == [1.0, 3.0]
    assert result["settle_s"] == 0.5
    assert result["errors"] == result["burst_errors"] == 0, result["first_error"]
    assert result["polls"] > 20  # every key at least once: intervals 1 s, 1.2 s, ...
    assert result["not_modified"] == result["polls"]
    asked = result["expected_per_s"] * 4
    assert 0.7 * asked <= result["polls"] <= 1.3 * asked + 20
    assert result["burst_s"] > 0 and result["rss_after_burst_mb"] > 0
    assert "CPU <= 10%" in idle_tenants.verdict(result)
