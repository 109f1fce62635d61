"""Item paths and filters: the conditions of ``transform.filter`` and ``parent.where``.

A filter is data, never an expression (CONTRACT.md, "Several streams, child streams and
transforms")::

    {path: status, equals: open}            the value at the path equals the given one
    {path: status, in: [open, pending]}     it equals one of them
    {path: deleted_at, exists: false}       the path is (true) or is not (false) there
    {path: email, matches: ".*@acme\\.com"}  a string fully matching the regular expression
    {all: [f, ...]}  {any: [f, ...]}  {not: f}

A path is the one grammar of :mod:`watukuy.core.paths` (``reporter.email``,
``errors[0].code``); a path that is not there matches nothing (except ``exists: false``).
Equality is JSON's: ``true`` is not ``1``. Everything is checked and compiled once, at load,
into plain closures: a poll runs no parser and no ``re.compile``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from watukuy.core.errors import ConfigError
from watukuy.core.paths import MISSING, Path, parse_path
from watukuy.core.validation import check_keys, kind

__all__ = ["MISSING", "OPERATORS", "Filter", "ItemPath", "compile_filter", "parse_item_path"]

OPERATORS = ("equals", "in", "exists", "matches")
_COMBINATORS = ("all", "any", "not")

Filter = Callable[[Any], bool]
"""True when the item matches."""


ItemPath = Path
"""A path into an item (:mod:`watukuy.core.paths`)."""


def parse_item_path(raw: object, where: str) -> ItemPath:
    """``reporter.email`` (or ``errors[0].code``) -> its steps; a ``ConfigError`` at
    ``where`` when it is not one."""
    return parse_path(raw, where)


def compile_filter(spec: object, where: str) -> Filter:
    """The filter ``spec`` describes; a ``ConfigError`` names the bad part of it."""
    if not isinstance(spec, Mapping):
        raise ConfigError(
            f"must be a mapping like {{path: status, equals: open}}, got {kind(spec)}", where
        )
    combinators = [name for name in _COMBINATORS if name in spec]
    if combinators:
        if len(spec) != 1:
            raise ConfigError(
                f"{combinators[0]!r} stands alone in its mapping; wrap the other conditions "
                f"in all: [...]",
                where,
            )
        return _combined(combinators[0], spec[combinators[0]], f"{where}.{combinators[0]}")
    return _condition(spec, where)


def _combined(name: str, raw: object, where: str) -> Filter:
    if name == "not":
        inner = compile_filter(raw, where)
        return lambda item: not inner(item)
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"must be a non-empty list of filters, got {kind(raw)}", where)
    parts = tuple(compile_filter(part, f"{where}[{index}]") for index, part in enumerate(raw))
    if name == "all":
        return lambda item: all(part(item) for part in parts)
    return lambda item: any(part(item) for part in parts)


def _condition(spec: Mapping[str, Any], where: str) -> Filter:
    check_keys(spec, ("path", *OPERATORS, *_COMBINATORS), where, noun="operator")
    if "path" not in spec:
        raise ConfigError(
            "a condition needs 'path' and one of: " + ", ".join(OPERATORS), f"{where}.path"
        )
    path = parse_item_path(spec["path"], f"{where}.path")
    chosen = [name for name in OPERATORS if name in spec]
    if len(chosen) != 1:
        found = f"; found {' and '.join(chosen)}" if chosen else ""
        raise ConfigError(f"set exactly one of: {', '.join(OPERATORS)}{found}", where)
    operator = chosen[0]
    return _OPERATOR_COMPILERS[operator](path, spec[operator], f"{where}.{operator}")


def _same(left: Any, right: Any) -> bool:
    """JSON equality: a boolean equals only a boolean (Python has ``True == 1``)."""
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    return bool(left == right)


def _equals(path: ItemPath, wanted: object, where: str) -> Filter:
    _json_scalar_or_container(wanted, where)

    def equals(item: Any) -> bool:
        found = path.find(item)
        return found is not MISSING and _same(found, wanted)

    return equals


def _in(path: ItemPath, wanted: object, where: str) -> Filter:
    if not isinstance(wanted, list) or not wanted:
        raise ConfigError(f"must be a non-empty list of values, got {kind(wanted)}", where)
    for index, value in enumerate(wanted):
        _json_scalar_or_container(value, f"{where}[{index}]")
    if all(type(value) is str for value in wanted):
        texts = frozenset(wanted)  # the usual case (statuses, kinds): one set lookup

        def in_texts(item: Any) -> bool:
            found = path.find(item)
            return type(found) is str and found in texts

        return in_texts
    values = tuple(wanted)

    def in_values(item: Any) -> bool:
        found = path.find(item)
        return found is not MISSING and any(_same(found, value) for value in values)

    return in_values


def _exists(path: ItemPath, wanted: object, where: str) -> Filter:
    if not isinstance(wanted, bool):
        raise ConfigError(f"must be true or false, got {kind(wanted)}", where)
    if wanted:
        return lambda item: path.find(item) is not MISSING
    return lambda item: path.find(item) is MISSING


def _matches(path: ItemPath, wanted: object, where: str) -> Filter:
    if not isinstance(wanted, str):
        raise ConfigError(f"must be a regular expression (a string), got {kind(wanted)}", where)
    try:
        pattern = re.compile(wanted)
    except re.error as exc:
        raise ConfigError(f"invalid regular expression: {exc}", where) from None
    fullmatch = pattern.fullmatch

    def matches(item: Any) -> bool:
        found = path.find(item)
        return type(found) is str and fullmatch(found) is not None

    return matches


def _json_scalar_or_container(value: object, where: str) -> None:
    if value is None or isinstance(value, str | int | float | bool | Mapping):
        return
    if isinstance(value, Sequence) and not isinstance(value, bytes):
        return
    raise ConfigError(f"must be a JSON value, got {kind(value)}", where)


_OPERATOR_COMPILERS: dict[str, Callable[[ItemPath, object, str], Filter]] = {
    "equals": _equals,
    "in": _in,
    "exists": _exists,
    "matches": _matches,
}
