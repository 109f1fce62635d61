"""The records of ``<prefix>.configs`` (:mod:`watukuy.control.configs` reads and writes the
topic): their keys, their JSON values, and what a value read back says.

- ``connector/<name>``: a connector's config as written, ``${...}`` placeholders kept;
- ``target/<name>``: its target state; both carry the connector's version;
- ``logger/<name>``: a cluster-scoped log level (KIP-495), Connect's level name.

Values are JSON (UTF-8, sorted keys) with a ``format_version``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from watukuy.control.jsonrecord import json_record
from watukuy.core.errors import ConfigError, StateCorrupted
from watukuy.core.keys import POLLER_NAME
from watukuy.core.lifecycle import Target
from watukuy.core.loglevels import LEVELS, LOGGER_NAME, check_level

__all__ = [
    "CONNECTOR_PREFIX",
    "FORMAT_VERSION",
    "LOGGER_PREFIX",
    "TARGET_PREFIX",
    "Record",
    "check_name",
    "check_target",
    "decode_record",
    "encode_connector",
    "encode_logger",
    "encode_target",
]

FORMAT_VERSION = 1
"""``format_version`` written by this release; a record with a higher one is skipped."""

CONNECTOR_PREFIX = "connector/"
TARGET_PREFIX = "target/"
LOGGER_PREFIX = "logger/"

_TARGETS = [target.value for target in Target]


def _json(value: Any) -> bytes:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


def check_name(name: str) -> None:
    if not isinstance(name, str) or not POLLER_NAME.fullmatch(name):
        raise ConfigError("must match [A-Za-z0-9._-]+", "name")


def check_target(target: str) -> Target:
    """``target`` as a :class:`Target`: the enum itself, or its exact value (case counts)."""
    if isinstance(target, str) and target in _TARGETS:
        return Target(target)
    raise ConfigError(f"must be one of: {', '.join(_TARGETS)}", "target")


def encode_connector(name: str, config: Mapping[str, Any], version: int) -> bytes:
    """The ``connector/<name>`` value: ``config`` exactly as given (placeholders kept)."""
    check_name(name)
    if not isinstance(config, Mapping):
        raise ConfigError("must be a JSON object", "config")
    value = {"format_version": FORMAT_VERSION, "name": name, "config": config, "version": version}
    try:
        return _json(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"must be JSON: {exc}", "config") from None


def encode_target(name: str, target: str, version: int) -> bytes:
    """The ``target/<name>`` value."""
    check_name(name)
    target = check_target(target)
    return _json(
        {"format_version": FORMAT_VERSION, "name": name, "target": target, "version": version}
    )


def encode_logger(name: str, level: str) -> bytes:
    """The ``logger/<name>`` value: Connect's level name, checked."""
    if not isinstance(name, str) or not LOGGER_NAME.fullmatch(name):
        raise ConfigError("must match [A-Za-z0-9_$.-]{1,255}", "logger")
    return _json({"format_version": FORMAT_VERSION, "logger": name, "level": check_level(level)})


_Kind = Literal["connector", "target", "logger"]
_KINDS: tuple[tuple[str, _Kind], ...] = (
    (CONNECTOR_PREFIX, "connector"),
    (TARGET_PREFIX, "target"),
    (LOGGER_PREFIX, "logger"),
)


@dataclass(frozen=True, slots=True)
class Record:
    kind: _Kind
    name: str
    value: dict[str, Any] | None  # None: a tombstone


def decode_record(key: bytes | None, value: bytes | None) -> Record | None:
    """What a record of the configs topic says; ``None`` for a key this release does not
    know. Raises :class:`StateCorrupted` for a value it cannot read (never quoting it)."""
    if key is None:
        return None
    text = key.decode("utf-8", errors="replace")
    found = next(((k, text[len(p) :]) for p, k in _KINDS if text.startswith(p)), None)
    if found is None:
        return None
    kind, name = found
    if value is None:
        return Record(kind, name, None)
    decoded = json_record(value, f"{kind} record of '{name}'", FORMAT_VERSION)
    if kind == "logger":  # no version: the last level written wins, nothing checks it
        field, ok = "level", decoded.get("level") in LEVELS
    elif kind == "connector":
        field, ok = "config", isinstance(decoded.get("config"), dict)
    else:
        field, ok = "target", decoded.get("target") in _TARGETS
    if not ok or (kind != "logger" and not isinstance(decoded.get("version"), int)):
        raise StateCorrupted(f"unreadable {kind} record of '{name}': bad {field} or version")
    return Record(kind, name, decoded)
