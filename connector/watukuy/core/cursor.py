"""Cursor strategies: what ``fetch`` is given, and where a page leaves the cursor.

- ``token``: an opaque value returned by ``fetch`` (``FetchResult.cursor``), passed back as is.
- ``timestamp``: a watermark, the greatest ``item[field]`` seen; ``fetch`` receives it minus
  ``lookback`` so late writes at the boundary are re-read (change detection drops the items
  already seen, so the overlap costs requests, never duplicates).
- ``none``: every poll is a full scan; within a poll ``FetchResult.cursor`` is the page token,
  and the cursor returns to ``None`` when the scan completes.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from watukuy.core.poller import CursorSpec, FetchResult


def fetch_value(spec: CursorSpec, cursor: Any) -> Any:
    """The value ``fetch`` sees as ``ctx.cursor.value``."""
    if spec.strategy != "timestamp" or cursor is None or spec.lookback == 0:
        return cursor
    if isinstance(cursor, int | float) and not isinstance(cursor, bool):
        return cursor - spec.lookback
    parsed = parse_instant(cursor)
    if parsed is None:
        return cursor
    earlier = datetime.fromtimestamp(parsed, tz=UTC) - timedelta(seconds=spec.lookback)
    return earlier.isoformat().replace("+00:00", "Z")


def advance(spec: CursorSpec, cursor: Any, page: FetchResult, items: list[Any]) -> Any:
    """The cursor after ``page`` was processed (``items``: the page's items)."""
    if spec.strategy == "timestamp":
        return watermark(spec, cursor, items)
    if spec.strategy == "none" and not page_has_more(spec, cursor, page):
        return None
    return page.cursor


def page_has_more(spec: CursorSpec, cursor: Any, page: FetchResult) -> bool:
    """Whether the poll goes on to another page.

    An explicit ``has_more`` wins. Otherwise a token or page cursor that moved means more;
    a timestamp poll reads one page unless ``fetch`` says otherwise.
    """
    if page.has_more is not None:
        return page.has_more
    if spec.strategy == "timestamp":
        return False
    return page.cursor is not None and page.cursor != cursor and bool(page.items)


def watermark(spec: CursorSpec, cursor: Any, items: list[Any]) -> Any:
    """The greatest timestamp among ``cursor`` and the items' ``spec.field`` values."""
    best, best_at = cursor, parse_instant(cursor)
    for item in items:
        value = item.get(spec.field) if isinstance(item, dict) and spec.field else None
        at = parse_instant(value)
        if at is not None and (best_at is None or at > best_at):
            best, best_at = value, at
    return best


def reached(cursor: Any, until: Any) -> bool:
    """Whether a timestamp cursor has reached ``until`` (a backfill's end)."""
    at, end = parse_instant(cursor), parse_instant(until)
    return at is not None and end is not None and at >= end


def parse_instant(value: Any) -> float | None:
    """Seconds since the epoch of a number or an ISO-8601 string; ``None`` if it is neither."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    else:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()
