from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watukuy.core.durations import format_duration, parse_duration
from watukuy.core.errors import ConfigError

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("250ms", 0.25),
        ("30s", 30.0),
        ("5m", 300.0),
        ("2h", 7200.0),
        ("30d", 2_592_000.0),
        ("1.5m", 90.0),
        (" 30 s ", 30.0),
        (45, 45.0),
        (0.5, 0.5),
        (timedelta(minutes=2), 120.0),
        (timedelta(milliseconds=250), 0.25),
    ],
)
def test_accepted_spellings(value: object, seconds: float) -> None:
    result = parse_duration(value, "x")
    assert result == pytest.approx(seconds)
    assert isinstance(result, float)


@pytest.mark.parametrize(
    "value",
    [
        "5x",
        "",
        "   ",
        "s",
        "30",
        "-5s",
        "inf",
        "nan",
        "1e3s",
        -1,
        -0.5,
        0,
        "0s",
        True,
        False,
        None,
        float("inf"),
        float("nan"),
        timedelta(seconds=-1),
        [30],
        {"s": 30},
    ],
)
def test_bad_inputs_raise_config_error_naming_the_path(value: object) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_duration(value, "pollers[3].schedule.min")
    assert raised.value.path == "pollers[3].schedule.min"
    assert "pollers[3].schedule.min" in str(raised.value)


def test_config_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="retain"):
        parse_duration("forever", "retain")


def test_zero_only_when_allowed() -> None:
    assert parse_duration(0, "lookback", allow_zero=True) == 0.0
    assert parse_duration("0s", "lookback", allow_zero=True) == 0.0
    with pytest.raises(ConfigError, match="lookback"):
        parse_duration("0s", "lookback")
    with pytest.raises(ConfigError, match="lookback"):
        parse_duration(-1, "lookback", allow_zero=True)


def test_huge_integer_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="retain"):
        parse_duration(10**400, "retain")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.25, "250ms"), (30.0, "30s"), (90.0, "90s"), (300.0, "5m"), (7200.0, "2h"), (86400, "1d")],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@given(st.integers(min_value=1, max_value=10**6), st.sampled_from(["ms", "s", "m", "h", "d"]))
def test_format_then_parse_round_trips(amount: int, unit: str) -> None:
    seconds = parse_duration(f"{amount}{unit}", "x")
    assert parse_duration(format_duration(seconds), "x") == pytest.approx(seconds)


# -- one rule for every entry point: Python takes seconds, a file needs a unit ---------------


@pytest.mark.parametrize(
    ("value", "like"),
    [
        (1000, "'1000ms' or '1s'"),
        (30000, "'30000ms' or '30s'"),
        (5, "'5ms' or '5s'"),
        (2.5, "'1000ms' or '1s'"),
        (0, "'1000ms' or '1s'"),
    ],
)
def test_a_file_refuses_a_bare_number_naming_the_field(value: float, like: str) -> None:
    if value > 0:  # in Python the same number is seconds
        assert parse_duration(value, "schedule.min") == float(value)
    with pytest.raises(ConfigError) as caught:
        parse_duration(value, "runner.commit.interval", unit_required=True)
    assert caught.value.path == "runner.commit.interval"
    assert str(caught.value) == (
        f"runner.commit.interval: must be a duration like {like}, got {value} (a bare number; "
        "Connect users mean milliseconds)"
    )


def test_a_refused_bare_number_from_a_secret_is_not_shown() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_duration(31337, "log.repeat.interval", unit_required=True, shown="[redacted]")
    assert "31337" not in str(caught.value)
    assert "got [redacted]" in str(caught.value)


@pytest.mark.parametrize("value", ["30s", "250ms", timedelta(seconds=3)])
def test_a_file_takes_what_has_a_unit(value: object) -> None:
    assert parse_duration(value, "x", unit_required=True) == parse_duration(value, "x")


def test_a_flag_is_no_duration_even_where_numbers_are() -> None:
    with pytest.raises(ConfigError, match="expected a duration like '30s', got True"):
        parse_duration(True, "retain")
