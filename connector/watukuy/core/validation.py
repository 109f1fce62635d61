"""Validators shared by every layer that reads user input (config, declarative pollers, REST,
operation arguments): each failure names the path of the bad field."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from watukuy.core.errors import ConfigError


def join(path: str, key: object) -> str:
    """``runner`` + ``commit.interval`` -> ``runner.commit.interval``; top level has no prefix."""
    return f"{path}.{key}" if path else str(key)


def kind(value: object) -> str:
    """What a user wrote, in words: ``a list``, ``an int``, ``null``."""
    if value is None:
        return "null"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, type):
        return f"a class ({value.__name__})"
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def section(raw: object, path: str) -> Mapping[str, Any]:
    """An optional mapping section: absent or empty (``topics:``) reads as ``{}``."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"must be a mapping, got {kind(raw)}", path)
    for key in raw:
        if not isinstance(key, str):
            raise ConfigError(f"keys must be strings, got {kind(key)}", join(path, key))
    return raw


def json_kind(value: object) -> str:
    """What a JSON body holds, in JSON's words: ``a boolean``, ``a number``, ``an array``,
    ``an object`` (REST answers in them; :func:`kind` speaks YAML's and Python's)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def check_keys(
    given: Mapping[str, Any], known: Iterable[str], path: str, *, noun: str = "key"
) -> None:
    """Reject the first key not in ``known``, suggesting the closest known one; ``noun`` is
    what the message calls it (a JSON body's keys are fields)."""
    allowed = list(known)
    for key in given:
        if key in allowed:
            continue
        close = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}?" if close else f"expected one of: {', '.join(allowed)}"
        raise ConfigError(f"unknown {noun}; {hint}", join(path, key))


def positive_int(value: object, path: str, shown: str | None = None) -> int:
    """An ``int`` of at least 1 (``True`` is not one).

    ``shown`` is how the value may appear in the message (``[redacted]`` for secrets); without
    it, a value of the wrong type is named by its kind only (a declarative poller's values).
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"must be a positive integer, got {_wrong_type(value, shown)}", path)
    if value < 1:
        written = value if shown is None else shown
        raise ConfigError(f"must be a positive integer, got {written}", path)
    return value


def non_negative_int(value: object, path: str) -> int:
    """An ``int`` of at least 0 (``True`` is not one)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"must be an integer >= 0, got {kind(value)}", path)
    if value < 0:
        raise ConfigError(f"must be an integer >= 0, got {value}", path)
    return value


def _wrong_type(value: object, shown: str | None) -> str:
    if shown is None:
        return kind(value)
    return f"a string {shown}" if isinstance(value, str) else f"{kind(value)} {shown}"


def non_empty_string(value: object, path: str, example: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"must be a string like {example!r}, got {kind(value)}", path)
    if not value.strip():
        raise ConfigError(f"must not be empty; e.g. {example!r}", path)
    return value


def message_of(exc: ConfigError) -> str:
    """``exc``'s message without its ``path: `` prefix."""
    text = str(exc)
    prefix = f"{exc.path}: "
    return text[len(prefix) :] if exc.path and text.startswith(prefix) else text
