"""``partitions:`` of a declarative poller: where its tenants come from.

Exactly one source, plus an optional ``refresh`` (default ``5m``)::

    partitions:
      static: [{key: acme, data: {slug: acme}}]   # checked at load, the same list every time
      file: tenants.yaml                          # YAML/JSON list of {key, data}, re-read
      http: {url: ..., records: tenants, key: slug}   # a tenants endpoint (see .tenants)
      python: mypackage.tenants:load              # the Python API's partitions callable
      refresh: 5m

Each source becomes what the Python API calls ``partitions``: a callable the engine evaluates
at every refresh. A failure at load is a ``ConfigError`` naming the field; a failure at refresh
(the file went missing, the endpoint is down) raises, and the engine logs one line and keeps
the previous list.

Partition ``data`` holds tenant secrets, so no message here quotes a data value or a line of
the tenants file: errors name the field, the entry index and the file, never the content.
"""

from __future__ import annotations

import asyncio
import difflib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from watukuy.core.durations import parse_duration
from watukuy.core.errors import ConfigError
from watukuy.core.poller import Partition
from watukuy.core.validation import check_keys, join, kind
from watukuy.declarative.tenants import parse_http_source
from watukuy.options.imports import import_object
from watukuy.options.secrets import Written

if TYPE_CHECKING:
    from watukuy.http.transport import Transport

__all__ = ["DEFAULT_REFRESH", "SOURCES", "parse_partitions", "read_partitions_file"]

SOURCES = ("static", "file", "http", "python")
DEFAULT_REFRESH = "5m"
_EXACTLY_ONE = "exactly one of static, file, http, python"


def parse_partitions(
    raw: object,
    *,
    where: str,
    base_dir: Path,
    transport: Transport | None = None,
    written: Mapping[str, Written] | None = None,
) -> tuple[Callable[[], Any] | None, float]:
    """``partitions:`` of a declarative poller -> (the Poller's partitions callable, refresh
    seconds). ``where`` is the path of the mapping, e.g. ``pollers[0].partitions``."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"must be a mapping with {_EXACTLY_ONE}, got {kind(raw)}", where)
    _check_source_keys(raw, where)
    given = [name for name in SOURCES if name in raw]
    if len(given) != 1:
        found = f"; got {' and '.join(given)}" if given else ""
        raise ConfigError(f"needs {_EXACTLY_ONE}{found}", where)
    refresh = _refresh(raw.get("refresh", DEFAULT_REFRESH), join(where, "refresh"))
    source = given[0]
    value = raw[source]
    path = join(where, source)
    if source == "static":
        return _static_source(value, path), refresh
    if source == "file":
        return _file_source(value, path, base_dir), refresh
    if source == "python":
        return _python_source(value, path), refresh
    return parse_http_source(value, where=path, transport=transport, written=written), refresh


def _check_source_keys(raw: Mapping[Any, Any], where: str) -> None:
    """Like ``check_keys``, but the message also says what a ``partitions:`` needs."""
    known = [*SOURCES, "refresh"]
    for key in raw:
        if key in known:
            continue
        close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ConfigError(
            f"unknown key; {hint}partitions take {_EXACTLY_ONE}, and optionally refresh",
            join(where, key),
        )


def _refresh(value: object, path: str) -> float:
    return parse_duration(value, path, unit_required=True)


# -- static ---------------------------------------------------------------------------------


def _static_source(value: object, path: str) -> Callable[[], list[Partition]]:
    partitions = _entries(value, path, prefix="")

    def static() -> list[Partition]:
        return list(partitions)

    return static


def _entries(value: object, path: str, *, prefix: str) -> tuple[Partition, ...]:
    """Checked ``[{key, data}]``. Errors go to ``path``; ``prefix`` (a file's name) leads the
    message when the entries come from a file, whose fields have no config path."""

    def fail(message: str, field: str) -> ConfigError:
        if prefix:
            return ConfigError(f"{prefix}{field}: {message}" if field else prefix + message, path)
        return ConfigError(message, f"{path}{field}")

    if not isinstance(value, list):
        raise fail(f"must be a list of {{key, data}}, got {kind(value)}", "")
    out: list[Partition] = []
    seen: dict[str, int] = {}
    for index, entry in enumerate(value):
        at = f"[{index}]"
        if not isinstance(entry, Mapping):
            raise fail(f"must be a mapping {{key, data}}, got {kind(entry)}", at)
        try:
            check_keys(entry, ("key", "data"), "")
        except ConfigError as exc:
            raise fail("unknown key; an entry has only key and data", f"{at}.{exc.path}") from None
        key = entry.get("key")
        if not isinstance(key, str) or not key.strip():
            shown = kind(key) if not isinstance(key, str) else "an empty string"
            raise fail(f"must be a non-empty string, got {shown}", f"{at}.key")
        if key in seen:
            raise fail(f"duplicate key {key!r} (also [{seen[key]}])", f"{at}.key")
        seen[key] = index
        data = entry.get("data")
        if data is not None and not isinstance(data, Mapping):
            raise fail(f"must be a mapping, got {kind(data)}", f"{at}.data")
        out.append(Partition(key=key, data=data))
    return tuple(out)


# -- file -----------------------------------------------------------------------------------


def _file_source(value: object, path: str, base_dir: Path) -> Callable[[], Any]:
    if not isinstance(value, str) or not value.strip():
        shown = kind(value) if not isinstance(value, str) else "an empty string"
        raise ConfigError(f"must be the path of a YAML or JSON file, got {shown}", path)
    file = Path(value).expanduser()
    if not file.is_absolute():
        file = base_dir / file
    read_partitions_file(file, path)  # fails the load now rather than at the first refresh

    async def from_file() -> list[Partition]:
        # A thread: the file may sit on a slow or network volume, the loop must not wait on it.
        return list(await asyncio.to_thread(read_partitions_file, file, path))

    return from_file


def read_partitions_file(file: Path, path: str) -> tuple[Partition, ...]:
    """The checked entries of a tenants file; every failure is a one-line ``ConfigError`` that
    names the file and a position in it, never its content."""
    shown = f"partitions file '{file}'"
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{shown} not found", path) from None
    except IsADirectoryError:
        raise ConfigError(f"{shown} is a directory", path) from None
    except UnicodeDecodeError:
        raise ConfigError(f"{shown} is not UTF-8 text", path) from None
    except OSError as exc:
        raise ConfigError(f"cannot read {shown}: {exc.strerror}", path) from None
    try:
        data = yaml.safe_load(text)  # JSON is YAML: one parser reads both
    except yaml.MarkedYAMLError as exc:
        # Not str(exc): it quotes the offending line, which may hold a token.
        mark = exc.problem_mark or exc.context_mark
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = exc.problem or exc.context or "syntax error"
        raise ConfigError(f"{shown} is not valid YAML or JSON{at}: {problem}", path) from None
    except yaml.YAMLError as exc:
        raise ConfigError(
            f"{shown} is not valid YAML or JSON ({type(exc).__name__})", path
        ) from None
    return _entries(data, path, prefix=f"{shown} ")


# -- python ---------------------------------------------------------------------------------


def _python_source(value: object, path: str) -> Callable[[], Any]:
    if not isinstance(value, str):
        raise ConfigError(
            f"expected 'module:attribute', e.g. 'mypackage.tenants:load', got {kind(value)}", path
        )
    found = import_object(value, path)
    if not callable(found):
        raise ConfigError(
            f"{value.strip()!r} is {kind(found)}, not a callable returning partitions", path
        )
    loader: Callable[[], Any] = found
    return loader
