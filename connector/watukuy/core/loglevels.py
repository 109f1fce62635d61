"""Log levels at run time as Kafka Connect names them (KIP-495), over Python's numbers.

Connect's clients send and read log4j's names (``OFF``, ``FATAL``, ``ERROR``, ``WARN``,
``INFO``, ``DEBUG``, ``TRACE``); Python's :mod:`logging` has numbers and other names. This
module maps one onto the other and says which loggers a change touches, as Connect does: the
named logger and every logger below it (all of them for ``root``). No I/O here: the caller
hands in the names of the loggers that exist.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

from watukuy.core.errors import ConfigError

__all__ = ["LEVELS", "LOGGER_NAME", "ROOT", "affected", "check_level", "level_name"]

ROOT = "root"
"""Connect's (and Python's) name of the root logger."""

TRACE = 5  # Python has no TRACE: below DEBUG, so DEBUG records still pass at TRACE
OFF = logging.CRITICAL + 10  # above every standard level: nothing passes

LEVELS: dict[str, int] = {
    "OFF": OFF,
    "FATAL": logging.CRITICAL,
    "ERROR": logging.ERROR,
    "WARN": logging.WARNING,
    "INFO": logging.INFO,
    "DEBUG": logging.DEBUG,
    "TRACE": TRACE,
}
"""Connect's level names, most severe first, and the Python level each stands for."""

LOGGER_NAME = re.compile(r"[A-Za-z0-9_$.-]{1,255}")
"""What a logger name may be: Python module paths and Java class names (``$``); nothing that
would need escaping in a path or a log line."""


def check_level(value: object) -> str:
    """``value`` as Connect's level name (case does not count, as in Connect); a
    :class:`ConfigError` naming ``level`` otherwise. The bad value is not quoted back."""
    if isinstance(value, str) and value.upper() in LEVELS:
        return value.upper()
    raise ConfigError(f"must be one of: {', '.join(LEVELS)}", "level")


def level_name(number: int) -> str:
    """The name Connect would show for a Python level: the least severe of Connect's levels
    that lets through no more than ``number`` does (``25`` shows as ``WARN``, since INFO
    records do not pass it). ``0`` (Python's NOTSET: everything passes) is ``TRACE``."""
    for name, value in reversed(LEVELS.items()):
        if value >= number:
            return name
    return "OFF"


def affected(name: str, existing: Iterable[str]) -> list[str]:
    """``name`` and every name of ``existing`` below it (dotted: ``a.b`` is below ``a``, not
    ``ab``), sorted; every one for :data:`ROOT`. This is the list Connect answers a
    worker-scoped PUT with."""
    if name == ROOT:
        found = set(existing)
    else:
        below = f"{name}."
        found = {other for other in existing if other.startswith(below)}
    found.add(name)
    return sorted(found)
