"""``cursor``: what a declarative poller keeps between polls. Exactly one of::

    token: {path: resume, param: cursor}       the value at ``path`` in the last page's body,
                                               sent on the next poll (kept when the last page
                                               has none)
    timestamp: {field: updated_at, param: updated_since, lookback: 0s}
                                               the greatest item ``field`` seen, sent on the
                                               next poll as ISO-8601 UTC, minus ``lookback``
    none: true                                 full listing each poll (the default)

``param`` is the query parameter the value is sent in on every page of a poll; ``{cursor}``
in a template sends it anywhere else. On the first poll there is none, and a parameter or
header that is only ``{cursor}`` is left out.

Stored form. Between polls the engine's cursor is the plain value (the token, the ISO
timestamp, or ``None``), which is what ``watukuy-source reset --to VALUE`` sets. In the middle
of a listing it is ``{"page": <next page>, "resume": <the value the poll started from>}``
(plus ``"max"``: the greatest timestamp so far), committed with each page: a crash, or a
poll that hit ``max_pages``, continues the listing where it stopped. Both compile onto the
core's ``token`` strategy (``none`` onto ``none``): the fetch says ``has_more`` itself.

Each kind is an entry of :data:`CURSORS`: its parser builds a :class:`Cursor`, which answers
its callers' questions itself (what is sent, what a listing keeps, where the next poll starts).

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from watukuy.core.errors import ConfigError
from watukuy.core.validation import non_empty_string
from watukuy.declarative.errors import BadBody, RenderError
from watukuy.declarative.paths import MISSING, Path, parse_path
from watukuy.declarative.values import duration, parse_kind, section, true_flag

__all__ = [
    "CURSORS",
    "Cursor",
    "NoCursor",
    "Position",
    "TimestampCursor",
    "TokenCursor",
    "check_sent",
    "mid_listing",
    "parse_cursor",
    "read",
]


class Cursor(Protocol):
    """A cursor kind answers for itself what its callers ask of it."""

    @property
    def kind(self) -> str:
        """Its key under ``cursor`` (``token``...)."""

    @property
    def param(self) -> str | None:
        """The query parameter the cursor is sent in on every page (``None``: only where a
        template says ``{cursor}``)."""

    @property
    def strategy(self) -> str:
        """The core cursor strategy the poller is defined with."""

    def outgoing(self, resume: Any) -> Any:
        """What ``{cursor}`` and :attr:`param` send for a poll started from ``resume``."""

    def highest(self, high: str | None, items: list[Any]) -> str | None:
        """What a listing keeps while it goes on (a timestamp cursor: the greatest seen)."""

    def at_end(self, position: Position, body: Any, high: str | None) -> Any:
        """The plain cursor once the poll's last page (``body``) is in."""


@dataclass(frozen=True, slots=True)
class TokenCursor:
    path: Path
    param: str | None
    kind: str = "token"
    strategy: str = "token"

    def outgoing(self, resume: Any) -> Any:
        return resume

    def highest(self, high: str | None, items: list[Any]) -> str | None:
        return None

    def at_end(self, position: Position, body: Any, high: str | None) -> Any:
        token = self.path.find(body) if body is not None else MISSING
        if token is MISSING or token is None or token == "":
            return position.resume
        if isinstance(token, bool) or not isinstance(token, str | int | float):
            raise BadBody(f"cursor token at {self.path.text!r} is not a string or a number")
        return token


@dataclass(frozen=True, slots=True)
class TimestampCursor:
    field: Path
    param: str | None
    lookback: float
    kind: str = "timestamp"
    strategy: str = "token"

    def outgoing(self, resume: Any) -> Any:
        if resume is None:
            return None
        moment = _instant(resume)
        if moment is None:
            raise RenderError(
                "the timestamp cursor is not an ISO-8601 time; reset it with "
                "--to 2026-01-01T00:00:00Z (or without --to)"
            )
        return _iso(moment - timedelta(seconds=self.lookback))

    def highest(self, high: str | None, items: list[Any]) -> str | None:
        best = _instant(high) if high is not None else None
        for item in items:
            moment = _instant(self.field.find(item))
            if moment is not None and (best is None or moment > best):
                best = moment
        return None if best is None else _iso(best)

    def at_end(self, position: Position, body: Any, high: str | None) -> Any:
        start = _instant(position.resume) if position.resume is not None else None
        end = _instant(high) if high is not None else None
        if end is None or (start is not None and start >= end):
            return position.resume
        return high


@dataclass(frozen=True, slots=True)
class NoCursor:
    param: None = None
    kind: str = "none"
    strategy: str = "none"

    def outgoing(self, resume: Any) -> Any:
        return None

    def highest(self, high: str | None, items: list[Any]) -> str | None:
        return None

    def at_end(self, position: Position, body: Any, high: str | None) -> Any:
        return None


def _sent_in(values: Mapping[str, Any], at: str) -> str | None:
    param = values.get("param")
    return None if param is None else non_empty_string(param, f"{at}.param", "cursor")


def _parse_token(given: object, path: str, at: str) -> Cursor:
    values = section(given, path, at)
    return TokenCursor(parse_path(values["path"], f"{at}.path"), _sent_in(values, at))


def _parse_timestamp(given: object, path: str, at: str) -> Cursor:
    values = section(given, path, at)
    lookback = duration(values.get("lookback", "0s"), f"{at}.lookback", allow_zero=True)
    field = parse_path(values["field"], f"{at}.field")
    return TimestampCursor(field, _sent_in(values, at), lookback)


def _parse_none(given: object, path: str, at: str) -> Cursor:
    true_flag(given, at)
    return NoCursor()


CURSORS: Mapping[str, Callable[[object, str, str], Cursor]] = {
    "token": _parse_token,
    "timestamp": _parse_timestamp,
    "none": _parse_none,
}
"""Every cursor kind, by its key under ``cursor``: one entry per kind."""


def parse_cursor(raw: object, where: str) -> Cursor:
    if raw is None:
        return NoCursor()
    return parse_kind(raw, "cursor", where, CURSORS)


def check_sent(spec: Cursor, uses_template: bool, where: str) -> None:
    """A cursor that is never sent would make every poll a full listing: refuse it."""
    if spec.strategy != "none" and spec.param is None and not uses_template:
        raise ConfigError(
            f"the cursor is never sent: set {spec.kind}.param, or use {{cursor}} in the request",
            where,
        )


@dataclass(frozen=True, slots=True)
class Position:
    """Where a poll stands: the value it started from, the page (``None``: the first), and
    the greatest timestamp seen so far in the listing."""

    resume: Any
    page: Any = None
    high: str | None = None


_TAGGED = frozenset({"page", "resume", "max"})


def read(value: Any) -> Position:
    """The engine's cursor value as a :class:`Position`."""
    if isinstance(value, Mapping) and "page" in value and set(value) <= _TAGGED:
        return Position(value.get("resume"), value["page"], value.get("max"))
    return Position(value)


def mid_listing(position: Position, page: Any, high: str | None) -> dict[str, Any]:
    """The stored cursor of a listing that continues at ``page``."""
    out = {"page": page, "resume": position.resume}
    if high is not None:
        out["max"] = high
    return out


def _instant(value: Any) -> datetime | None:
    """An aware UTC datetime from ISO-8601 text (naive: UTC) or epoch seconds."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        if isinstance(value, int | float):
            return datetime.fromtimestamp(value, tz=UTC)
        if isinstance(value, str):
            moment = datetime.fromisoformat(value.strip())
        else:
            return None
    except (ValueError, OverflowError, OSError):
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
