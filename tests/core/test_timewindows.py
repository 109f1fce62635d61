"""Time windows and the time formats vendors write (issue 44), pure: a fake ``now``."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watukuy.core.errors import ConfigError
from watukuy.core.timewindows import TimeFormat, Window, WindowSpec, after_window, plan_window

pytestmark = pytest.mark.unit

T = datetime(2026, 12, 1, 10, 30, 15, 250_000, tzinfo=UTC)
DAY = 86_400.0


@pytest.mark.parametrize(
    ("name", "written"),
    [
        ("iso", "2026-12-01T10:30:15.250000Z"),
        ("epoch", 1_796_121_015),
        ("epoch_ms", 1_796_121_015_250),
        ("epoch_us", 1_796_121_015_250_000),
        ("%Y%m%d", "20261201"),
        ("%Y-%m-%dT%H:%M:%S", "2026-12-01T10:30:15"),
    ],
)
def test_each_format_writes_and_reads_back_to_its_precision(name: str, written: object) -> None:
    form = TimeFormat.parse(name, "f")
    assert form.write(T) == written
    read = form.read(written)
    assert read is not None
    assert abs((read - T).total_seconds()) < (86_400 if name == "%Y%m%d" else 1)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("epoch", "soon"),
        ("epoch", True),
        ("iso", "12/01/2026"),
        ("%Y-%m-%d", "2026/12/01"),
        ("iso", 7),
    ],
)
def test_a_value_not_in_the_format_reads_as_none(name: str, value: object) -> None:
    assert TimeFormat.parse(name, "f").read(value) is None


def test_epoch_text_and_numbers_read_alike_and_naive_iso_is_utc() -> None:
    epoch = TimeFormat.parse("epoch", "f")
    assert epoch.read("1796121015") == epoch.read(1_796_121_015) == T.replace(microsecond=0)
    assert TimeFormat.parse("iso", "f").read("2026-12-01T10:30:15") == T.replace(microsecond=0)


@pytest.mark.parametrize("bad", ["seconds", "", 7, "YYYY-MM-DD"])
def test_an_unknown_format_is_a_config_error_naming_the_field(bad: object) -> None:
    with pytest.raises(ConfigError) as raised:
        TimeFormat.parse(bad, "pollers[0].cursor.timestamp.format")
    assert raised.value.path == "pollers[0].cursor.timestamp.format"


def test_a_window_runs_from_the_cursor_to_now_less_the_settle_at_most_a_step() -> None:
    spec = WindowSpec(bounded=True, settle=3600, step=30 * DAY, lookback=60)
    now = T
    window = plan_window(spec, T - timedelta(days=90), None, now)
    assert window.start == T - timedelta(days=90)
    assert window.end == T - timedelta(days=60)  # a step of 30 days
    assert window.sent_start == window.start - timedelta(seconds=60)
    late = plan_window(spec, T - timedelta(hours=5), None, now)
    assert late.end == T - timedelta(hours=1)  # now, less the settle


def test_the_first_window_starts_at_the_configured_start_or_has_no_lower_bound() -> None:
    spec = WindowSpec(bounded=True)
    assert plan_window(spec, None, T - timedelta(days=2), T).start == T - timedelta(days=2)
    unbounded = plan_window(spec, None, None, T)
    assert (unbounded.start, unbounded.end, unbounded.sent_start) == (None, T, None)
    assert plan_window(WindowSpec(bounded=False), None, None, T).end is None


def test_after_a_bounded_window_the_cursor_is_its_end_and_more_follow_until_settled() -> None:
    spec = WindowSpec(bounded=True, settle=60, step=DAY)
    window = plan_window(spec, T - timedelta(days=3), None, T)
    assert after_window(spec, window, None, T) == (T - timedelta(days=2), True)
    last = plan_window(spec, T - timedelta(hours=2), None, T)
    assert after_window(spec, last, None, T) == (T - timedelta(seconds=60), False)


def test_after_an_unbounded_window_the_cursor_is_the_newest_item_never_back() -> None:
    spec = WindowSpec(bounded=False)
    window = Window(T, None, T)
    assert after_window(spec, window, T + timedelta(minutes=5), T) == (
        T + timedelta(minutes=5),
        False,
    )
    assert after_window(spec, window, T - timedelta(minutes=5), T) == (T, False)
    assert after_window(spec, window, None, T) == (T, False)


def test_an_empty_window_is_one_whose_start_reached_its_end() -> None:
    spec = WindowSpec(bounded=True, settle=3600)
    assert plan_window(spec, T - timedelta(minutes=30), None, T).empty


@given(
    st.integers(min_value=1, max_value=400),  # days back the backfill starts
    st.integers(min_value=1, max_value=40),  # step, days
    st.integers(min_value=0, max_value=7200),  # settle, seconds
)
def test_stepping_windows_cover_the_span_once_without_a_gap_or_an_overlap(
    back: int, step: int, settle: int
) -> None:
    spec = WindowSpec(bounded=True, settle=settle, step=step * DAY)
    cursor: datetime | None = T - timedelta(days=back)
    covered: list[tuple[datetime, datetime]] = []
    more = True
    while more:
        window = plan_window(spec, cursor, None, T)
        if window.empty:
            break
        assert window.start is not None and window.end is not None
        covered.append((window.start, window.end))
        cursor, more = after_window(spec, window, None, T)
    assert covered[0][0] == T - timedelta(days=back)
    assert covered[-1][1] == T - timedelta(seconds=settle)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(covered))
