"""Ordering, timestamps, opaque cursors and page selection of the vendor simulator.

Items are ordered by their *position* ``(updated_at in microseconds, id)``. A cursor is that
position, opaque to clients, meaning "everything strictly after this". The same encoding serves
both ``next`` (continue paging) and ``resume`` (come back later for what changed), because the
simulator stamps every change of a tenant with a strictly increasing ``updated_at``: a change
made after a page was served always sorts after everything that page contained.

Nothing here does I/O or reads a clock, so it can be tested (and reasoned about) on its own.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Generic, Protocol, TypeVar

Position = tuple[int, str]
"""``(updated_at in microseconds since the epoch, item id)``: the sort key of an item."""

START: Position = (-1, "")
"""A position before every item (timestamps are never negative)."""

DEFAULT_LIMIT = 50
MAX_LIMIT = 500

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_CURSOR_PREFIX = "c1."


class BadRequest(ValueError):
    """A query parameter the vendor refuses; its message is sent as ``{"error": ...}``."""


class Positioned(Protocol):
    """Anything that sorts by a position (the simulator's items)."""

    @property
    def position(self) -> Position: ...


T = TypeVar("T", bound=Positioned)


def to_iso(micros: int) -> str:
    """Render microseconds since the epoch the way the vendor does: ISO-8601, UTC, ``Z``."""
    return (_EPOCH + micros * _MICROSECOND).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def from_iso(text: str) -> int:
    """Parse an ISO-8601 timestamp to microseconds; a naive one is taken to be UTC."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise BadRequest(f"not an ISO-8601 timestamp: {text!r}") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // _MICROSECOND


def seconds_to_micros(seconds: float) -> int:
    """Convert a clock reading to the integer microseconds that item stamps use."""
    return round(seconds * 1_000_000)


def encode_cursor(position: Position) -> str:
    """Make an opaque, URL-safe token of a position."""
    raw = json.dumps(list(position), separators=(",", ":")).encode()
    return _CURSOR_PREFIX + base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(token: str) -> Position:
    """Read back a token of :func:`encode_cursor`; anything else is a :class:`BadRequest`."""
    if not token.startswith(_CURSOR_PREFIX):
        raise BadRequest("malformed cursor")
    body = token[len(_CURSOR_PREFIX) :]
    try:
        value = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise BadRequest("malformed cursor") from exc
    if not _is_position(value):
        raise BadRequest("malformed cursor")
    return (value[0], value[1])


def _is_position(value: object) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 2
        and type(value[0]) is int
        and isinstance(value[1], str)
    )


def parse_limit(text: str | None) -> int:
    """Page size: default :data:`DEFAULT_LIMIT`; outside 1..:data:`MAX_LIMIT` is refused."""
    if text is None:
        return DEFAULT_LIMIT
    try:
        limit = int(text)
    except ValueError as exc:
        raise BadRequest(f"limit must be an integer, got {text!r}") from exc
    if not 1 <= limit <= MAX_LIMIT:
        raise BadRequest(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    return limit


def lower_bound(cursor: str | None, updated_since: str | None) -> Position:
    """The position a listing starts after, combining ``cursor`` and ``updated_since``.

    ``updated_since`` is inclusive: ``(since, "")`` sorts before every item stamped ``since``
    because no id is empty. When both are given the later bound wins, so a client may keep
    sending its filter while it follows ``next``.
    """
    bound = START
    if cursor is not None:
        bound = max(bound, decode_cursor(cursor))
    if updated_since is not None:
        bound = max(bound, (from_iso(updated_since), ""))
    return bound


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a listing, with the two tokens a client can come back with."""

    items: Sequence[T]
    next: str | None
    """Continue paging from here; ``None`` on the last page."""
    resume: str
    """After the last item of this page (or the bound if empty): later changes only."""


def select_page(items: Iterable[T], after: Position, limit: int) -> Page[T]:
    """Take up to ``limit`` items strictly after ``after``, in position order."""
    remaining = sorted((item for item in items if item.position > after), key=_position_of)
    chosen = remaining[:limit]
    end = chosen[-1].position if chosen else after
    more = len(remaining) > limit
    return Page(items=chosen, next=encode_cursor(end) if more else None, resume=encode_cursor(end))


def _position_of(item: Positioned) -> Position:
    return item.position
