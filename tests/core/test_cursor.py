from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from watukuy.core.cursor import (
    advance,
    fetch_value,
    page_has_more,
    parse_instant,
    reached,
    watermark,
)
from watukuy.core.poller import CursorSpec, FetchResult

pytestmark = pytest.mark.unit

TOKEN = CursorSpec(strategy="token")
NONE = CursorSpec(strategy="none")
TS = CursorSpec(strategy="timestamp", field="updated_at")
TS_LOOKBACK = CursorSpec(strategy="timestamp", field="updated_at", lookback=300.0)


def page(items: list[Any], cursor: Any = None, has_more: bool | None = None) -> FetchResult:
    return FetchResult(items=items, cursor=cursor, has_more=has_more)


# token


def test_token_fetch_value_is_the_cursor() -> None:
    assert fetch_value(TOKEN, "abc") == "abc"
    assert fetch_value(TOKEN, None) is None
    token_with_lookback = CursorSpec(strategy="token", lookback=60.0)
    assert fetch_value(token_with_lookback, 1000) == 1000


def test_token_advance_takes_the_page_cursor() -> None:
    assert advance(TOKEN, "c1", page([{"id": 1}], "c2"), [{"id": 1}]) == "c2"
    assert advance(TOKEN, "c1", page([], None), []) is None
    # Explicitly finished: the cursor is still the one fetch returned.
    assert advance(TOKEN, "c1", page([{"id": 1}], "c2", has_more=False), [{"id": 1}]) == "c2"


# has_more inference


@pytest.mark.parametrize(
    ("before", "result", "expected"),
    [
        (None, page([1], "c1"), True),
        ("c1", page([1], "c2"), True),
        ("c1", page([1], "c1"), False),  # cursor did not move
        ("c1", page([], "c2"), False),  # moved but no items
        ("c1", page([1], None), False),  # None: the end
        ("c1", page([1], "c2", has_more=False), False),  # explicit wins
        ("c1", page([], None, has_more=True), True),  # explicit wins
        ("c1", page([1], "c1", has_more=True), True),
    ],
)
def test_token_has_more(before: Any, result: FetchResult, expected: bool) -> None:
    assert page_has_more(TOKEN, before, result) is expected


def test_none_strategy_has_more_follows_the_page_token() -> None:
    assert page_has_more(NONE, None, page([1], "p2")) is True
    assert page_has_more(NONE, "p2", page([1], None)) is False


def test_timestamp_reads_one_page_unless_told() -> None:
    items = [{"updated_at": "2026-01-02T00:00:00Z"}]
    assert page_has_more(TS, "2026-01-01T00:00:00Z", page(items, "x")) is False
    assert page_has_more(TS, "2026-01-01T00:00:00Z", page(items, has_more=True)) is True


# timestamp watermark


def test_watermark_is_the_greatest_iso_value() -> None:
    items = [
        {"updated_at": "2026-01-02T00:00:00Z"},
        {"updated_at": "2026-01-03T00:00:00Z"},
        {"updated_at": "2026-01-01T12:00:00Z"},
    ]
    assert watermark(TS, "2026-01-01T00:00:00Z", items) == "2026-01-03T00:00:00Z"
    assert advance(TS, "2026-01-01T00:00:00Z", page(items), items) == "2026-01-03T00:00:00Z"


def test_watermark_compares_instants_not_strings() -> None:
    # 01:00+02:00 is 23:00Z the day before, earlier than 2026-01-01T00:00:00Z.
    items = [{"updated_at": "2026-01-01T01:00:00+02:00"}, {"updated_at": "2026-01-01T00:30:00Z"}]
    assert watermark(TS, None, items) == "2026-01-01T00:30:00Z"


def test_watermark_never_goes_back() -> None:
    items = [{"updated_at": "2025-12-01T00:00:00Z"}]
    assert watermark(TS, "2026-01-01T00:00:00Z", items) == "2026-01-01T00:00:00Z"


def test_watermark_of_numbers() -> None:
    items = [{"updated_at": 1500}, {"updated_at": 1700.5}, {"updated_at": 1600}]
    assert watermark(TS, 1000, items) == 1700.5
    assert watermark(TS, 2000, items) == 2000


def test_watermark_mixes_numbers_and_iso() -> None:
    later = datetime(2026, 1, 2, tzinfo=UTC).timestamp()
    items = [{"updated_at": "2026-01-01T00:00:00Z"}, {"updated_at": later}]
    assert watermark(TS, None, items) == later


def test_watermark_ignores_unparsable_and_missing_values() -> None:
    items: list[Any] = [
        {"updated_at": "yesterday"},
        {"updated_at": None},
        {"updated_at": True},
        {"updated_at": ["2030-01-01T00:00:00Z"]},
        {"other": "2030-01-01T00:00:00Z"},
        "2030-01-01T00:00:00Z",
        {"updated_at": "2026-01-05T00:00:00Z"},
    ]
    assert watermark(TS, "2026-01-01T00:00:00Z", items) == "2026-01-05T00:00:00Z"
    assert watermark(TS, "2026-01-01T00:00:00Z", items[:-1]) == "2026-01-01T00:00:00Z"


def test_watermark_replaces_an_unparsable_cursor() -> None:
    items = [{"updated_at": "2026-01-05T00:00:00Z"}]
    assert watermark(TS, "garbage", items) == "2026-01-05T00:00:00Z"
    assert watermark(TS, None, []) is None


def test_lookback_subtracts_from_iso_watermark() -> None:
    assert fetch_value(TS_LOOKBACK, "2026-01-01T00:10:00Z") == "2026-01-01T00:05:00Z"
    assert fetch_value(TS_LOOKBACK, "2026-01-01T00:02:00Z") == "2025-12-31T23:57:00Z"
    assert fetch_value(TS_LOOKBACK, "2026-01-01T02:10:00+02:00") == "2026-01-01T00:05:00Z"


def test_lookback_subtracts_from_numeric_watermark() -> None:
    assert fetch_value(TS_LOOKBACK, 1000) == 700
    assert fetch_value(TS_LOOKBACK, 1000.5) == 700.5


def test_lookback_leaves_none_and_unparsable_alone() -> None:
    assert fetch_value(TS_LOOKBACK, None) is None
    assert fetch_value(TS_LOOKBACK, "not a time") == "not a time"


def test_no_lookback_passes_the_watermark_through() -> None:
    assert fetch_value(TS, "2026-01-01T00:10:00+02:00") == "2026-01-01T00:10:00+02:00"


# none strategy


def test_none_strategy_keeps_the_page_token_mid_scan() -> None:
    assert advance(NONE, None, page([1], "p2"), [1]) == "p2"


def test_none_strategy_returns_to_none_at_the_end_of_a_scan() -> None:
    assert advance(NONE, "p2", page([1], None), [1]) is None
    assert advance(NONE, "p2", page([1], "p3", has_more=False), [1]) is None
    assert advance(NONE, "p2", page([], "p3"), []) is None


# reached / parse_instant


@pytest.mark.parametrize(
    ("cursor", "until", "expected"),
    [
        ("2026-01-02T00:00:00Z", "2026-01-01T00:00:00Z", True),
        ("2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z", True),
        ("2025-12-31T23:59:59Z", "2026-01-01T00:00:00Z", False),
        ("2026-01-01T01:00:00+01:00", "2026-01-01T00:00:00Z", True),
        (100, 99.5, True),
        (99, 100, False),
        (None, "2026-01-01T00:00:00Z", False),
        ("2026-01-02T00:00:00Z", None, False),
        ("token-abc", "token-abc", False),
    ],
)
def test_reached(cursor: Any, until: Any, expected: bool) -> None:
    assert reached(cursor, until) is expected


def test_parse_instant() -> None:
    assert parse_instant("1970-01-01T00:01:00Z") == 60.0
    assert parse_instant("1970-01-01T00:01:00") == 60.0  # naive: UTC
    assert parse_instant("1970-01-01T01:01:00+01:00") == 60.0
    assert parse_instant(datetime(1970, 1, 1, 0, 1, tzinfo=UTC)) == 60.0
    assert parse_instant(60) == 60.0
    bad_values: tuple[Any, ...] = (None, True, "", "soon", [], {})
    for bad in bad_values:
        assert parse_instant(bad) is None
