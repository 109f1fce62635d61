"""Validators for declarative poller values: each failure is a ``ConfigError`` naming the path.

Durations here are strings with a unit (``"30s"``, ``"500ms"``): a bare number is refused,
because people coming from Kafka Connect write milliseconds where the Python API reads seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from watukuy.core.durations import parse_duration
from watukuy.core.errors import ConfigError
from watukuy.core.validation import kind
from watukuy.options.declarative import check_section, children, key_doc

__all__ = [
    "alternatives",
    "duration",
    "one_of",
    "parse_kind",
    "section",
    "true_flag",
]


def alternatives(path: str) -> tuple[str, ...]:
    """The alternatives of the ``one_of`` mapping at ``path``: its children but those that
    stand ``beside`` them."""
    return tuple(n for n in children(path) if not key_doc(f"{path}.{n}").beside)


def section(raw: object, path: str, where: str) -> Mapping[str, Any]:
    """A mapping whose keys are those of ``path`` in the key table."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"must be a mapping, got {kind(raw)}", where)
    for name in raw:
        if not isinstance(name, str):
            raise ConfigError(f"keys must be strings, got {kind(name)}", f"{where}.{name}")
    check_section(raw, path, where)
    return raw


def one_of(raw: object, path: str, where: str) -> tuple[str, Any]:
    """The one alternative set in a ``one_of`` mapping, and its value."""
    given = section(raw, path, where)
    options = alternatives(path)
    chosen = [name for name in options if name in given]
    if not chosen:
        raise ConfigError(f"set exactly one of: {', '.join(options)}", where)
    if len(chosen) > 1:
        raise ConfigError(
            f"set exactly one of: {', '.join(options)}; found {' and '.join(chosen)}", where
        )
    return chosen[0], given[chosen[0]]


T = TypeVar("T")


def parse_kind(
    raw: object, path: str, where: str, kinds: Mapping[str, Callable[[object, str, str], T]]
) -> T:
    """The one alternative set in the ``one_of`` mapping at ``path`` (``paginate``, ``cursor``,
    ``auth``...), parsed by its entry in ``kinds`` with its own key-table path and config path.
    A kind the key table lists and ``kinds`` lacks is a ``ConfigError`` naming it, never a
    ``KeyError``: adding a kind is one table entry plus one parser."""
    kind, given = one_of(raw, path, where)
    parse = kinds.get(kind)
    if parse is None:
        raise ConfigError(f"{kind!r} is not supported here yet", f"{where}.{kind}")
    return parse(given, f"{path}.{kind}", f"{where}.{kind}")


def duration(raw: object, where: str, *, allow_zero: bool = False) -> float:
    """A duration of a declarative poller: the config file's rule (a unit is required)."""
    return parse_duration(raw, where, allow_zero=allow_zero, unit_required=True)


def true_flag(raw: object, where: str) -> None:
    """A switch such as ``link_header: true``: anything but ``true`` is refused."""
    if raw is not True:
        raise ConfigError(f"must be true (remove the key to turn it off), got {raw!r}", where)


def choice(raw: object, where: str, path: str, options: tuple[str, ...]) -> str:
    """One of ``options``; absent (``None``) is the key table's default for ``path``."""
    value = key_doc(path).default if raw is None else raw
    if value not in options:
        shown = repr(value) if isinstance(value, str | int | float) else kind(value)
        raise ConfigError(f"must be one of: {', '.join(options)}; got {shown}", where)
    return str(value)
