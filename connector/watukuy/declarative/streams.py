"""A connector entry with ``streams:``: several endpoints of one vendor, each its own poller
``<connector>.<stream>``, sharing the tenants (CONTRACT.md, "Several streams")::

    - name: tracker
      partitions: {http: {...}, refresh: 5m}       # listed once per refresh for every stream
      defaults:                                    # deep-merged into each stream
        request: {base: "https://api.example.com/{partition.data.slug}"}
        budget: tracker
      streams:
        - {name: projects, request: {path: /projects}, records: data, identity: id}
        - {name: users, request: {path: /users}, records: data, identity: id}

:func:`compile_connector_entry` is the one entry point for a ``pollers:`` entry and a REST
connector's config alike: without ``streams`` it is :func:`compile_poller`'s one poller.

Merging: a mapping in ``defaults`` is merged key by key with the stream's, the stream's value
winning; a list or a scalar is replaced whole. Two exceptions, so that a stream can choose
differently without inheriting a contradiction: a mapping of alternatives (``auth``,
``paginate``, ``cursor``) set by the stream replaces the default one whole, and a stream's
``request.url`` replaces the default ``request.base`` and ``request.path``. Unknown keys are
refused where they are written (``pollers[0].defaults.schedule.mni``,
``pollers[0].streams[1].request.pth``); a bad value is reported at the stream when the stream
wrote it, at ``defaults`` when it came from there.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from watukuy.core.errors import ConfigError
from watukuy.core.keys import POLLER_NAME
from watukuy.core.poller import Poller, StreamOf
from watukuy.core.validation import check_keys, kind, message_of
from watukuy.declarative.compiler import compile_poller, compile_stream
from watukuy.declarative.parent import check_deletion_keys, compile_parent, depths
from watukuy.declarative.shared import Shared, SharedListing
from watukuy.declarative.sources import parse_partitions
from watukuy.declarative.webhooks import attach_stream_webhooks, attach_webhook
from watukuy.http import Transport
from watukuy.options.declarative import CONNECTOR_ONLY, ENTRY_ONLY, children, key_doc
from watukuy.options.secrets import Written

__all__ = ["STREAM_NAME", "compile_connector_entry", "template_warnings"]

STREAM_NAME = re.compile(r"[A-Za-z0-9_-]+")
"""A stream's name has no dot, so ``<connector>.<stream>`` splits at its last dot."""

_CONNECTOR_KEYS = ("name", "partitions", *CONNECTOR_ONLY, *ENTRY_ONLY)


def compile_connector_entry(
    entry: Mapping[str, Any],
    *,
    where: str,
    base_dir: Path,
    written: Mapping[str, Written] | None = None,
    transport: Transport | None = None,
) -> list[Poller]:
    """The pollers of one connector entry, in the order of its streams; an entry without
    ``streams`` is one poller. A ``ConfigError`` names the first bad field's path under
    ``where`` (``pollers[0]``, or ``config`` for a REST connector)."""
    if not isinstance(entry, Mapping):
        raise ConfigError(f"must be a mapping, got {kind(entry)}", where)
    written = written or {}
    if "streams" not in entry:
        return [
            compile_poller(
                entry, where=where, base_dir=base_dir, transport=transport, written=written
            )
        ]
    check_keys(entry, _CONNECTOR_KEYS, where)
    connector = entry.get("name")
    if not isinstance(connector, str) or POLLER_NAME.fullmatch(connector) is None:
        raise ConfigError(f"must match [A-Za-z0-9._-]+, got {connector!r}", f"{where}.name")
    defaults = entry.get("defaults", {})
    _check_stream_keys(defaults, f"{where}.defaults", stream=False)
    streams = entry["streams"]
    if not isinstance(streams, list) or not streams:
        raise ConfigError(f"must be a non-empty list of streams, got {kind(streams)}", where)
    shared = _shared(connector, entry.get("partitions"), where, base_dir, transport, written)
    seen: dict[str, int] = {}
    for index, stream in enumerate(streams):
        seen[_stream_name(stream, f"{where}.streams[{index}]", seen)] = index
    levels = depths(streams, seen, where)  # a child may name a stream written after it
    _no_fanout_parents(streams, seen, defaults, where)
    pollers = [
        _compile_one(
            streams[i],
            defaults,
            (name, f"{where}.streams[{i}]", levels[i]),
            where,
            base_dir,
            written,
            shared,
        )
        for name, i in seen.items()
    ]
    check_deletion_keys({n: merge(defaults, streams[i], "") for n, i in seen.items()}, where)
    pollers = attach_webhook(pollers, entry, where)
    own = {name: (streams[i], f"{where}.streams[{i}]") for name, i in seen.items()}
    return attach_stream_webhooks(pollers, own, partitioned=entry.get("partitions") is not None)


def _no_fanout_parents(
    streams: list[Any], seen: Mapping[str, int], defaults: Mapping[str, Any], where: str
) -> None:
    """A fan-out stream is no parent (yet): its children's keys would need its values."""
    for index, stream in enumerate(streams):
        parent = stream.get("parent") if isinstance(stream, Mapping) else None
        name = parent.get("stream") if isinstance(parent, Mapping) else None
        if not isinstance(name, str) or name not in seen:
            continue  # compile_parent says what is wrong with it
        if merge(defaults, streams[seen[name]], "").get("fanout") is not None:
            raise ConfigError(
                f"stream {name!r} fans out: a fan-out stream cannot be a parent",
                f"{where}.streams[{index}].parent.stream",
            )


def template_warnings(entry: object, where: str) -> list[str]:
    """``validate``'s warnings about a connector entry: a request value in ``defaults`` that
    uses ``{partition.key}`` and is inherited by a child stream, where that is the whole key
    (``acme/P1``) and not the tenant's, so the child's requests go astray (a 404 each)."""
    if not isinstance(entry, Mapping) or not isinstance(entry.get("streams"), list):
        return []
    defaults = entry.get("defaults")
    if not isinstance(defaults, Mapping):
        return []
    request = defaults.get("request")
    using = [path for path, text in _strings(request, "request") if "partition.key" in _names(text)]
    out = []
    for path in using:
        children = [
            str(stream.get("name"))
            for stream in entry["streams"]
            if isinstance(stream, Mapping)
            and "parent" in stream
            and _inherits(merge(defaults, stream, ""), defaults, path)
        ]
        if children:
            out.append(
                f"warning: {where}.defaults.{path} uses {{partition.key}}, which in child "
                f"stream(s) {', '.join(children)} is the whole key (tenant/parent...), not the "
                "tenant's: write {tenant.key} for the tenant's own key"
            )
    return out


def _strings(value: object, path: str) -> list[tuple[str, str]]:
    if isinstance(value, str):
        return [(path, value)]
    if isinstance(value, Mapping):
        return [pair for k, v in value.items() for pair in _strings(v, f"{path}.{k}")]
    return []


def _names(text: str) -> set[str]:
    try:
        return {name.strip() for _, name, _, _ in string.Formatter().parse(text) if name}
    except ValueError:  # a bad template: compiling says so
        return set()


def _inherits(merged: Mapping[str, Any], defaults: Mapping[str, Any], path: str) -> bool:
    """Whether ``merged`` (a stream) still has the default's value at dotted ``path``."""
    mine: Any = merged
    theirs: Any = defaults
    for step in path.split("."):
        mine = mine.get(step) if isinstance(mine, Mapping) else None
        theirs = theirs.get(step) if isinstance(theirs, Mapping) else None
    return mine is not None and mine == theirs


def _shared(
    connector: str,
    partitions: object,
    where: str,
    base_dir: Path,
    transport: Transport | None,
    written: Mapping[str, Written],
) -> Shared:
    if partitions is None:
        return Shared(connector, None, None)
    source, refresh = parse_partitions(
        partitions,
        where=f"{where}.partitions",
        base_dir=base_dir,
        transport=transport,
        written=written,
    )
    listing = None if source is None else SharedListing(source, refresh)
    return Shared(connector, listing, refresh)


def _stream_name(stream: object, at: str, seen: Mapping[str, int]) -> str:
    if not isinstance(stream, Mapping):
        raise ConfigError(f"must be a mapping with a name, got {kind(stream)}", at)
    _check_stream_keys(stream, at, stream=True)
    name = stream.get("name")
    if not isinstance(name, str) or STREAM_NAME.fullmatch(name) is None:
        raise ConfigError(f"must match [A-Za-z0-9_-]+ (no dot), got {name!r}", f"{at}.name")
    if name in seen:
        raise ConfigError(f"duplicate stream name {name!r} (also streams[{seen[name]}])", at)
    return name


def _compile_one(
    stream: Mapping[str, Any],
    defaults: Mapping[str, Any],
    named: tuple[str, str, int],
    where: str,
    base_dir: Path,
    written: Mapping[str, Written],
    shared: Shared,
) -> Poller:
    name, at, parents = named  # parents: how deep a child stream it is (0: none)
    of = StreamOf(shared.connector, name)
    own = {key: value for key, value in stream.items() if key not in ENTRY_ONLY}
    merged = merge(defaults, own, "")
    merged["name"] = of.poller
    from_defaults = f"{where}.defaults"
    try:
        return compile_stream(
            merged,
            where=at,
            base_dir=base_dir,
            written=_written_for(written, from_defaults, at),
            shared=shared,
            stream_of=of,
            parents=parents,
            parent=compile_parent(stream, f"{at}.parent", shared.connector),
        )
    except ConfigError as exc:
        raise _blamed(exc, stream, defaults, at, from_defaults) from None


# -- keys -----------------------------------------------------------------------------------


def _check_stream_keys(given: object, where: str, *, stream: bool) -> None:
    """Unknown keys of a stream entry or of ``defaults``, at any depth the key table lists."""
    if not isinstance(given, Mapping):
        raise ConfigError(f"must be a mapping, got {kind(given)}", where)
    known = [k for k in children("") if k not in (*CONNECTOR_ONLY, *ENTRY_ONLY, "partitions")]
    if not stream:  # a parent in defaults would make every stream (the parent too) a child
        known.remove("name")
        known.remove("parent")
    else:  # a stream's own webhook wakes that stream (one in defaults would clash by path)
        known.extend(ENTRY_ONLY)
    check_keys(given, known, where)
    for key, value in given.items():
        _check_nested(value, key, f"{where}.{key}")


def _check_nested(value: object, path: str, where: str) -> None:
    known = children(path)
    if not known or not isinstance(value, Mapping):
        return  # free-form (query, headers) or not a mapping: the compiler judges the value
    check_keys(value, known, where)
    for key, below in value.items():
        _check_nested(below, f"{path}.{key}", f"{where}.{key}")


# -- merging --------------------------------------------------------------------------------


def merge(defaults: Mapping[str, Any], own: Mapping[str, Any], path: str) -> dict[str, Any]:
    """``own`` over ``defaults`` (see the module's docstring); neither is changed."""
    out = dict(defaults)
    if path == "request" and "url" in own:
        out.pop("base", None)
        out.pop("path", None)
    for key, value in own.items():
        at = f"{path}.{key}" if path else str(key)
        below = out.get(key)
        if isinstance(value, Mapping) and isinstance(below, Mapping) and not _alternatives(at):
            out[key] = merge(below, value, at)
        else:
            out[key] = value
    return out


def _alternatives(path: str) -> bool:
    try:
        return key_doc(path).one_of
    except KeyError:
        return False  # under a free-form mapping


def _written_for(written: Mapping[str, Written], from_defaults: str, at: str) -> dict[str, Written]:
    """The ``${...}`` strings by the path the stream's compiler asks for: a default's under the
    stream's path (a template takes it only if the merged value is that very string)."""
    out = dict(written)
    prefix = f"{from_defaults}."
    for path, value in written.items():
        if path.startswith(prefix):
            out.setdefault(f"{at}.{path[len(prefix) :]}", value)
    return out


def _blamed(
    exc: ConfigError,
    stream: Mapping[str, Any],
    defaults: Mapping[str, Any],
    at: str,
    from_defaults: str,
) -> ConfigError:
    """``exc`` re-pathed to ``defaults`` when the value it names came from there."""
    path = exc.path or ""
    if not path.startswith(f"{at}."):
        return exc
    suffix = path[len(at) + 1 :]
    if _depth(defaults, suffix) <= _depth(stream, suffix):
        return exc
    return ConfigError(message_of(exc), f"{from_defaults}.{suffix}")


def _depth(given: Mapping[str, Any], suffix: str) -> int:
    """How many leading segments of ``suffix`` (``request.auth.bearer``) ``given`` holds."""
    depth = 0
    node: Any = given
    for segment in re.split(r"\.|(?=\[)", suffix):
        if not isinstance(node, Mapping) or segment not in node:
            break
        node = node[segment]
        depth += 1
    return depth
