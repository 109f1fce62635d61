"""Hanging transactions told from live ones by the last stable offset
(watukuy.store.kafka.hanging_rule)."""

from __future__ import annotations

import pytest

from watukuy.store.kafka.hanging_rule import (
    REPORT_EVERY,
    HangingTransaction,
    HangingWatch,
    Seen,
    abort_command,
)

AFTER = 70.0  # a 10 s transaction timeout and the margin
P = ("w.events.invoices", 4)
Q = ("w.events.invoices", 5)


def test_an_open_transaction_hangs_once_the_stable_offset_stays_put_past_the_limit() -> None:
    watch = HangingWatch(AFTER)
    assert watch.observe({P: Seen(37, 40)}, now=0.0).hanging == ()
    assert watch.observe({P: Seen(37, 52)}, now=AFTER - 1).hanging == ()  # others write on
    seen = watch.observe({P: Seen(37, 60)}, now=AFTER + 5)
    assert seen.hanging == (HangingTransaction(P[0], P[1], 37, AFTER + 5),)
    assert seen.report == seen.hanging


def test_a_stable_offset_that_moves_is_a_live_transaction_each_time() -> None:
    watch = HangingWatch(AFTER)
    for step in range(10):  # one transaction after another, each open at the look
        seen = watch.observe({P: Seen(10 * step, 10 * step + 5)}, now=step * 30.0)
        assert seen.hanging == ()


def test_a_partition_with_nothing_open_never_hangs_and_its_clock_restarts() -> None:
    watch = HangingWatch(AFTER)
    watch.observe({P: Seen(37, 40)}, now=0.0)
    watch.observe({P: Seen(40, 40)}, now=30.0)  # it ended
    watch.observe({P: Seen(40, 41)}, now=60.0)  # a new one
    assert watch.observe({P: Seen(40, 45)}, now=100.0).hanging == ()  # 40 s, not 100
    assert watch.observe({P: Seen(40, 45)}, now=131.0).hanging[0].open_for == 71.0


def test_a_hanging_partition_is_reported_again_every_few_minutes_not_every_round() -> None:
    watch = HangingWatch(AFTER)
    watch.observe({P: Seen(37, 40)}, now=0.0)
    reports = [
        len(watch.observe({P: Seen(37, 40)}, now=t).report)
        for t in (AFTER, AFTER + 30, AFTER + REPORT_EVERY - 1, AFTER + REPORT_EVERY)
    ]
    assert reports == [1, 0, 0, 1]


def test_each_partition_is_judged_alone_and_one_left_out_is_forgotten() -> None:
    watch = HangingWatch(AFTER)
    watch.observe({P: Seen(1, 2), Q: Seen(3, 3)}, now=0.0)
    seen = watch.observe({P: Seen(1, 2), Q: Seen(3, 9)}, now=AFTER)
    assert [(t.topic, t.kafka_partition) for t in seen.hanging] == [P]
    watch.observe({Q: Seen(3, 9)}, now=AFTER + 1)  # P's topic went away
    assert watch.observe({P: Seen(1, 2), Q: Seen(3, 9)}, now=AFTER + 2).hanging == ()
    assert [t.kafka_partition for t in watch.observe({Q: Seen(3, 9)}, now=2 * AFTER).hanging] == [5]


def test_a_new_hang_on_a_partition_reported_before_is_reported_at_once() -> None:
    watch = HangingWatch(AFTER)
    watch.observe({P: Seen(37, 40)}, now=0.0)
    assert len(watch.observe({P: Seen(37, 40)}, now=AFTER).report) == 1
    watch.observe({P: Seen(41, 44)}, now=AFTER + 10)  # aborted; another one left open
    assert len(watch.observe({P: Seen(41, 44)}, now=2 * AFTER + 10).report) == 1


def test_the_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="hanging_after must be positive"):
        HangingWatch(0)


def test_the_abort_command_names_the_transaction() -> None:
    assert abort_command("k:9092", "w.state", 4, 52) == (
        "kafka-transactions.sh --bootstrap-server k:9092 abort --topic w.state --partition 4"
        " --start-offset 52"
    )
