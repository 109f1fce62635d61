"""Durations as users write them: ``"250ms"``, ``"30s"``, ``"5m"``, ``"2h"``, ``"30d"``, numbers
of seconds, or ``timedelta``. Everything inside watukuy is float seconds.

One rule, here, for every entry point. In Python a number is seconds, as the public API says. A
file (the YAML config, a declarative poller) is read with ``unit_required``: there a bare number
is refused rather than guessed at, since Kafka Connect users write milliseconds as bare
numbers; the error names the field and suggests both spellings.
"""

from __future__ import annotations

import re
from datetime import timedelta

from watukuy.core.errors import ConfigError

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$")


def parse_duration(
    value: object,
    path: str,
    *,
    allow_zero: bool = False,
    unit_required: bool = False,
    shown: str | None = None,
) -> float:
    """Seconds in ``value``; a ``ConfigError`` naming ``path`` when it is not a duration.

    ``unit_required`` refuses a bare number (a file's rule); ``shown`` is how the value may
    appear in that message (``[redacted]`` when it came from a secret).
    """
    seconds: float
    if unit_required and isinstance(value, int | float) and not isinstance(value, bool):
        raise ConfigError(_bare_number(value, repr(value) if shown is None else shown), path)
    if isinstance(value, bool):
        raise ConfigError(f"expected a duration like '30s', got {value!r}", path)
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float):
        try:
            seconds = float(value)
        except OverflowError:
            raise ConfigError(f"duration is too large: {value!r}", path) from None
    elif isinstance(value, str):
        match = _PATTERN.match(value)
        if match is None:
            raise ConfigError(
                f"expected a duration like '250ms', '30s', '5m', '2h' or '30d', got {value!r}",
                path,
            )
        seconds = float(match.group(1)) * _UNITS[match.group(2)]
    else:
        raise ConfigError(f"expected a duration like '30s', got {type(value).__name__}", path)
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        raise ConfigError(f"duration must be finite, got {value!r}", path)
    if seconds < 0 or (seconds == 0 and not allow_zero):
        raise ConfigError(f"duration must be positive, got {value!r}", path)
    return seconds


def _bare_number(value: float, shown: str) -> str:
    """The refusal of a bare number, suggesting it as milliseconds and as seconds."""
    if shown == repr(value) and value > 0 and value == int(value):
        ms, seconds = f"{int(value)}ms", format_duration(value / 1000)
        like = f"{ms!r} or {seconds!r}" if seconds != ms else f"{ms!r} or '{int(value)}s'"
    else:
        like = "'1000ms' or '1s'"
    return (
        f"must be a duration like {like}, got {shown} (a bare number; Connect users mean "
        "milliseconds)"
    )


def format_duration(seconds: float) -> str:
    """The shortest exact spelling, for messages and inspect output."""
    for unit in ("d", "h", "m", "s"):
        size = _UNITS[unit]
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{round(seconds * 1000)}ms"


def age_text(seconds: float) -> str:
    """How long ago, for people: ``850ms``, ``42s``, ``3m07s``, ``2h05m``, ``3d04h``."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    whole = int(seconds)
    for size, unit, smaller, sub in (
        (86400, "d", 3600, "h"),
        (3600, "h", 60, "m"),
        (60, "m", 1, "s"),
    ):
        if whole >= size:
            return f"{whole // size}{unit}{(whole % size) // smaller:02d}{sub}"
    return f"{whole}s"
