"""Connect's level names over Python's numbers, and which loggers a change reaches."""

from __future__ import annotations

import logging

import pytest

from watukuy.core.errors import ConfigError
from watukuy.core.loglevels import LEVELS, affected, check_level, level_name


def test_each_connect_name_reads_back_as_itself() -> None:
    for name, number in LEVELS.items():
        assert level_name(number) == name
    assert [LEVELS[n] for n in ("ERROR", "WARN", "INFO", "DEBUG")] == [
        logging.ERROR,
        logging.WARNING,
        logging.INFO,
        logging.DEBUG,
    ]


def test_python_levels_between_names_show_as_the_next_more_severe_name() -> None:
    assert level_name(25) == "WARN"  # INFO records do not pass 25
    assert level_name(logging.NOTSET) == "TRACE"
    assert level_name(1000) == "OFF"


def test_off_lets_no_standard_record_through() -> None:
    assert LEVELS["OFF"] > logging.CRITICAL
    assert LEVELS["TRACE"] < logging.DEBUG


def test_levels_are_read_in_any_case() -> None:
    assert check_level("debug") == "DEBUG"
    assert check_level("Warn") == "WARN"


@pytest.mark.parametrize("value", ["WARNING", "CRITICAL", "", None, 10, "ALL"])
def test_other_levels_are_refused_naming_level(value: object) -> None:
    with pytest.raises(ConfigError) as raised:
        check_level(value)
    assert raised.value.path == "level"
    assert "OFF, FATAL, ERROR, WARN, INFO, DEBUG, TRACE" in str(raised.value)


def test_a_change_reaches_the_logger_and_those_below_it() -> None:
    existing = ["a", "a.b", "a.b.c", "ab", "b", "a.bc"]
    assert affected("a.b", existing) == ["a.b", "a.b.c"]
    assert affected("a", existing) == ["a", "a.b", "a.b.c", "a.bc"]
    assert affected("new.one", existing) == ["new.one"]
    assert affected("root", existing) == ["a", "a.b", "a.b.c", "a.bc", "ab", "b", "root"]
