"""Templates in ``url``, ``query``, ``headers``, ``body`` and ``auth`` values.

Placeholders::

    {partition.key}          the partition's key ('' on a poller without partitions); in a
                             child stream, the whole key (acme/P1)
    {tenant.key}             the tenant's own key in every stream (acme, for acme/P1 too)
    {partition.data.NAME}    a value of the partition's data; NAME is a path (see
                             watukuy.declarative.paths): {partition.data.auth.token},
                             {partition.data.hosts[0]}
    {cursor}                 the cursor sent this poll (the resume token, or the time
                             window's start, less lookback); empty on the first poll
    {cursor.start}           a timestamp cursor's window, in its ``format``: the start (as
    {cursor.end}             {cursor}) and the end (``{cursor.end}`` bounds the window)
    {parent.key}             a child stream's parent item key; {parent.parent.key} the
                             grandparent's, and so on (only as deep as the stream is)
    {fanout.NAME}            a fan-out stream's value of the entry NAME
    {{  }}                   a literal { and }

Nothing is evaluated: no expressions, format specs (``{cursor:>10}``) or conversions
(``{cursor!r}``). Templates are compiled once, at load: an unknown name is a ``ConfigError``
naming the field, and so is ``{partition.data.NAME}`` on a poller without ``partitions`` or
``{cursor}`` with ``cursor: {none: true}``.

Rendering:

- A value is text as JSON would write it: strings as they are, numbers as digits, booleans
  ``true``/``false``; a mapping or a list inside text is an error.
- A query parameter or header whose template is exactly one placeholder that renders nothing
  (no cursor yet, a null data value) is left out of the request.
- In a JSON ``body``, a string that is exactly one placeholder takes the value's own type
  (``"{partition.data.limit}"`` sends ``50``, not ``"50"``); other strings are text.
- A data name the partition lacks fails the poll with an error naming the template's field,
  never the partition's data.
"""

from __future__ import annotations

import difflib
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from watukuy.core.children import tenant_of
from watukuy.core.errors import ConfigError
from watukuy.core.poller import Partition
from watukuy.core.validation import kind
from watukuy.declarative.errors import RenderError
from watukuy.declarative.paths import MISSING, Path, parse_path
from watukuy.options.secrets import Written

__all__ = ["Placeholder", "Scope", "Template", "compile_template", "constant"]

_FORMATTER = string.Formatter()
_KNOWN = (
    "partition.key",
    "tenant.key",
    "partition.data.NAME",
    "cursor",
    "parent.key",
    "fanout.NAME",
    "cursor.start",
    "cursor.end",
)
_DATA = "partition.data."
_FANOUT = "fanout."
_PARENT = re.compile(r"(?:parent\.)+key")


@dataclass(frozen=True, slots=True)
class Placeholder:
    kind: Literal["key", "tenant", "data", "cursor", "window", "parent", "fanout"]
    path: Path | None = None  # for ``data``: the path into the partition's data
    level: int = 0  # for ``parent``: 1 is {parent.key}, 2 {parent.parent.key}...; ``fanout``
    name: str = ""  # ``fanout``: the entry's name (its value is ``parents[level - 1]``);
    # ``window``: ``start`` or ``end``

    @property
    def text(self) -> str:
        if self.kind == "data":
            assert self.path is not None
            return "{" + _DATA + self.path.text + "}"
        if self.kind == "parent":
            return "{" + "parent." * self.level + "key}"
        if self.kind == "tenant":
            return "{tenant.key}"
        if self.kind == "fanout":
            return "{fanout." + self.name + "}"
        if self.kind == "window":
            return "{cursor." + self.name + "}"
        return "{partition.key}" if self.kind == "key" else "{cursor}"


@dataclass(frozen=True, slots=True)
class Scope:
    """What placeholders render from: one partition and the cursor of this poll (and its
    time window's ends, written in the cursor's format)."""

    partition: Partition
    cursor: Any = None
    start: Any = None
    end: Any = None


@dataclass(frozen=True, slots=True)
class Template:
    """A compiled template: literal text and placeholders, in order."""

    text: str
    """As written in the config, after ``${env:...}`` resolution."""
    where: str
    """The config path of the field, for render errors."""
    parts: tuple[str | Placeholder, ...]
    shown: str = ""
    """What errors may show of it: as written, ``${...}`` references unresolved (their values
    are secrets); ``text`` when it held none."""

    def __post_init__(self) -> None:
        if not self.shown:
            object.__setattr__(self, "shown", self.text)

    @property
    def placeholders(self) -> tuple[Placeholder, ...]:
        return tuple(part for part in self.parts if isinstance(part, Placeholder))

    @property
    def single(self) -> Placeholder | None:
        """The placeholder, when the template is exactly one placeholder and nothing else."""
        if len(self.parts) == 1 and isinstance(self.parts[0], Placeholder):
            return self.parts[0]
        return None

    @property
    def is_constant(self) -> bool:
        return not self.placeholders

    def value(self, scope: Scope) -> Any:
        """The raw value of a single-placeholder template, else the rendered text."""
        single = self.single
        if single is None:
            return self.render(scope)
        return _lookup(single, scope, self.where)

    def render(self, scope: Scope) -> str | None:
        """The text; ``None`` when the template is one placeholder that renders nothing."""
        single = self.single
        if single is not None:
            found = _lookup(single, scope, self.where)
            return None if found is None else _text(found, single, self.where)
        out: list[str] = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
            else:
                found = _lookup(part, scope, self.where)
                out.append("" if found is None else _text(found, part, self.where))
        return "".join(out)


def constant(value: str, where: str) -> Template:
    """A template of literal text only (no parsing: braces are just characters)."""
    return Template(text=value, where=where, parts=(value,) if value else ())


def compile_template(
    text: object,
    where: str,
    *,
    partitioned: bool,
    cursor: bool,
    window: bool = False,
    allow_placeholders: bool = True,
    written: Written | None = None,
    parents: int = 0,
    fanout: tuple[str, ...] = (),
) -> Template:
    """Compile ``text``; ``partitioned``, ``cursor``, ``window`` (a timestamp cursor's
    ``{cursor.start}``/``{cursor.end}``), ``parents`` (a child stream's depth) and ``fanout``
    (a fan-out stream's names) say which names exist here.

    Numbers and booleans are accepted as their JSON text (``limit: 100``).
    ``allow_placeholders=False`` (a tenants listing, which has no partition or cursor) still
    reads ``{{``/``}}`` but refuses every placeholder. ``written``: how the config wrote
    ``text`` when it held ``${...}`` references; their values are literal text, never parsed
    for placeholders, and the template shows the references instead of the values.
    """
    if isinstance(text, bool):
        text = "true" if text else "false"
    elif isinstance(text, int | float):
        text = str(text)
    if not isinstance(text, str):
        raise ConfigError(f"must be a string, got {kind(text)}", where)
    if written is None or written.resolved != text:
        chunks: tuple[tuple[str, bool], ...] = ((text, False),)
        shown = text
    else:
        chunks, shown = written.pieces, written.raw
    parts: list[str | Placeholder] = []
    for chunk, secret in chunks:
        if secret:
            _append_literal(parts, chunk)
            continue
        names = _Names(partitioned, cursor, parents, fanout, window)
        _compile_chunk(chunk, where, parts, names, allow_placeholders)
    return Template(text=text, where=where, parts=tuple(parts), shown=shown)


def _append_literal(parts: list[str | Placeholder], literal: str) -> None:
    if not literal:
        return
    if parts and isinstance(parts[-1], str):
        parts[-1] += literal
    else:
        parts.append(literal)


def _compile_chunk(
    text: str,
    where: str,
    parts: list[str | Placeholder],
    names: _Names,
    allow_placeholders: bool,
) -> None:
    try:
        pieces = list(_FORMATTER.parse(text))
    except ValueError as exc:  # the stdlib's messages quote no part of the text
        raise ConfigError(
            f"bad template: {exc}; write {{{{ and }}}} for literal braces", where
        ) from None
    for literal, name, spec, conversion in pieces:
        _append_literal(parts, literal)
        if name is None:
            continue
        if spec or conversion:
            raise ConfigError(
                "placeholders take no format spec or conversion (':...', '!r'); "
                "nothing in a template is evaluated",
                where,
            )
        if not allow_placeholders:
            raise ConfigError(
                "no placeholders here: this request has no partition or cursor "
                "(write {{ and }} for literal braces)",
                where,
            )
        parts.append(_placeholder(name, where, names))


@dataclass(frozen=True, slots=True)
class _Names:
    """Which placeholders exist where a template is compiled."""

    partitioned: bool
    cursor: bool
    parents: int
    fanout: tuple[str, ...]
    window: bool = False


def _placeholder(name: str, where: str, names: _Names) -> Placeholder:
    partitioned, cursor, parents = names.partitioned, names.cursor, names.parents
    name = name.strip()
    if name.startswith(_FANOUT):
        wanted = name[len(_FANOUT) :]
        if wanted not in names.fanout:
            have = ", ".join(names.fanout) or "none: this stream has no fanout"
            raise ConfigError(f"{{{name}}}: no such fanout entry (names: {have})", where)
        level = len(names.fanout) - names.fanout.index(wanted)
        return Placeholder("fanout", level=level, name=wanted)
    if _PARENT.fullmatch(name):
        level = name.count("parent.")
        if level > parents:
            have = f"it has {parents} parent level(s)" if parents else "it has no parent"
            raise ConfigError(
                f"{{{name}}} needs a child stream {level} level(s) deep; {have}", where
            )
        return Placeholder("parent", level=level)
    if name in ("cursor.start", "cursor.end"):
        if not names.window:
            raise ConfigError(f"{{{name}}} needs a timestamp cursor (a time window)", where)
        return Placeholder("window", name=name.split(".")[1])
    if name == "cursor":
        if not cursor:
            raise ConfigError(
                "{cursor} is always empty with cursor: {none: true}; "
                "choose a token or timestamp cursor",
                where,
            )
        return Placeholder("cursor")
    if name == "partition.key":
        return Placeholder("key")
    if name == "tenant.key":
        return Placeholder("tenant")
    if name.startswith(_DATA):
        if not partitioned:
            raise ConfigError("{partition.data...} needs partitions: this poller has none", where)
        rest = name[len(_DATA) :]
        if not rest:
            raise ConfigError("name a data field: {partition.data.NAME}", where)
        path = parse_path(rest, where)
        return Placeholder("data", path)
    raise ConfigError(_unknown(name), where)


def _unknown(name: str) -> str:
    known = ", ".join("{" + n + "}" for n in _KNOWN)
    names = ["partition.key", "tenant.key", "partition.data", "cursor", "parent.key", "fanout"]
    close = difflib.get_close_matches(name, names, n=1)
    # Echo the name only when it is plainly a placeholder gone wrong: braces in a resolved
    # secret (${env:...}) also land here, and the secret must not reach the message.
    if close or name.startswith(("partition", "cursor", "parent", "tenant", "fanout")):
        return f"unknown placeholder {{{name}}}; known: {known}"
    return (
        f"unknown placeholder ({len(name)} character{'s' if len(name) != 1 else ''}); "
        f"known: {known}; "
        "write {{ and }} for literal braces"
    )


def _lookup(placeholder: Placeholder, scope: Scope, where: str) -> Any:
    if placeholder.kind == "cursor":
        return scope.cursor
    if placeholder.kind == "window":
        return scope.start if placeholder.name == "start" else scope.end
    if placeholder.kind == "key":
        return scope.partition.key
    if placeholder.kind == "tenant":
        return tenant_of(scope.partition)
    if placeholder.kind in ("parent", "fanout"):
        ancestors = scope.partition.parents
        if placeholder.level > len(ancestors):
            raise RenderError(f"{where}: the partition has no {placeholder.text}")
        return ancestors[placeholder.level - 1]
    assert placeholder.path is not None
    data = scope.partition.data
    found = placeholder.path.find(data) if isinstance(data, Mapping | list) else MISSING
    if found is MISSING:
        raise RenderError(
            f"{where}: the partition's data has no {placeholder.path.text!r} "
            f"(for {placeholder.text})"
        )
    return found


def _text(value: Any, placeholder: Placeholder, where: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    what = "a mapping" if isinstance(value, Mapping) else f"a {type(value).__name__}"
    raise RenderError(f"{where}: {placeholder.text} is {what}, not text")
