"""Paths into JSON bodies and items: one grammar for every place a config names a value.

``records``, ``identity``, ``version``, the paginators' and cursors' ``path``/``field``,
``parent.key``, partition ``data`` and ``key``, the filters of ``transform.filter``,
``parent.where`` and ``on_status`` rules, and the transforms' paths all read::

    data.items            a key, then a key
    results[0].id         [n] indexes a list (0-based; [-1] is the last element)
    meta["next.link"]     a key holding dots, brackets or spaces, quoted ("..." or '...')
    ["@odata.nextLink"]   the same at the top level
    list[*].customer      [*] maps over a list (``records`` only: each element's sub-path
                          is an item)
    ''                    the whole body (where a place allows it: ``records``, ``record``)

A path is parsed once, at load, so a typo is a ``ConfigError`` naming the field; a place that
cannot take an index or ``[*]`` says so there. Looking one up never evaluates anything, and
when nothing is there the caller's error names the path, never the values it walked through
(an item may hold personal data).

Written by hand rather than with JMESPath: the syntax is a small subset of it, and a real
JMESPath engine would accept expressions (filters, functions) that this contract does not
promise to keep.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from watukuy.core.errors import ConfigError, PathMissing
from watukuy.core.validation import kind

__all__ = ["EVERY", "MISSING", "KeyPath", "Path", "parse_key_path", "parse_path", "put"]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
"""What :meth:`Path.find` returns when nothing is there (``None`` is a value)."""


class _Every:
    def __repr__(self) -> str:
        return "[*]"


EVERY: Final = _Every()
"""The ``[*]`` step: every element of a list."""

Step = str | int | _Every

_NAME = re.compile(r"[^.\[\]\s\"']+")
_INDEX = re.compile(r"\[(-?\d+)\]")
_QUOTED = re.compile(r"\[(\"|')(.*?)\1\]", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Path:
    """A parsed path: ``text`` as written, ``steps`` keys (``str``), indexes (``int``) and
    :data:`EVERY`."""

    text: str
    steps: tuple[Step, ...]
    keys_only: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "keys_only", all(type(s) is str for s in self.steps))

    def find(self, value: Any) -> Any:
        """The value at this path, or :data:`MISSING`. A path with ``[*]`` is taken apart
        with :meth:`spread` first."""
        if self.keys_only:  # the common case, on every item: dict lookups alone
            for step in self.steps:
                if type(value) is not dict and not isinstance(value, Mapping):
                    return MISSING
                value = value.get(step, MISSING)
                if value is MISSING:
                    return MISSING
            return value
        for step in self.steps:
            if type(step) is str:
                if not isinstance(value, Mapping) or step not in value:
                    return MISSING
                value = value[step]
            elif type(step) is int:
                if not isinstance(value, Sequence) or isinstance(value, str | bytes):
                    return MISSING
                try:
                    value = value[step]
                except IndexError:
                    return MISSING
            else:
                raise ValueError(f"path {self.text!r} maps over a list: spread() it first")
        return value

    def get(self, value: Any, what: str = "path") -> Any:
        """The value at this path; :class:`PathMissing` (naming ``what`` and the path) if
        there is none. ``None`` counts as none: a null identity is no identity."""
        found = self.find(value)
        if found is MISSING or found is None:
            raise PathMissing(f"no value at {what} {self.text!r}")
        return found

    def spread(self) -> tuple[Path, Path] | None:
        """At the first ``[*]``: the path of the list, and the path within each element
        (``None``: there is no ``[*]``)."""
        for at, step in enumerate(self.steps):
            if step is EVERY:
                head, tail = self.steps[:at], self.steps[at + 1 :]
                return Path(_text(head), head), Path(_text(tail), tail)
        return None

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class KeyPath:
    """A path of keys alone (``reporter.email``): what a transform reads and writes where it
    read. The same grammar as :class:`Path`, without ``[n]`` or ``[*]``."""

    text: str
    steps: tuple[str, ...]

    def find(self, value: Any) -> Any:
        """The value at this path, or :data:`MISSING`."""
        for step in self.steps:
            if type(value) is not dict and not isinstance(value, Mapping):  # dict: no ABC check
                return MISSING
            value = value.get(step, MISSING)
            if value is MISSING:
                return MISSING
        return value

    def __str__(self) -> str:
        return self.text


def put(value: Any, path: KeyPath, new: Any) -> Any:
    """A copy of ``value`` (a JSON body) with ``new`` at ``path``: the mappings along the path
    are copied (or made where missing), nothing else is; ``value`` is left as it was.
    ``ValueError`` when a step meets something that is not a mapping."""
    if not path.steps:
        return new
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        raise ValueError(f"cannot set {path.text!r}: the value there is not a mapping")
    out = dict(value)
    head, *rest = path.steps
    out[head] = put(value.get(head), KeyPath(path.text, tuple(rest)), new) if rest else new
    return out


def parse_key_path(text: object, where: str) -> KeyPath:
    """A :class:`KeyPath`; ``[n]`` or ``[*]`` in it is a ``ConfigError`` at ``where``."""
    path = parse_path(text, where, keys_only=True)
    return KeyPath(path.text, tuple(str(step) for step in path.steps))


def parse_path(
    text: object,
    where: str,
    *,
    allow_empty: bool = False,
    every: bool = False,
    keys_only: bool = False,
) -> Path:
    """Parse ``text``; a ``ConfigError`` naming ``where`` says what is wrong and where.

    ``every``: ``[*]`` is allowed (once); ``keys_only``: only keys, no ``[n]`` (the
    transforms, which write where they read)."""
    if not isinstance(text, str):
        raise ConfigError(f"must be a dotted path like 'data.items', got {kind(text)}", where)
    if text == "":
        if allow_empty:
            return Path("", ())
        raise ConfigError("must not be empty; e.g. 'id' or 'data.id'", where)
    steps = _steps(text, where)
    if keys_only and any(type(step) is not str for step in steps):
        raise ConfigError(f"invalid path {text!r}: only keys here, no [n] or [*]", where)
    spread = [step for step in steps if step is EVERY]
    if spread and not every:
        raise ConfigError(f"invalid path {text!r}: [*] is allowed in records only", where)
    if len(spread) > 1:
        raise ConfigError(f"invalid path {text!r}: at most one [*]", where)
    return Path(text, steps)


def _steps(text: str, where: str) -> tuple[Step, ...]:
    steps: list[Step] = []
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
            elif text.startswith("[*]", at):
                steps.append(EVERY)
                at += 3
            else:
                raise _bad(text, at, 'expected [n], [*] or ["key"]', where)
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
    return tuple(steps)


def _text(steps: tuple[Step, ...]) -> str:
    """The text of ``steps`` as this grammar writes it (what :func:`parse_path` reads back)."""
    out = ""
    for step in steps:
        if type(step) is int:
            out += f"[{step}]"
        elif step is EVERY:
            out += "[*]"
        elif _NAME.fullmatch(str(step)):
            out += f".{step}" if out else str(step)
        else:
            quote = "'" if '"' in str(step) else '"'
            out += f"[{quote}{step}{quote}]"
    return out


def _bad(text: str, at: int, why: str, where: str) -> ConfigError:
    return ConfigError(f"invalid path {text!r}: {why} (at character {at + 1})", where)
