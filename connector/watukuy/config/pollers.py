"""``pollers:`` and ``python_path``: a Python poller (``python: module:attr``) is imported, a
declarative one (``name: ...``) compiled by :mod:`watukuy.declarative`."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from watukuy.core.errors import ConfigError
from watukuy.core.poller import Poller
from watukuy.core.validation import check_keys, kind
from watukuy.core.webhookset import webhook_of
from watukuy.declarative import compile_connector_entry
from watukuy.options.imports import REFERENCE, import_object
from watukuy.options.secrets import Secrets

PollerSource = str | Mapping[str, Any]
"""Where a poller came from: ``module:attr`` for a Python poller, the entry for a declarative
one (as resolved; ``describe()`` redacts its secret paths). Each stream of a connector with
``streams:`` has its connector's entry, the same object."""


def parse_python_path(raw: object, base_dir: Path, secrets: Secrets) -> tuple[Path, ...]:
    """Directories (relative to the config file) to put in front of ``sys.path``."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ConfigError(f"must be a list of directories, got {kind(raw)}", "python_path")
    out: list[Path] = []
    for index, entry in enumerate(raw):
        where = f"python_path[{index}]"
        if not isinstance(entry, str) or not entry.strip():
            raise ConfigError(f"must be a directory path, got {kind(entry)}", where)
        directory = Path(entry).expanduser()
        if not directory.is_absolute():
            directory = base_dir / directory
        if not directory.is_dir():
            shown = "[redacted]" if secrets.covers(where) else f"'{directory}'"
            raise ConfigError(f"directory {shown} does not exist", where)
        out.append(directory.resolve())
    return tuple(out)


def prepend_sys_path(directories: Sequence[Path]) -> None:
    """Put ``directories`` first on ``sys.path``, in their order, each once."""
    for directory in reversed(directories):
        entry = str(directory)
        if entry not in sys.path:
            sys.path.insert(0, entry)
    if directories:
        importlib.invalidate_caches()


def load_pollers(
    raw: object, secrets: Secrets, base_dir: Path
) -> tuple[list[Poller], tuple[PollerSource, ...]]:
    """The pollers and where each came from; names must be unique."""
    if raw is None or raw == []:
        raise ConfigError(
            "at least one poller is required: '- name: ...' (declarative) or "
            "'- python: module:attr'",
            "pollers",
        )
    if not isinstance(raw, list):
        raise ConfigError(f"must be a list of pollers, got {kind(raw)}", "pollers")
    pollers: list[Poller] = []
    sources: list[PollerSource] = []
    seen: dict[str, int] = {}
    routes: dict[str, int] = {}
    for index, entry in enumerate(raw):
        where = f"pollers[{index}]"
        loaded, source = _load_one(entry, where, secrets, base_dir)
        _one_route(loaded, routes, index)
        for poller in loaded:  # a connector with streams is one poller per stream
            if poller.name in seen:
                raise ConfigError(
                    f"duplicate poller name {poller.name!r} (also pollers[{seen[poller.name]}])",
                    where,
                )
            seen[poller.name] = index
            pollers.append(poller)
            sources.append(source)
    return pollers, tuple(sources)


def _one_route(loaded: Sequence[Poller], routes: dict[str, int], index: int) -> None:
    """A webhook path belongs to one connector: a second is refused at its ``webhook.path``."""
    spec = webhook_of(loaded[0]) if loaded else None
    if spec is None:
        return
    if spec.path in routes:
        raise ConfigError(
            f"{spec.path!r} is also the webhook path of pollers[{routes[spec.path]}]",
            f"pollers[{index}].webhook.path",
        )
    routes[spec.path] = index


def entry_indexes(sources: Sequence[PollerSource]) -> list[int]:
    """For each poller of :func:`load_pollers`, the index of its ``pollers:`` entry: the
    streams of one connector follow each other and hold its entry (the same object)."""
    out: list[int] = []
    for position, source in enumerate(sources):
        same = position > 0 and isinstance(source, Mapping) and source is sources[position - 1]
        out.append(out[-1] if same else (out[-1] + 1 if out else 0))
    return out


def _load_one(
    entry: object, where: str, secrets: Secrets, base_dir: Path
) -> tuple[list[Poller], PollerSource]:
    if not isinstance(entry, Mapping):
        raise ConfigError(
            f"must be a mapping: '- name: ...' (declarative) or '- python: module:attr', "
            f"got {kind(entry)}",
            where,
        )
    if "name" in entry:
        if "python" in entry:
            raise ConfigError(
                "a poller is either declarative (name: ...) or Python (python: module:attr), "
                "not both",
                where,
            )
        compiled = compile_connector_entry(
            entry, where=where, base_dir=base_dir, written=secrets.written
        )
        return compiled, entry
    if "python" not in entry:
        raise ConfigError(
            "needs 'name: ...' (a declarative HTTP poller) or 'python: module:attr'", where
        )
    ref = _entry_reference(entry, where, secrets)
    return [import_poller(ref, f"{where}.python")], ref


def _entry_reference(entry: Mapping[str, Any], where: str, secrets: Secrets) -> str:
    check_keys(entry, ("python",), where)
    ref = entry["python"]
    path = f"{where}.python"
    if not isinstance(ref, str) or not REFERENCE.match(ref.strip()):
        shown = secrets.show(ref, path) if isinstance(ref, str) else kind(ref)
        raise ConfigError(
            f"expected 'module:attribute', e.g. 'mypackage.pollers:invoices', got {shown}", path
        )
    return ref.strip()


def import_poller(ref: str, path: str) -> Poller:
    """The ``Poller`` at ``module:attr``; every failure is one line naming what went wrong."""
    obj = import_object(ref, path)
    if not isinstance(obj, Poller):
        raise ConfigError(
            f"{ref!r} is {kind(obj)}, not a Poller; create it with watukuy.define_poller(...)",
            path,
        )
    return obj
