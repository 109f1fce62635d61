"""Where a declarative poll stands, as its cursor stores it, and what a cursor plans for a poll.

Stored form. Between polls the engine's cursor is the plain value (the token, the ISO
timestamp, or ``None``), which is what ``watukuy-source reset --to VALUE`` sets. In the middle
of a listing it is ``{"page": <next page>, "resume": <the value the poll started from>}``,
plus ``"max"`` (the greatest timestamp so far) and ``"end"`` (a time window's end, fixed when
its first page was asked), committed with each page: a crash, or a poll that hit
``max_pages``, continues the listing where it stopped, in the same window.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Plan", "Position", "mid_listing", "read"]


@dataclass(frozen=True, slots=True)
class Position:
    """Where a poll stands: the value it started from, the page (``None``: the first), the
    greatest timestamp seen so far in the listing, and its window's end."""

    resume: Any
    page: Any = None
    high: str | None = None
    end: str | None = None


_TAGGED = frozenset({"page", "resume", "max", "end"})


def read(value: Any) -> Position:
    """The engine's cursor value as a :class:`Position`."""
    if isinstance(value, Mapping) and "page" in value and set(value) <= _TAGGED:
        return Position(value.get("resume"), value["page"], value.get("max"), value.get("end"))
    return Position(value)


def mid_listing(
    position: Position, page: Any, high: str | None, end: str | None = None
) -> dict[str, Any]:
    """The stored cursor of a listing that continues at ``page``."""
    out = {"page": page, "resume": position.resume}
    if high is not None:
        out["max"] = high
    end = end if end is not None else position.end
    if end is not None:
        out["end"] = end
    return out


@dataclass(frozen=True, slots=True)
class Plan:
    """What a cursor sends on one poll: ``sent`` is what ``{cursor}`` and its parameter carry
    (``None``: nothing yet); ``start`` and ``end`` what ``{cursor.start}``/``{cursor.end}``
    carry (a time window, written in its format); ``end_at`` the window's end to store while
    its listing goes on; ``origin`` a key's first start worked out from ``start`` (``730d``
    back from now), stored as where the poll started so its pages all ask the same window;
    ``empty``: there is nothing to read yet (a window not open)."""

    sent: Any = None
    start: Any = None
    end: Any = None
    end_at: str | None = None
    origin: str | None = None
    empty: bool = False
    window: Any = None
