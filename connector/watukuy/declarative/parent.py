"""``parent:`` of a stream: a child stream, one partition per item of another stream of the same
connector (CONTRACT.md, "Several streams, child streams and transforms")::

    - name: issues
      parent: {stream: projects, key: id, where: {path: archived, equals: false}}
      request: {path: "/projects/{parent.key}/issues"}

``stream`` names a stream of the same connector (itself a child or not); ``key`` is a path in
the parent's item (what ``{parent.key}`` renders); ``where`` an optional filter of the same form
as ``transform.filter``; ``poll`` is ``schedule`` (the default: each child key on its own timer)
or ``on_change`` (polled when its parent item is created or updated, never on a timer:
:mod:`watukuy.core.onchange`). Compiled to a :class:`~watukuy.core.poller.ParentSpec` on the
stream's poller; the engine does the rest (:mod:`watukuy.engine.children`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from watukuy.core.errors import ConfigError
from watukuy.core.filters import compile_filter
from watukuy.core.poller import ParentSpec, check_parent_poll
from watukuy.core.validation import check_keys, kind
from watukuy.declarative.paths import MISSING, Path, parse_path

__all__ = ["check_deletion_keys", "compile_parent", "depths"]

_KEYS = ("stream", "key", "where", "poll")


def _parent_stream(stream: Mapping[str, Any], at: str, names: Mapping[str, int]) -> str | None:
    raw = stream.get("parent")
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ConfigError(f"must be a mapping {{stream, key, where, poll}}, got {kind(raw)}", at)
    check_keys(raw, _KEYS, at)
    check_parent_poll(raw.get("poll", "schedule"), f"{at}.poll")
    name = raw.get("stream")
    if name not in names:
        known = ", ".join(names)
        raise ConfigError(
            f"must name a stream of this connector ({known}), got {name!r}", f"{at}.stream"
        )
    return str(name)


def depths(streams: list[Mapping[str, Any]], names: Mapping[str, int], where: str) -> list[int]:
    """How many parents each stream has (0: not a child); a ``ConfigError`` at the ``parent``
    of a stream whose ancestry is unknown or loops."""
    parents = [
        _parent_stream(s, f"{where}.streams[{i}].parent", names) for i, s in enumerate(streams)
    ]
    out = []
    for index, first in enumerate(parents):
        seen, depth, current = [index], 0, first
        while current is not None:
            depth += 1
            at = names[current]
            if at in seen:
                chain = " -> ".join(str(streams[i]["name"]) for i in [*seen, at])
                raise ConfigError(f"parents loop: {chain}", f"{where}.streams[{index}].parent")
            seen.append(at)
            current = parents[at]
        out.append(depth)
    return out


class _KeyAt:
    """The parent item's key at a path; ``ValueError`` naming the path (never the item)."""

    __slots__ = ("path",)

    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self, item: Any) -> Any:
        found = self.path.find(item)
        if found is MISSING or found is None:
            raise ValueError(f"no value at parent key path {self.path.text!r}")
        return found


def compile_parent(stream: Mapping[str, Any], at: str, connector: str) -> ParentSpec | None:
    """The stream's :class:`ParentSpec` (``None``: not a child); :func:`depths` checked the
    shape and the stream named."""
    raw = stream.get("parent")
    if raw is None:
        return None
    key = parse_path(raw.get("key"), f"{at}.key")
    where = raw.get("where")
    keep = None if where is None else compile_filter(where, f"{at}.where")
    poll = check_parent_poll(raw.get("poll", "schedule"), f"{at}.poll")
    return ParentSpec(f"{connector}.{raw['stream']}", _KeyAt(key), keep, poll)


def check_deletion_keys(merged: Mapping[str, Mapping[str, Any]], where: str) -> None:
    """A ``ConfigError`` at a child's ``parent.key`` when it is not its parent's identity path
    while the parent can publish a deletion without its item: one found by a ``reconcile``,
    or an item leaving ``transform.filter``. Such a deletion carries only the identity, so the
    child to pause is found by it; another key would leave the child polling a deleted parent.

    ``merged``: each stream (``defaults`` merged in) by name, in the order written."""
    for index, (name, stream) in enumerate(merged.items()):
        raw = stream.get("parent")
        if not isinstance(raw, Mapping):
            continue
        parent = merged[raw["stream"]]
        transform = parent.get("transform")
        filtered = isinstance(transform, Mapping) and transform.get("filter") is not None
        why = "reconciles" if parent.get("reconcile") is not None else "filters" if filtered else ""
        if not why:
            continue
        at = f"{where}.streams[{index}].parent.key"
        identity = parse_path(parent.get("identity"), f"{where}.streams[{index}].identity")
        if parse_path(raw.get("key"), at).steps != identity.steps:
            raise ConfigError(
                f"must be the identity path of stream '{raw['stream']}' ({identity.text!r}) "
                f"since it {why}: a deletion it finds carries only the item's identity, which "
                f"is how stream '{name}' finds the child partition to pause",
                at,
            )
