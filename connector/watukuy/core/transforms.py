"""``transform: {filter, select, drop, rename, mask, set}``: what is published of a vendor's item.

Compiled once (:func:`compile_transform`), applied per item (:meth:`Transform.apply`) between
the vendor's items and change detection, for declarative and Python pollers alike (DESIGN.md,
"Transforms"). The steps run in the order filter, select, drop, rename, mask, set, whatever
order they are written in, because a reader of the config should not have to know the
mapping's order to know the result:

- ``filter``: a :mod:`~watukuy.core.filters` filter; an item that does not match is not
  published (:meth:`Transform.apply` returns ``None``).
- ``select: [paths]`` keeps only those paths, each where it is nested.
- ``drop: [paths]`` removes them.
- ``rename: {source: target}`` moves a value; the target names the published item.
- ``mask: {path: {hmac: KEY}}`` replaces the value by the lowercase hex HMAC-SHA256 of its
  text (a value that is not a string: its compact JSON text) under KEY; ``{redact: TEXT}``
  replaces it by TEXT. Its path is the vendor's (a renamed path is masked where it went).
- ``set: {key: value}``: a literal, or a template over ``{partition.key}``, ``{parent.key}``
  (``{parent.parent.key}``...) and ``{item.PATH}`` (the vendor's item). ``{partition.data...}``
  is refused: partition data is never published.

The vendor's item is never modified (identity, version and the cursor read it afterwards): a
nested mapping is copied only when a step writes into it. The HMAC key is held by a private
object whose ``repr`` hides it, and no error message shows it.
"""

from __future__ import annotations

import copy
import hashlib
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from watukuy.core.errors import ConfigError
from watukuy.core.events import canonical_json
from watukuy.core.filters import MISSING, Filter, compile_filter, parse_item_path
from watukuy.core.paths import KeyPath, parse_key_path
from watukuy.core.transformprint import transform_fingerprint
from watukuy.core.validation import check_keys, kind

__all__ = ["STEPS", "Transform", "TransformContext", "compile_transform"]

STEPS = ("filter", "select", "drop", "rename", "mask", "set")
"""The steps, in the order they run."""

_FORMATTER = string.Formatter()
_BLOCK = 64  # SHA-256's block size, which HMAC pads its key to
_PLACEHOLDERS = "{partition.key}, {parent.key}, {parent.parent.key}..., {item.PATH}"


@dataclass(frozen=True, slots=True)
class TransformContext:
    """What ``set`` templates may read besides the item: the partition's key and its
    ancestors' keys, nearest first (``parents[0]`` is ``{parent.key}``)."""

    partition: str
    parents: tuple[str, ...] = ()


Value = Callable[[Mapping[str, Any], TransformContext], Any]
"""A ``set`` value: from the vendor's item and the context."""


class _Hmac:
    """A masking function holding its key; the key never appears in a repr or a message."""

    __slots__ = ("_inner", "_outer")

    def __init__(self, key: bytes) -> None:
        # RFC 2104 by hand over hashlib: the padded key's two hash states are computed once
        # and copied per value, which costs a third of ``hmac.HMAC.copy()`` (a Python-level
        # object) and keeps masking inside the per-event CPU budget of issue 23.
        if len(key) > _BLOCK:
            key = hashlib.sha256(key).digest()
        padded = key.ljust(_BLOCK, b"\0")
        self._inner = hashlib.sha256(bytes(byte ^ 0x36 for byte in padded))
        self._outer = hashlib.sha256(bytes(byte ^ 0x5C for byte in padded))

    def __call__(self, value: Any) -> str:
        text = value if type(value) is str else canonical_json(value)
        inner = self._inner.copy()
        inner.update(text.encode())
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.hexdigest()

    def __repr__(self) -> str:
        return "hmac(<key hidden>)"


@dataclass(frozen=True, slots=True)
class Transform:
    """A compiled transform. Build it with :func:`compile_transform`."""

    filter: Filter | None
    select: tuple[KeyPath, ...]
    drop: tuple[KeyPath, ...]
    rename: tuple[tuple[KeyPath, KeyPath], ...]
    mask: tuple[tuple[KeyPath, Callable[[Any], Any]], ...]
    set: tuple[tuple[KeyPath, Value], ...]
    parents: int = 0
    """How many ancestors' keys the partition key ends with (a child stream's depth)."""
    fingerprint: str | None = None
    """Of the spec, keys left out (:mod:`watukuy.core.transformprint`): ``validate`` compares
    it with the last publishing run's."""
    _top: _TopLevel | None = field(default=None, init=False, repr=False, compare=False)
    """The same steps by key, when every path is one key deep (see :class:`_TopLevel`)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "_top", _TopLevel.of(self))

    def context(self, partition: str) -> TransformContext:
        """The context of a partition: its ancestors' keys are the last ``parents`` segments
        of its key (``acme/P1/I7``: ``I7``, then ``P1``)."""
        if not self.parents:
            return TransformContext(partition)
        segments = partition.rsplit("/", self.parents)[1:]
        return TransformContext(partition, tuple(reversed(segments)))

    def apply(self, item: Any, context: TransformContext) -> Any:
        """The published item, or ``None`` when ``filter`` leaves it out. ``ValueError`` when
        the item cannot be transformed (it is parked ``invalid`` with that message)."""
        return self.reshape(item, context) if self.matches(item) else None

    def matches(self, item: Any) -> bool:
        """Whether ``filter`` lets the item through."""
        return self.filter is None or self.filter(item)

    def reshape(self, item: Any, context: TransformContext) -> Any:
        """Every step but ``filter``; see :meth:`apply`."""
        top = self._top
        if top is not None and type(item) is dict:  # the usual case, with the fewest checks
            return top.reshape(item, context)
        if not (self.select or self.drop or self.rename or self.mask or self.set):
            return item
        if not isinstance(item, Mapping):
            raise ValueError(f"transform: the item must be a JSON object, got {kind(item)}")
        if top is not None:
            return top.reshape(item, context)
        fresh: set[int] = set()  # ids of the mappings this call made: safe to write into
        out = _selected(item, self.select, fresh) if self.select else _copy(item, fresh)
        for path in self.drop:
            parent = _container(out, path, fresh, create=False)
            if parent is not None:
                parent.pop(path.steps[-1], None)
        for source, target in self.rename:
            parent = _container(out, source, fresh, create=False)
            if parent is not None and source.steps[-1] in parent:
                _put(out, target, parent.pop(source.steps[-1]), fresh)
        for path, masked in self.mask:
            parent = _container(out, path, fresh, create=False)
            if parent is not None and path.steps[-1] in parent:
                parent[path.steps[-1]] = masked(parent[path.steps[-1]])
        for path, value in self.set:
            _put(out, path, value(item, context), fresh)
        return out

    def __repr__(self) -> str:
        steps = [name for name in STEPS if getattr(self, name)]
        return f"Transform({', '.join(steps) or 'identity'})"


@dataclass(frozen=True, slots=True)
class _TopLevel:
    """:meth:`Transform.reshape` when every path is a top-level key, as most are (``drop:
    [internal_note]``, ``mask: {email: ...}``). The output is one shallow copy of the item
    that no step has to walk into, so each step is a dict operation on a key: no path
    walking and no bookkeeping of which mappings were copied. Issue 23 bounds a transform's
    cost at 20% of a plain stream's CPU per event, and the general path spends most of its
    time on that bookkeeping."""

    select: tuple[str, ...]
    drop: tuple[str, ...]
    rename: tuple[tuple[str, str], ...]
    mask: tuple[tuple[str, Callable[[Any], Any]], ...]
    set: tuple[tuple[str, Value], ...]

    @classmethod
    def of(cls, transform: Transform) -> _TopLevel | None:
        paths = [
            *transform.select,
            *transform.drop,
            *(path for pair in transform.rename for path in pair),
            *(path for path, _ in transform.mask),
            *(path for path, _ in transform.set),
        ]
        if not paths or any(len(path.steps) != 1 for path in paths):
            return None  # no step (the item is published as it is), or a nested path
        return cls(
            tuple(path.steps[0] for path in transform.select),
            tuple(path.steps[0] for path in transform.drop),
            tuple((source.steps[0], target.steps[0]) for source, target in transform.rename),
            tuple((path.steps[0], masked) for path, masked in transform.mask),
            tuple((path.steps[0], value) for path, value in transform.set),
        )

    def reshape(self, item: Mapping[str, Any], context: TransformContext) -> dict[str, Any]:
        select = self.select
        out = {key: item[key] for key in select if key in item} if select else dict(item)
        for key in self.drop:
            out.pop(key, None)
        for source, target in self.rename:
            if source in out:
                out[target] = out.pop(source)
        for key, masked in self.mask:
            if key in out:
                out[key] = masked(out[key])
        for key, value in self.set:
            out[key] = value(item, context)
        return out


def _copy(value: Mapping[str, Any], fresh: set[int]) -> dict[str, Any]:
    out = dict(value)
    fresh.add(id(out))
    return out


def _selected(
    item: Mapping[str, Any], paths: tuple[KeyPath, ...], fresh: set[int]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    fresh.add(id(out))
    for path in paths:
        found = path.find(item)
        if found is not MISSING:
            _put(out, path, found, fresh)
    return out


def _container(
    out: dict[str, Any], path: KeyPath, fresh: set[int], *, create: bool
) -> dict[str, Any] | None:
    """The mapping that holds the last step of ``path`` in ``out``, copied first when it is
    the vendor's; ``None`` when there is none (and ``create`` is false)."""
    if len(path.steps) == 1:  # the usual top-level key: ``out`` is this call's own copy
        return out
    current = out
    for step in path.steps[:-1]:
        child = current.get(step, MISSING)
        if child is MISSING and create:
            child = {}
            fresh.add(id(child))
        elif not isinstance(child, Mapping):
            if not create:
                return None
            raise ValueError(f"transform: cannot write {path.text!r}: {step!r} is not an object")
        elif id(child) not in fresh:
            child = _copy(child, fresh)
        current[step] = child
        current = child
    return current


def _put(out: dict[str, Any], path: KeyPath, value: Any, fresh: set[int]) -> None:
    parent = _container(out, path, fresh, create=True)
    assert parent is not None  # create=True makes the way or raises
    parent[path.steps[-1]] = value


def compile_transform(
    spec: object,
    where: str,
    *,
    parents: int = 0,
    schema: object = None,
    secret_at: Callable[[str], bool] | None = None,
) -> Transform:
    """Check and compile ``spec``; a ``ConfigError`` names the bad field under ``where``.

    ``parents`` is the stream's depth (``{parent.key}`` needs one); ``schema`` the poller's
    Avro data schema in its JSON form (a ``rename`` target must be one of its fields);
    ``secret_at(path)`` says whether the config string at ``path`` came from a ``${...}``
    reference (declarative pollers: an HMAC key must). Without ``secret_at`` (the Python API)
    the key is taken as given and an unresolved ``${...}`` is refused.
    """
    if not isinstance(spec, Mapping):
        raise ConfigError(f"must be a mapping with keys among {', '.join(STEPS)}", where)
    check_keys(spec, STEPS, where)
    rename = _renames(spec.get("rename"), f"{where}.rename", schema)
    return Transform(
        filter=None
        if spec.get("filter") is None
        else compile_filter(spec["filter"], f"{where}.filter"),
        select=_paths(spec.get("select"), f"{where}.select"),
        drop=_paths(spec.get("drop"), f"{where}.drop"),
        rename=rename,
        mask=_masks(spec.get("mask"), f"{where}.mask", rename, secret_at),
        set=_sets(spec.get("set"), f"{where}.set", parents),
        parents=parents,
        fingerprint=transform_fingerprint(spec),
    )


def _mapping(raw: object, where: str) -> Mapping[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"must be a mapping, got {kind(raw)}", where)
    return raw


def _paths(raw: object, where: str) -> tuple[KeyPath, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ConfigError(f"must be a list of paths, got {kind(raw)}", where)
    return tuple(parse_key_path(text, f"{where}[{index}]") for index, text in enumerate(raw))


def _renames(raw: object, where: str, schema: object) -> tuple[tuple[KeyPath, KeyPath], ...]:
    out = []
    for source, target in _mapping(raw, where).items():
        at = f"{where}.{source}"
        source_path = parse_key_path(source, at)
        target_path = parse_key_path(target, at)
        if not _schema_has(schema, target_path.steps):
            raise ConfigError(
                f"the target {target_path.text!r} is not a field of the data schema", at
            )
        out.append((source_path, target_path))
    return tuple(out)


def _schema_has(schema: object, steps: tuple[str, ...]) -> bool:
    """Whether an Avro record (JSON form) has the nested field ``steps``. No schema, or a
    type this cannot see into (a named reference), is given the benefit of the doubt."""
    current = schema
    for step in steps:
        record = _record_of(current)
        if record is None:
            return True
        fields = record.get("fields")
        if not isinstance(fields, list):
            return True
        found = [f for f in fields if isinstance(f, Mapping) and f.get("name") == step]
        if not found:
            return False
        current = found[0].get("type")
    return True


def _record_of(schema: object) -> Mapping[str, Any] | None:
    if isinstance(schema, Mapping) and schema.get("type") == "record":
        return schema
    if isinstance(schema, list):  # a union: its record branch, if it has one
        records = [branch for branch in schema if _record_of(branch) is not None]
        return _record_of(records[0]) if records else None
    return None


def _masks(
    raw: object,
    where: str,
    rename: tuple[tuple[KeyPath, KeyPath], ...],
    secret_at: Callable[[str], bool] | None,
) -> tuple[tuple[KeyPath, Callable[[Any], Any]], ...]:
    out = []
    for text, how in _mapping(raw, where).items():
        at = f"{where}.{text}"
        path = _after_rename(parse_key_path(text, at), rename)
        given = _mapping(how, at)
        check_keys(given, ("hmac", "redact"), at)
        if len(given) != 1:
            raise ConfigError("set exactly one of: hmac, redact", at)
        if "redact" in given:
            replacement = given["redact"]
            if not isinstance(replacement, str):
                raise ConfigError(f"must be a string, got {kind(replacement)}", f"{at}.redact")
            out.append((path, _constant(replacement)))
        else:
            out.append((path, _Hmac(_hmac_key(given["hmac"], f"{at}.hmac", secret_at))))
    return tuple(out)


def _constant(value: str) -> Callable[[Any], Any]:
    return lambda _value: value


def _hmac_key(raw: object, at: str, secret_at: Callable[[str], bool] | None) -> bytes:
    # The messages below describe the key, never repeat it.
    if isinstance(raw, bytes) and secret_at is None and raw:
        return raw
    if not isinstance(raw, str) or not raw:
        raise ConfigError(f"must be a non-empty key, got {kind(raw)}", at)
    if secret_at is not None and not secret_at(at):
        raise ConfigError(
            "the HMAC key must be a secret reference (${env:NAME} or ${file:PATH}), "
            "not written in the config",
            at,
        )
    if secret_at is None and raw.startswith("${") and raw.endswith("}"):
        raise ConfigError(
            "an unresolved secret reference: the Python API takes the key itself "
            "(read it from the environment or a file)",
            at,
        )
    return raw.encode()


def _after_rename(path: KeyPath, rename: tuple[tuple[KeyPath, KeyPath], ...]) -> KeyPath:
    """A vendor path as it is after ``rename`` (mask runs after it but names vendor paths)."""
    for source, target in rename:
        if path.steps[: len(source.steps)] == source.steps:
            steps = target.steps + path.steps[len(source.steps) :]
            return KeyPath(".".join(steps), steps)
    return path


def _sets(raw: object, where: str, parents: int) -> tuple[tuple[KeyPath, Value], ...]:
    return tuple(
        (
            parse_key_path(key, f"{where}.{key}"),
            _value(value, f"{where}.{key}", parents),
        )
        for key, value in _mapping(raw, where).items()
    )


def _value(raw: object, where: str, parents: int) -> Value:
    if not isinstance(raw, str):
        if isinstance(raw, Mapping | list):  # each event gets its own copy to keep
            return lambda _item, _context: copy.deepcopy(raw)
        return lambda _item, _context: raw
    pieces = _template(raw, where, parents)
    if len(pieces) == 1 and not isinstance(pieces[0], str):
        return pieces[0]  # exactly one placeholder: the value keeps its own type
    if all(isinstance(piece, str) for piece in pieces):
        text = "".join(piece for piece in pieces if isinstance(piece, str))
        return lambda _item, _context: text

    def render(item: Mapping[str, Any], context: TransformContext) -> str:
        return "".join(
            piece if isinstance(piece, str) else _text(piece(item, context)) for piece in pieces
        )

    return render


def _text(value: Any) -> str:
    if value is None or value is MISSING:
        return ""
    return value if isinstance(value, str) else canonical_json(value)


def _template(raw: str, where: str, parents: int) -> list[str | Value]:
    try:
        parsed = list(_FORMATTER.parse(raw))
    except ValueError as exc:
        raise ConfigError(
            f"invalid template: {exc} (write {{{{ and }}}} for braces)", where
        ) from None
    pieces: list[str | Value] = []
    for literal, name, spec, conversion in parsed:
        if literal:
            pieces.append(literal)
        if name is None:
            continue
        if spec or conversion:
            raise ConfigError(f"{{{name}}}: no format specs or conversions in templates", where)
        pieces.append(_placeholder(name, where, parents))
    return pieces


def _placeholder(name: str, where: str, parents: int) -> Value:
    if name == "partition.key":
        return lambda _item, context: context.partition
    if name == "partition.data" or name.startswith("partition.data."):
        raise ConfigError(
            f"{{{name}}}: partition data is never published; set reads {_PLACEHOLDERS}", where
        )
    if name.startswith("item."):
        path = parse_item_path(name[len("item.") :], where)

        def at_path(item: Mapping[str, Any], _context: TransformContext) -> Any:
            found = path.find(item)
            return None if found is MISSING else found

        return at_path
    depth = _parent_depth(name)
    if depth is not None:
        if depth > parents:
            have = f"only {parents} ancestor(s)" if parents else "no parent"
            raise ConfigError(f"{{{name}}}: this stream has {have}", where)
        return lambda _item, context: context.parents[depth - 1]
    raise ConfigError(f"unknown placeholder {{{name}}}; known: {_PLACEHOLDERS}", where)


def _parent_depth(name: str) -> int | None:
    """``parent.key`` -> 1, ``parent.parent.key`` -> 2; anything else -> None."""
    parts = name.split(".")
    if len(parts) < 2 or parts[-1] != "key" or any(part != "parent" for part in parts[:-1]):
        return None
    return len(parts) - 1
