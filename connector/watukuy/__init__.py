"""watukuy: poll vendor APIs per tenant and publish what changed to Kafka."""

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
from watukuy.core.version import VERSION
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
