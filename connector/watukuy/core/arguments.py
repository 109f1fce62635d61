"""The arguments of operations, checked as they enter: JSON form in, JSON form out.

Each check returns the value in the JSON form a command record carries, or raises
:class:`~watukuy.core.errors.ConfigError` naming the argument (``from``, ``ids[2]``).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from watukuy.core.errors import ConfigError
from watukuy.core.validation import join, kind

LANES = ("live", "backfill", "reconcile")
"""The lanes of an offset, in the order ``offsets`` lists them."""


def json_value(value: object, path: str) -> Any:
    """``value`` as the JSON a command record carries; refused if it has no JSON form.

    A cursor is any JSON value. A timezone-aware ``datetime`` becomes ISO-8601 UTC text
    (``2026-09-01T00:00:00Z``); a naive one is refused rather than guessed at. Tuples become
    lists (JSON has no tuples).
    """
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigError(f"must be a finite number, got {value!r}", path)
        return value
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ConfigError(
                f"needs a time zone, e.g. {value.isoformat()}Z; got {value.isoformat()!r}", path
            )
        utc = value.astimezone(UTC).replace(tzinfo=None)
        spec = "seconds" if utc.microsecond == 0 else "microseconds"
        return utc.isoformat(timespec=spec) + "Z"
    if isinstance(value, list | tuple):
        return [json_value(v, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, inner in value.items():
            if not isinstance(key, str):
                raise ConfigError(f"keys must be strings, got {kind(key)}", path)
            out[key] = json_value(inner, join(path, key))
        return out
    raise ConfigError(f"must be a JSON value (a cursor), got {kind(value)}", path)


def flag(value: object, path: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"must be true or false, got {kind(value)}", path)
    return value


def ids(value: object, path: str) -> list[str]:
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, list | tuple):
        raise ConfigError(f"must be a list of parked item ids, got {kind(value)}", path)
    ids: list[str] = []
    for index, entry in enumerate(value):
        if not isinstance(entry, str) or not entry:
            raise ConfigError(f"must be a non-empty string, got {kind(entry)}", f"{path}[{index}]")
        ids.append(entry)
    return ids


def offset(value: object, path: str) -> dict[str, Any] | None:
    """``{"live": C, "backfill": C, "reconcile": C}`` (any subset), or ``None``: start over."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"must be a mapping of lane to cursor ({', '.join(LANES)}) or null, got {kind(value)}",
            path,
        )
    check_names(value, LANES, path)
    return {lane: json_value(value[lane], join(path, lane)) for lane in LANES if lane in value}


def check_names(given: Mapping[Any, Any], known: tuple[str, ...], path: str) -> None:
    for name in given:
        if name in known:
            continue
        if not known:
            raise ConfigError("takes no arguments", join(path, name))
        close = difflib.get_close_matches(str(name), known, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}?" if close else f"expected one of: {', '.join(known)}"
        raise ConfigError(f"unknown argument; {hint}", join(path, name))
