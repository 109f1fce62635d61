"""Vendor pacing headers: ``Retry-After`` and the ``RateLimit`` family.

Vendors are inconsistent and sometimes wrong, so nothing here raises on what a server sends:
a value that cannot be understood is ignored (``None``), and the scheduler falls back on its
own schedule. Every result is an *absolute* time on the caller's clock (``now + delta``).

Two formats carry wall-clock instants instead of deltas: the HTTP-date form of ``Retry-After``
and epoch-valued ``X-RateLimit-Reset``. To turn them into deltas the functions take ``wall``,
the epoch seconds that correspond to ``now``; it defaults to ``now`` itself, which is right
when the caller's clock is epoch time and must be passed when it is a monotonic clock.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime

__all__ = [
    "DEFAULT_RETRY_AFTER",
    "RateLimitInfo",
    "parse_rate_limit",
    "parse_retry_after",
    "throttle_until",
]

DEFAULT_RETRY_AFTER = 60.0
"""Seconds to wait after a 429 that says neither Retry-After nor when the quota resets."""

EPOCH_SECONDS_THRESHOLD = 1e9
"""A reset above this is an epoch timestamp (2001-09-09), not a delta (31 years)."""

EPOCH_MILLIS_THRESHOLD = 1e12
"""A reset above this is an epoch timestamp in milliseconds (some vendors send those)."""

_DELTA = re.compile(r"\d+(?:\.\d+)?")
_LEADING_NUMBER = re.compile(r"\s*\"?\s*(-?\d+(?:\.\d+)?)")


@dataclass(frozen=True, slots=True)
class RateLimitInfo:
    """What the vendor said about its quota; each field ``None`` when absent or malformed.

    ``reset_at`` is absolute, on the caller's clock.
    """

    limit: int | None
    remaining: int | None
    reset_at: float | None


def parse_retry_after(value: str | None, now: float, wall: float | None = None) -> float | None:
    """The absolute time ``Retry-After`` points to, or ``None`` if absent or malformed.

    Accepts delta-seconds (``"120"``, and the common non-standard ``"1.5"``) and HTTP-date
    (``"Wed, 21 Oct 2015 07:28:00 GMT"``). A negative delta is malformed (``None``); a date
    already past means "now" (clock skew between us and the vendor is expected).
    """
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    if _DELTA.fullmatch(text):
        delta = float(text)
        return now + delta if math.isfinite(delta) else None
    at = _parse_http_date(text)
    if at is None:
        return None
    return now + max(0.0, at - (now if wall is None else wall))


def parse_rate_limit(
    headers: Mapping[str, str], now: float, wall: float | None = None
) -> RateLimitInfo | None:
    """Read the quota from the first header family present, or ``None`` if there is none.

    In order: the combined structured field ``RateLimit: limit=10, remaining=0, reset=5``
    (also the later drafts' ``"policy";r=0;t=5`` parameters, with ``q`` for the limit), the
    split IETF fields ``RateLimit-Limit/-Remaining/-Reset``, then ``X-RateLimit-*``. Header
    names are case-insensitive. A reset above 1e9 is an epoch timestamp (above 1e12, in
    milliseconds), otherwise delta seconds. A family counts as present when at least one of
    its fields parses; mixing fields of different families would mix different windows.
    """
    lowered = {key.lower(): value for key, value in headers.items()}
    families = (
        _combined_fields(lowered.get("ratelimit")),
        (
            lowered.get("ratelimit-limit"),
            lowered.get("ratelimit-remaining"),
            lowered.get("ratelimit-reset"),
        ),
        (
            lowered.get("x-ratelimit-limit"),
            lowered.get("x-ratelimit-remaining"),
            lowered.get("x-ratelimit-reset"),
        ),
    )
    for limit_text, remaining_text, reset_text in families:
        info = RateLimitInfo(
            limit=_count(limit_text),
            remaining=_count(remaining_text),
            reset_at=_reset_at(reset_text, now, wall),
        )
        if info != RateLimitInfo(None, None, None):
            return info
    return None


def throttle_until(
    status: int,
    headers: Mapping[str, str],
    now: float,
    *,
    default: float = DEFAULT_RETRY_AFTER,
    wall: float | None = None,
) -> float | None:
    """When the key may be polled again after this response, or ``None`` if no constraint.

    - 429 or 503 with a valid ``Retry-After``: that time.
    - 429 without: the quota reset if the vendor says when it is in the future, else
      ``now + default``.
    - any response reporting ``remaining == 0`` with a future reset: the reset time.

    A 503 without ``Retry-After`` is an outage, not pacing: the circuit breaker handles it.
    """
    lowered = {key.lower(): value for key, value in headers.items()}
    if status in (429, 503):
        retry_at = parse_retry_after(lowered.get("retry-after"), now, wall)
        if retry_at is not None:
            return retry_at
    info = parse_rate_limit(lowered, now, wall)
    reset_at = info.reset_at if info is not None else None
    future_reset = reset_at if reset_at is not None and reset_at > now else None
    if status == 429:
        return future_reset if future_reset is not None else now + max(0.0, default)
    if info is not None and info.remaining == 0:
        return future_reset
    return None


def _parse_http_date(text: str) -> float | None:
    """Epoch seconds of an HTTP-date, or ``None``. Naive dates are taken as UTC."""
    try:
        parsed = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    try:
        return parsed.timestamp()
    except (OverflowError, ValueError, OSError):
        return None


def _leading_number(text: str | None) -> float | None:
    """The number a header value starts with (``"100, 100;w=60"`` -> 100), if finite."""
    if text is None:
        return None
    match = _LEADING_NUMBER.match(text)
    if match is None:
        return None
    number = float(match.group(1))
    return number if math.isfinite(number) else None


def _count(text: str | None) -> int | None:
    number = _leading_number(text)
    if number is None or number < 0:
        return None
    return int(number)


def _reset_at(text: str | None, now: float, wall: float | None) -> float | None:
    number = _leading_number(text)
    if number is None or number < 0:
        return None
    if number > EPOCH_MILLIS_THRESHOLD:
        number /= 1000.0
    if number > EPOCH_SECONDS_THRESHOLD:
        return now + max(0.0, number - (now if wall is None else wall))
    return now + number


_COMBINED_KEYS = {
    "limit": 0,
    "q": 0,
    "remaining": 1,
    "r": 1,
    "reset": 2,
    "t": 2,
}


def _combined_fields(value: str | None) -> tuple[str | None, str | None, str | None]:
    """``(limit, remaining, reset)`` texts of a combined ``RateLimit`` field.

    Collects every ``key=value`` pair, whether a dictionary member (``limit=10, reset=5``) or
    an item parameter (``"default";r=0;t=5``). With several policies, the first one wins.
    """
    found: list[str | None] = [None, None, None]
    if value is None:
        return (None, None, None)
    for member in value.split(","):
        for part in member.split(";"):
            key, sep, text = part.partition("=")
            index = _COMBINED_KEYS.get(key.strip().lower())
            if sep and index is not None and found[index] is None:
                found[index] = text.strip()
    return (found[0], found[1], found[2])
