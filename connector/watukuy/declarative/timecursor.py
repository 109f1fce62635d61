"""``cursor.timestamp``: the incremental read most vendor APIs take, a time window.

::

    timestamp:
      field: updated_at          the item's time; the newest seen moves an open-ended cursor
      field_format: epoch        how items write it (iso | epoch | epoch_ms | epoch_us | %-pattern)
      param: start_time          where the window's start goes (or body: a JSON body path)
      format: epoch              how the window is sent (the same choices)
      end_param: end_time        the window's end (or end_body:)
      end: now-5m                the end: now (default) or now less a settling time
      step: 30d                  windows of at most this length, oldest first
      start: "{partition.data.start_date}"   a key's first start: template, ISO date, 730d
      lookback: 1h               each window is sent this much earlier

Two modes, by whether the vendor is told the window's end (``end_param``, ``end_body``,
``{cursor.end}``, or ``end``/``step`` set):

- **open-ended** (only a start is sent, as before): the cursor is the newest item time seen,
  and a poll asks from it (less ``lookback``) to whatever the vendor has.
- **windowed**: a poll reads ``[cursor, now - settle)``, at most ``step`` long; the cursor
  moves to the window's end once the window's last page committed, and a stepped backfill
  that is not at ``now`` yet goes on to the next window at once (each committed on its own:
  a restart resumes at the last committed window). A window's end is fixed when its first
  page is asked and stored with its listing, so a crash mid-window goes on in the same
  window. A window the vendor fails is retried as ``on_status`` says, never skipped.

Edges: windows are half-open and both ends are written the same way (an epoch truncates
both), so consecutive windows tile without a gap; an item the vendor hands out in two windows
(an inclusive end, ``lookback``) is seen unchanged by the snapshot the second time: no event.

The window arithmetic is :mod:`watukuy.core.timewindows`; this module reads the config and
places the values. Pure: no I/O; ``now`` is an argument.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from watukuy.core.errors import ConfigError
from watukuy.core.poller import Partition, Unreadable
from watukuy.core.timewindows import (
    TimeFormat,
    Window,
    WindowSpec,
    after_window,
    iso,
    parse_iso,
    plan_window,
)
from watukuy.declarative.errors import RenderError
from watukuy.declarative.paging import NOWHERE, PageRequest, Place, parse_place
from watukuy.declarative.paths import MISSING, Path, parse_path
from watukuy.declarative.positions import Plan, Position
from watukuy.declarative.templates import Scope, Template
from watukuy.declarative.values import duration, section

__all__ = ["TimestampCursor", "parse_timestamp"]

_LEGACY = TimeFormat("iso")
_NOW = re.compile(r"now(?:\s*-\s*(?P<settle>\S+))?")


@dataclass(frozen=True, slots=True)
class Start:
    """A key's first window start: fixed, a duration back from now, or a template over the
    partition (``None`` everywhere: no lower bound)."""

    fixed: datetime | None = None
    back: float | None = None
    raw: str | None = None
    template: Template | None = None
    where: str = ""

    def at(self, partition: Partition, now: datetime, fmt: TimeFormat) -> datetime | None:
        if self.fixed is not None:
            return self.fixed
        if self.back is not None:
            return now - timedelta(seconds=self.back)
        if self.template is None:
            return None
        value = self.template.value(Scope(partition=partition))
        if value is None or value == "":
            return None
        moment = _read_date(value, fmt)
        if moment is None:  # names the template and the formats, never the partition's data
            raise RenderError(
                f"{self.where}: {self.template.shown} is not an ISO-8601 date or time, "
                f"nor {fmt.name}; fix the partition's data"
            )
        return moment


@dataclass(frozen=True, slots=True)
class TimestampCursor:
    field: Path
    field_format: TimeFormat | None
    """``None``: not declared; items are read as ISO-8601 or epoch seconds, and one that is
    neither does not move the cursor (as before the key existed). Declared: such an item
    is parked ``invalid``, naming the field and the format."""
    start_place: Place
    end_place: Place
    format: TimeFormat
    spec: WindowSpec
    start: Start
    kind: str = "timestamp"
    strategy: str = "token"

    @property
    def param(self) -> str | None:
        return self.start_place.param

    @property
    def sends(self) -> bool:
        return self.start_place is not NOWHERE

    @property
    def places_body(self) -> str | None:
        for place in (self.start_place, self.end_place):
            if place.body is not None:
                return place.where
        return None

    def bind(
        self, used: Collection[str], compile_value: Callable[[object, str], Template]
    ) -> TimestampCursor:
        """The cursor once the request is compiled: ``{cursor.end}`` in a template tells the
        vendor the end, so the windows are bounded; a ``start`` template is compiled with the
        names the request has."""
        out = self
        if "cursor.end" in used and not self.spec.bounded:
            out = replace(out, spec=replace(self.spec, bounded=True))
        if self.start.raw is not None:
            template = compile_value(self.start.raw, self.start.where)
            out = replace(out, start=replace(self.start, template=template))
        if out.spec.step is not None and out.end_place is NOWHERE and "cursor.end" not in used:
            raise ConfigError(
                "a step needs the window's end sent: set end_param or end_body, "
                "or use {cursor.end} in the request",
                self.start.where.rsplit(".", 1)[0] + ".step",
            )
        return out

    def plan(self, position: Position, partition: Partition, now: float) -> Plan:
        moment = datetime.fromtimestamp(now, tz=UTC)
        cursor = self._resumed(position.resume)
        first = self.start.at(partition, moment, self.format) if cursor is None else None
        window = plan_window(self.spec, cursor, first, moment)
        if position.end is not None:  # a listing going on keeps the end it started with
            window = replace(window, end=parse_iso(position.end))
        if window.empty or self._unseen(window):
            return Plan(empty=True, window=window)
        sent = None if window.sent_start is None else self.format.write(window.sent_start)
        end = None if window.end is None else self.format.write(window.end)
        end_at = None if window.end is None else iso(window.end)
        origin = None if first is None else iso(first)
        return Plan(sent=sent, start=sent, end=end, end_at=end_at, origin=origin, window=window)

    def _unseen(self, window: Window) -> bool:
        """A window an epoch format cannot tell from empty (both ends in one second): asked,
        it would be ``[x, x)``; it waits to grow instead. A date pattern's window within one
        day is asked (``from=to=today``): such vendors' ends are mostly inclusive, and today's
        changes would otherwise wait for tomorrow."""
        if window.start is None or window.end is None or not self.format.is_epoch:
            return False
        return self.format.write(window.start) == self.format.write(window.end)

    def place(self, page: PageRequest, plan: Plan) -> PageRequest:
        if plan.sent is not None:
            page = self.start_place.into(page, plan.sent)
        if plan.end is not None:
            page = self.end_place.into(page, plan.end)
        return page

    def vet(self, items: list[Any]) -> list[Any]:
        """Items whose ``field`` the declared ``field_format`` cannot read are parked."""
        fmt = self.field_format
        if fmt is None:
            return items
        out = []
        for item in items:
            value = MISSING if type(item) is Unreadable else self.field.find(item)
            if value is MISSING or value is None or value == "" or fmt.read(value) is not None:
                out.append(item)  # an item without the field does not move the cursor
            else:
                reason = f"cursor field {self.field.text!r} is not a time in {fmt.name}"
                out.append(Unreadable(item, reason))
        return out

    def highest(self, high: str | None, items: list[Any]) -> str | None:
        best = parse_iso(high) if high is not None else None
        for item in items:
            if type(item) is Unreadable:
                continue
            moment = self._item_time(self.field.find(item))
            if moment is not None and (best is None or moment > best):
                best = moment
        return None if best is None else iso(best)

    def finish(
        self, position: Position, plan: Plan, body: Any, high: str | None, now: float
    ) -> tuple[Any, bool]:
        window: Window | None = plan.window
        if window is None:
            return position.resume, False
        moment = datetime.fromtimestamp(now, tz=UTC)
        highest = parse_iso(high) if high is not None else None
        cursor, more = after_window(self.spec, window, highest, moment)
        if cursor is None:
            return position.resume, False
        if window.end is None and cursor == window.start:
            return position.resume, False  # nothing newer: the stored value as it was
        return iso(cursor), more

    def _item_time(self, value: Any) -> datetime | None:
        fmt = self.field_format
        if fmt is not None:
            return fmt.read(value)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return TimeFormat("epoch").read(value)
        return _LEGACY.read(value)

    def _resumed(self, value: Any) -> datetime | None:
        if value is None:
            return None
        moment = _read_date(value, _LEGACY)
        if moment is None:
            raise RenderError(
                "the timestamp cursor is not an ISO-8601 time; reset it with "
                "--to 2026-01-01T00:00:00Z (or without --to)"
            )
        return moment


def _read_date(value: Any, fmt: TimeFormat) -> datetime | None:
    """An ISO-8601 date or time, else a time in ``fmt`` (epoch seconds for ``iso``)."""
    if isinstance(value, str):
        moment = parse_iso(value)
        if moment is not None:
            return moment
    if fmt.name == "iso" and isinstance(value, int | float) and not isinstance(value, bool):
        return TimeFormat("epoch").read(value)
    return fmt.read(value)


def parse_timestamp(given: object, path: str, at: str) -> TimestampCursor:
    values = section(given, path, at)
    field_format = values.get("field_format")
    bounded = any(name in values for name in ("end_param", "end_body", "end", "step"))
    step = values.get("step")
    return TimestampCursor(
        field=parse_path(values["field"], f"{at}.field"),
        field_format=None
        if field_format is None
        else TimeFormat.parse(field_format, f"{at}.field_format"),
        start_place=parse_place(values, at, "param", "body", "updated_since", required=False),
        end_place=parse_place(values, at, "end_param", "end_body", "end_time", required=False),
        format=TimeFormat.parse(values.get("format"), f"{at}.format"),
        spec=WindowSpec(
            bounded=bounded,
            settle=_settle(values.get("end", "now"), f"{at}.end"),
            step=None if step is None else duration(step, f"{at}.step"),
            lookback=duration(values.get("lookback", "0s"), f"{at}.lookback", allow_zero=True),
        ),
        start=_start(values.get("start"), f"{at}.start"),
    )


def _settle(raw: object, where: str) -> float:
    match = _NOW.fullmatch(raw.strip()) if isinstance(raw, str) else None
    if match is None:
        raise ConfigError(f"must be now or now-DURATION (now-5m), got {raw!r}", where)
    settle = match.group("settle")
    return 0.0 if settle is None else duration(settle, where)


def _start(raw: object, where: str) -> Start:
    if raw is None:
        return Start(where=where)
    if not isinstance(raw, str) or not raw.strip():
        raise ConfigError(
            f"must be a template, an ISO-8601 date or a duration back (730d), got {raw!r}", where
        )
    if "{" in raw:
        return Start(raw=raw, where=where)
    moment = parse_iso(raw)
    if moment is not None:
        return Start(fixed=moment, where=where)
    try:
        return Start(back=duration(raw, where), where=where)
    except ConfigError:
        raise ConfigError(
            f"must be a template, an ISO-8601 date or a duration back (730d), got {raw!r}", where
        ) from None
