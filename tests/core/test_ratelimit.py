from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from watukuy.core.ratelimit import (
    DEFAULT_RETRY_AFTER,
    RateLimitInfo,
    parse_rate_limit,
    parse_retry_after,
    throttle_until,
)

pytestmark = pytest.mark.unit

# 2015-10-21T07:28:00Z
EPOCH = datetime(2015, 10, 21, 7, 28, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("120", 1120.0),
        ("  0 ", 1000.0),
        ("1.5", 1001.5),
        ("-5", None),
        ("", None),
        ("   ", None),
        (None, None),
        ("soon", None),
        ("12abc", None),
        ("1e3", None),
        ("9" * 400, None),
        ("Wed, 99 Foo 2015 07:28:00 GMT", None),
    ],
)
def test_retry_after_delta_and_malformed(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value, 1000.0) == expected


def test_retry_after_http_date_on_epoch_clock() -> None:
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", EPOCH - 30) == EPOCH


def test_retry_after_http_date_on_monotonic_clock() -> None:
    at = parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=50.0, wall=EPOCH - 30)
    assert at == 80.0


def test_retry_after_http_date_in_the_past_means_now() -> None:
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", EPOCH + 100) == EPOCH + 100


def test_retry_after_http_date_other_forms() -> None:
    later = datetime(2015, 10, 21, 7, 29, tzinfo=UTC)
    assert parse_retry_after(format_datetime(later, usegmt=True), EPOCH) == EPOCH + 60
    # RFC 850 and asctime forms are obsolete but allowed by RFC 9110
    assert parse_retry_after("Wed Oct 21 07:28:30 2015", EPOCH) == EPOCH + 30


def test_ietf_split_fields() -> None:
    headers = {"RateLimit-Limit": "100", "RateLimit-Remaining": "7", "RateLimit-Reset": "30"}
    assert parse_rate_limit(headers, 1000.0) == RateLimitInfo(100, 7, 1030.0)


def test_ietf_limit_with_quota_policies() -> None:
    headers = {"ratelimit-limit": "10, 10;w=1, 50;w=60", "ratelimit-remaining": "0"}
    assert parse_rate_limit(headers, 0.0) == RateLimitInfo(10, 0, None)


def test_combined_dictionary_form() -> None:
    headers = {"RateLimit": "limit=10, remaining=0, reset=5"}
    assert parse_rate_limit(headers, 1000.0) == RateLimitInfo(10, 0, 1005.0)


def test_combined_item_parameter_form() -> None:
    headers = {"RATELIMIT": '"default";r=3;t=12', "RateLimit-Policy": '"default";q=100;w=60'}
    assert parse_rate_limit(headers, 0.0) == RateLimitInfo(None, 3, 12.0)


def test_combined_form_wins_over_split_and_x_fields() -> None:
    headers = {
        "RateLimit": "limit=10, remaining=2, reset=5",
        "RateLimit-Remaining": "9",
        "X-RateLimit-Remaining": "8",
    }
    info = parse_rate_limit(headers, 0.0)
    assert info is not None and info.remaining == 2


def test_x_variants_delta_reset() -> None:
    headers = {"x-ratelimit-limit": "60", "X-RateLimit-Remaining": "0", "X-Ratelimit-Reset": "42"}
    assert parse_rate_limit(headers, 100.0) == RateLimitInfo(60, 0, 142.0)


def test_x_variants_epoch_reset() -> None:
    headers = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(EPOCH) + 90)}
    assert parse_rate_limit(headers, EPOCH) == RateLimitInfo(None, 0, EPOCH + 90)
    # on a monotonic clock, pass the wall time matching ``now``
    assert parse_rate_limit(headers, 5.0, wall=EPOCH) == RateLimitInfo(None, 0, 95.0)


def test_x_variants_epoch_millis_reset() -> None:
    headers = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(EPOCH + 90) * 1000)}
    assert parse_rate_limit(headers, EPOCH) == RateLimitInfo(None, 0, EPOCH + 90)


def test_epoch_reset_in_the_past_is_now() -> None:
    headers = {"X-RateLimit-Reset": str(int(EPOCH) - 10)}
    assert parse_rate_limit(headers, EPOCH) == RateLimitInfo(None, None, EPOCH)


def test_malformed_fields_are_ignored() -> None:
    headers = {"RateLimit-Limit": "lots", "RateLimit-Remaining": "-1", "RateLimit-Reset": "x"}
    assert parse_rate_limit(headers, 0.0) is None
    partly = {"X-RateLimit-Limit": "abc", "X-RateLimit-Remaining": "4"}
    assert parse_rate_limit(partly, 0.0) == RateLimitInfo(None, 4, None)
    assert parse_rate_limit({"RateLimit": "garbage;;==,"}, 0.0) is None


def test_no_headers() -> None:
    assert parse_rate_limit({}, 0.0) is None
    assert parse_rate_limit({"Content-Type": "application/json"}, 0.0) is None


def test_throttle_429_with_retry_after() -> None:
    assert throttle_until(429, {"Retry-After": "10"}, 100.0) == 110.0
    assert throttle_until(503, {"retry-after": "10"}, 100.0) == 110.0


def test_throttle_429_without_retry_after_uses_default_or_reset() -> None:
    assert throttle_until(429, {}, 100.0) == 100.0 + DEFAULT_RETRY_AFTER
    assert throttle_until(429, {}, 100.0, default=5.0) == 105.0
    assert throttle_until(429, {"Retry-After": "garbage"}, 100.0, default=5.0) == 105.0
    assert throttle_until(429, {"RateLimit-Reset": "20"}, 100.0) == 120.0


def test_throttle_remaining_zero_uses_reset() -> None:
    headers = {"RateLimit": "limit=10, remaining=0, reset=5"}
    assert throttle_until(200, headers, 100.0) == 105.0
    assert throttle_until(200, {"X-RateLimit-Remaining": "0"}, 100.0) is None
    assert throttle_until(200, {"RateLimit-Remaining": "1", "RateLimit-Reset": "5"}, 0.0) is None


def test_no_throttle_otherwise() -> None:
    assert throttle_until(200, {}, 0.0) is None
    assert throttle_until(503, {}, 0.0) is None
    assert throttle_until(500, {"Retry-After": "10"}, 0.0) is None


header_names = st.sampled_from(
    [
        "Retry-After",
        "RateLimit",
        "RateLimit-Limit",
        "RateLimit-Remaining",
        "RateLimit-Reset",
        "X-RateLimit-Limit",
        "X-RateLimit-Remaining",
        "x-ratelimit-reset",
    ]
)


@settings(max_examples=200, deadline=None)
@given(
    headers=st.dictionaries(header_names, st.text(max_size=40), max_size=8),
    status=st.sampled_from([200, 429, 503, 500]),
    now=st.floats(0.0, 2e9),
)
def test_never_raises_and_never_points_to_the_past(
    headers: dict[str, str], status: int, now: float
) -> None:
    parse_retry_after(headers.get("Retry-After"), now)
    info = parse_rate_limit(headers, now)
    if info is not None and info.reset_at is not None:
        assert info.reset_at >= now
    until = throttle_until(status, headers, now)
    assert until is None or until >= now
