"""Time windows of an incremental read, and the formats vendors write times in (pure).

Most incremental endpoints ask for a window, not one "since" value: Stripe's
``created[gte]``/``created[lt]`` in epoch seconds, Zendesk's ``start_time`` (required on the
first call), PayPal's windows of at most 31 days, Harvest's ``from``/``to`` as ``YYYYMMDD``.
:class:`TimeFormat` reads and writes one of those forms; :func:`plan_window` says which window
a poll reads, from the cursor the key committed and ``now``; :func:`after_window` where the
cursor stands once the window's last page committed.

The cursor is the start of the next window, an ISO-8601 UTC instant: it moves only to the end
of a window whose pages all committed, so a window that failed is read again, never skipped.
Windows are half-open, ``[start, end)``; a vendor whose end is inclusive hands the items on
an edge out twice, and the snapshot sees them unchanged the second time (no event). With
``lookback`` a window starts that much before the cursor, to re-read late writes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from watukuy.core.errors import ConfigError

__all__ = ["TimeFormat", "Window", "WindowSpec", "after_window", "iso", "parse_iso", "plan_window"]

_EPOCHS = {"epoch": 1, "epoch_ms": 1_000, "epoch_us": 1_000_000}
_DIRECTIVE = re.compile(r"%[a-zA-Z]")


@dataclass(frozen=True, slots=True)
class TimeFormat:
    """``iso`` (ISO-8601, UTC, ``Z``), ``epoch``, ``epoch_ms``, ``epoch_us`` or a strftime
    pattern (``%Y-%m-%d``; read and written in UTC)."""

    name: str

    @staticmethod
    def parse(raw: object, where: str) -> TimeFormat:
        if raw is None:
            return TimeFormat("iso")
        if not isinstance(raw, str) or not raw:
            raise ConfigError(
                f"must be iso, epoch, epoch_ms, epoch_us or a strftime pattern, got {raw!r}", where
            )
        if raw == "iso" or raw in _EPOCHS:
            return TimeFormat(raw)
        if not _DIRECTIVE.search(raw):
            raise ConfigError(
                f"{raw!r} is neither iso, epoch, epoch_ms, epoch_us nor a strftime pattern "
                "(one with %-directives, like %Y-%m-%d)",
                where,
            )
        return TimeFormat(raw)

    @property
    def is_epoch(self) -> bool:
        return self.name in _EPOCHS

    def read(self, value: object) -> datetime | None:
        """The instant ``value`` writes in this format (``None``: it writes none)."""
        if value is None or isinstance(value, bool):
            return None
        scale = _EPOCHS.get(self.name)
        try:
            if scale is not None:
                if isinstance(value, str):
                    value = float(value.strip())
                if not isinstance(value, int | float):
                    return None
                return datetime.fromtimestamp(value / scale, tz=UTC)
            if not isinstance(value, str):
                return None
            if self.name == "iso":
                return parse_iso(value)
            return datetime.strptime(value.strip(), self.name).replace(tzinfo=UTC)
        except (ValueError, OverflowError, OSError):
            return None

    def write(self, moment: datetime) -> str | int:
        """``moment`` in this format: a number for the epochs, text for the rest."""
        scale = _EPOCHS.get(self.name)
        if scale is not None:
            delta = moment.astimezone(UTC) - datetime(1970, 1, 1, tzinfo=UTC)
            return (
                delta.days * 86_400 + delta.seconds
            ) * scale + delta.microseconds * scale // 1_000_000
        if self.name == "iso":
            return iso(moment)
        return moment.astimezone(UTC).strftime(self.name)


def parse_iso(text: str) -> datetime | None:
    """An aware UTC instant from ISO-8601 text (naive is UTC); ``None`` when it is not one."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class WindowSpec:
    """How a poll's window is made: ``settle`` (the ``end: now-DURATION`` lag, 0 for now),
    ``step`` (at most this long; ``None``: up to the end), ``lookback``, and whether the window
    has an end at all (a vendor asked only for a start reads to now by itself)."""

    bounded: bool
    settle: float = 0.0
    step: float | None = None
    lookback: float = 0.0


@dataclass(frozen=True, slots=True)
class Window:
    """``[start, end)``; ``start`` ``None``: no lower bound (the first poll without a start
    date); ``end`` ``None``: unbounded (only a start is sent). ``sent_start`` is ``start``
    minus the lookback: what the vendor is asked from."""

    start: datetime | None
    end: datetime | None
    sent_start: datetime | None

    @property
    def empty(self) -> bool:
        return self.start is not None and self.end is not None and self.start >= self.end


def plan_window(
    spec: WindowSpec, cursor: datetime | None, first: datetime | None, now: datetime
) -> Window:
    """The window a poll reads: from the committed ``cursor`` (or ``first``, the configured
    start, on a key's first poll) to ``now`` less the settle, at most ``step`` long."""
    start = cursor if cursor is not None else first
    end = None
    if spec.bounded:
        end = now - timedelta(seconds=spec.settle)
        if spec.step is not None and start is not None:
            end = min(end, start + timedelta(seconds=spec.step))
    sent = None if start is None else start - timedelta(seconds=spec.lookback)
    return Window(start, end, sent)


def after_window(
    spec: WindowSpec, window: Window, highest: datetime | None, now: datetime
) -> tuple[datetime | None, bool]:
    """Where the cursor stands once the window's last page committed, and whether another
    window follows at once (a stepped backfill not at its end yet; without a step the next
    poll reads what came since, on its schedule). A bounded window moves
    the cursor to its end; an unbounded one to the newest item seen, never back."""
    if window.end is not None:
        settled = now - timedelta(seconds=spec.settle)
        return window.end, spec.step is not None and window.end < settled
    if highest is None or (window.start is not None and highest <= window.start):
        return window.start, False
    return highest, False
