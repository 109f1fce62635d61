"""``cursor``: what a declarative poller keeps between polls. Exactly one of::

    token: {path: resume, param: cursor}       the value at ``path`` in the last page's body,
                                               sent on the next poll (kept when the last page
                                               has none)
    timestamp: {field: updated_at, param: updated_since, lookback: 0s, ...}
                                               a time window: from where the last one ended
                                               (or the newest item ``field`` seen) to now; see
                                               :mod:`watukuy.declarative.timecursor`
    none: true                                 full listing each poll (the default)

``param`` is the query parameter the value is sent in on every page of a poll; ``{cursor}``
in a template sends it anywhere else. On the first poll there is none, and a parameter or
header that is only ``{cursor}`` is left out. The stored form is
:mod:`watukuy.declarative.positions`'s. Both compile onto the core's ``token`` strategy
(``none`` onto ``none``): the fetch says ``has_more`` itself.

Each kind is an entry of :data:`CURSORS`: its parser builds a :class:`Cursor`, which answers
its callers' questions itself (what a poll sends and where, what a listing keeps, where the
next poll starts).

Pure: no I/O; the clock is an argument.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from watukuy.core.errors import ConfigError
from watukuy.core.poller import Partition
from watukuy.core.validation import non_empty_string
from watukuy.declarative.errors import BadBody
from watukuy.declarative.paging import PageRequest
from watukuy.declarative.paths import MISSING, Path, parse_path
from watukuy.declarative.positions import Plan, Position, mid_listing, read
from watukuy.declarative.templates import Template
from watukuy.declarative.timecursor import TimestampCursor, parse_timestamp
from watukuy.declarative.values import parse_kind, section, true_flag

__all__ = [
    "CURSORS",
    "Cursor",
    "NoCursor",
    "Plan",
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
    def strategy(self) -> str:
        """The core cursor strategy the poller is defined with."""

    @property
    def sends(self) -> bool:
        """Whether the config places it in every request itself (a parameter, a body path),
        without a ``{cursor}`` in a template."""

    @property
    def places_body(self) -> str | None:
        """The config path of a value it places in the JSON body (``None``: none)."""

    def bind(
        self, used: Collection[str], compile_value: Callable[[object, str], Template]
    ) -> Cursor:
        """The cursor once the request is compiled: ``used`` are the ``cursor`` placeholders
        its templates hold (``cursor``, ``cursor.start``, ``cursor.end``)."""

    def plan(self, position: Position, partition: Partition, now: float) -> Plan:
        """What a poll from ``position`` sends (a time window is fixed here, from ``now``)."""

    def place(self, page: PageRequest, plan: Plan) -> PageRequest:
        """The first request of a poll with what ``plan`` sends where the config says."""

    def vet(self, items: list[Any]) -> list[Any]:
        """A page's items, those the cursor cannot read parked (:class:`Unreadable`)."""

    def highest(self, high: str | None, items: list[Any]) -> str | None:
        """What a listing keeps while it goes on (a timestamp cursor: the greatest seen)."""

    def finish(
        self, position: Position, plan: Plan, body: Any, high: str | None, now: float
    ) -> tuple[Any, bool]:
        """The plain cursor once the poll's last page (``body``) is in, and whether another
        poll follows at once (a stepped backfill's next window)."""


class _Plain:
    """What a cursor that is not a time window answers alike."""

    places_body: str | None = None

    def bind(self, used: Collection[str], compile_value: Callable[[object, str], Template]) -> Any:
        return self

    def vet(self, items: list[Any]) -> list[Any]:
        return items


@dataclass(frozen=True, slots=True)
class TokenCursor(_Plain):
    path: Path
    param: str | None
    kind: str = "token"
    strategy: str = "token"

    @property
    def sends(self) -> bool:
        return self.param is not None

    def plan(self, position: Position, partition: Partition, now: float) -> Plan:
        return Plan(sent=position.resume)

    def place(self, page: PageRequest, plan: Plan) -> PageRequest:
        if self.param is None or plan.sent is None:
            return page
        return replace(page, query={**page.query, self.param: str(plan.sent)})

    def highest(self, high: str | None, items: list[Any]) -> str | None:
        return None

    def finish(
        self, position: Position, plan: Plan, body: Any, high: str | None, now: float
    ) -> tuple[Any, bool]:
        token = self.path.find(body) if body is not None else MISSING
        if token is MISSING or token is None or token == "":
            return position.resume, False
        if isinstance(token, bool) or not isinstance(token, str | int | float):
            raise BadBody(f"cursor token at {self.path.text!r} is not a string or a number")
        return token, False


@dataclass(frozen=True, slots=True)
class NoCursor(_Plain):
    kind: str = "none"
    strategy: str = "none"
    sends: bool = False

    def plan(self, position: Position, partition: Partition, now: float) -> Plan:
        return Plan()

    def place(self, page: PageRequest, plan: Plan) -> PageRequest:
        return page

    def highest(self, high: str | None, items: list[Any]) -> str | None:
        return None

    def finish(
        self, position: Position, plan: Plan, body: Any, high: str | None, now: float
    ) -> tuple[Any, bool]:
        return None, False


def _parse_token(given: object, path: str, at: str) -> Cursor:
    values = section(given, path, at)
    param = values.get("param")
    sent = None if param is None else non_empty_string(param, f"{at}.param", "cursor")
    return TokenCursor(parse_path(values["path"], f"{at}.path"), sent)


def _parse_none(given: object, path: str, at: str) -> Cursor:
    true_flag(given, at)
    return NoCursor()


CURSORS: Mapping[str, Callable[[object, str, str], Cursor]] = {
    "token": _parse_token,
    "timestamp": parse_timestamp,
    "none": _parse_none,
}
"""Every cursor kind, by its key under ``cursor``: one entry per kind."""


def parse_cursor(raw: object, where: str) -> Cursor:
    if raw is None:
        return NoCursor()
    return parse_kind(raw, "cursor", where, CURSORS)


def check_sent(spec: Cursor, used: Collection[str], where: str) -> None:
    """A cursor that is never sent would make every poll a full listing: refuse it."""
    if spec.strategy != "none" and not spec.sends and not used:
        raise ConfigError(
            f"the cursor is never sent: set {spec.kind}.param, or use {{cursor}} in the request",
            where,
        )
