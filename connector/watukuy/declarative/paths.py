"""Paths into JSON bodies and items: ``records``, ``identity``, ``version``, ``path``, ``field``,
``key`` and the values of ``data``.

Syntax::

    data.items            a key, then a key
    results[0].id         [n] indexes a list (0-based; [-1] is the last element)
    meta["next.link"]     a key holding dots, brackets or spaces, quoted ("..." or '...')
    ["@odata.nextLink"]   the same at the top level
    ''                    the whole body (records: '' when the body is the list itself)

A path is parsed once, at load, so a typo is a ``ConfigError`` naming the field. Looking one
up never evaluates anything; when nothing is there the error names the path, never the values
it walked through (an item may hold personal data).

Written by hand rather than with JMESPath: the syntax is a small subset of it, and a real
JMESPath engine would accept expressions (filters, functions) that this contract does not
promise to keep.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from watukuy.core.errors import ConfigError
from watukuy.core.filters import MISSING  # one "nothing there" for every path kind
from watukuy.core.validation import kind
from watukuy.declarative.errors import PathMissing

__all__ = ["MISSING", "Path", "parse_path"]

_NAME = re.compile(r"[^.\[\]\s\"']+")
_INDEX = re.compile(r"\[(-?\d+)\]")
_QUOTED = re.compile(r"\[(\"|')(.*?)\1\]")


@dataclass(frozen=True, slots=True)
class Path:
    """A parsed path: ``text`` as written, ``steps`` keys (``str``) and indexes (``int``)."""

    text: str
    steps: tuple[str | int, ...]

    def find(self, value: Any) -> Any:
        """The value at this path, or :data:`MISSING`."""
        for step in self.steps:
            if isinstance(step, int):
                if not isinstance(value, Sequence) or isinstance(value, str | bytes):
                    return MISSING
                try:
                    value = value[step]
                except IndexError:
                    return MISSING
            else:
                if not isinstance(value, Mapping) or step not in value:
                    return MISSING
                value = value[step]
        return value

    def get(self, value: Any, what: str = "path") -> Any:
        """The value at this path; :class:`PathMissing` (naming ``what`` and the path) if
        there is none. ``None`` counts as none: a null identity is no identity."""
        found = self.find(value)
        if found is MISSING or found is None:
            raise PathMissing(f"no value at {what} {self.text!r}")
        return found

    def __str__(self) -> str:
        return self.text


def parse_path(text: object, where: str, *, allow_empty: bool = False) -> Path:
    """Parse ``text``; a ``ConfigError`` naming ``where`` says what is wrong and where."""
    if not isinstance(text, str):
        raise ConfigError(f"must be a path like 'data.items', got {kind(text)}", where)
    if text == "":
        if allow_empty:
            return Path("", ())
        raise ConfigError("must not be empty; e.g. 'id' or 'data.id'", where)
    steps: list[str | int] = []
    at = 0
    expect_name = True  # at the start and after a dot, a bare name may follow
    while at < len(text):
        char = text[at]
        if char == "[":
            index = _INDEX.match(text, at)
            quoted = _QUOTED.match(text, at) if index is None else None
            if index is not None:
                steps.append(int(index.group(1)))
                at = index.end()
            elif quoted is not None:
                steps.append(quoted.group(2))
                at = quoted.end()
            else:
                raise _bad(text, at, 'expected [n] or ["key"]', where)
            expect_name = False
        elif char == ".":
            if expect_name:
                raise _bad(text, at, "a name is missing before '.'", where)
            expect_name = True
            at += 1
            if at == len(text):
                raise _bad(text, at, "a name is missing after '.'", where)
            if text[at] == "[":
                raise _bad(text, at, "write a[0], not a.[0]", where)
        else:
            name = _NAME.match(text, at)
            if name is None:
                raise _bad(text, at, f"unexpected {char!r}", where)
            if not expect_name:
                raise _bad(text, at, "expected '.' or '[' between parts", where)
            steps.append(name.group(0))
            at = name.end()
            expect_name = False
    return Path(text, tuple(steps))


def _bad(text: str, at: int, why: str, where: str) -> ConfigError:
    return ConfigError(f"invalid path {text!r}: {why} (at character {at + 1})", where)
