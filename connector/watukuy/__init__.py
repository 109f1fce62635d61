"""watukuy: poll vendor APIs per tenant and publish what changed to Kafka.

The names below load on first use (PEP 562): ``watukuy-source`` imports this package before
anything else, and a runner's start must not wait for the engine before it has read its
config and asked Kafka for its topics (:mod:`watukuy.observe.startup`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from watukuy.core.version import VERSION

if TYPE_CHECKING:
    from watukuy.core.clock import FakeClock, SystemClock
    from watukuy.core.errors import ConfigError, Fenced, Retriable, StateCorrupted, WatukuyError
    from watukuy.core.events import Event
    from watukuy.core.inspect import PollerInspect
    from watukuy.core.poller import (
        FetchResult,
        ParentSpec,
        Partition,
        Poller,
        Unreadable,
        define_poller,
    )
    from watukuy.core.state import ParkedItem
    from watukuy.engine.engine import Engine
    from watukuy.engine.fetching import FetchContext
    from watukuy.engine.handlers import HandlerContext
    from watukuy.store.memory import MemoryStore

__version__ = VERSION

__all__ = [
    "ConfigError",
    "Engine",
    "Event",
    "FakeClock",
    "Fenced",
    "FetchContext",
    "FetchResult",
    "HandlerContext",
    "MemoryStore",
    "ParentSpec",
    "ParkedItem",
    "Partition",
    "Poller",
    "PollerInspect",
    "Retriable",
    "StateCorrupted",
    "SystemClock",
    "Unreadable",
    "WatukuyError",
    "define_poller",
]

_WHERE = {
    "FakeClock": "core.clock",
    "SystemClock": "core.clock",
    "ConfigError": "core.errors",
    "Fenced": "core.errors",
    "Retriable": "core.errors",
    "StateCorrupted": "core.errors",
    "WatukuyError": "core.errors",
    "Event": "core.events",
    "PollerInspect": "core.inspect",
    "FetchResult": "core.poller",
    "ParentSpec": "core.poller",
    "Partition": "core.poller",
    "Poller": "core.poller",
    "Unreadable": "core.poller",
    "define_poller": "core.poller",
    "ParkedItem": "core.state",
    "Engine": "engine.engine",
    "FetchContext": "engine.fetching",
    "HandlerContext": "engine.handlers",
    "MemoryStore": "store.memory",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'watukuy' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"watukuy.{where}"), name)
    globals()[name] = value  # once: the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
