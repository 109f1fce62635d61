"""What the roster asks of child streams (:mod:`.children`), handed to it by the engine.

:mod:`.children` reads and moves the roster's keys, and the roster asks it for a child
poller's partitions and for its dormant keys: passed in as these hooks, the two modules do not
import each other.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from watukuy.core.poller import Partition, Poller

__all__ = ["ChildStreams"]

R = TypeVar("R")  # the roster (``engine.roster.Roster``), which this module does not import


@dataclass(frozen=True, slots=True)
class ChildStreams(Generic[R]):
    """The child streams' hooks (:mod:`.children`'s functions, in the engine)."""

    listing: Callable[[R, Poller], Awaitable[dict[str, Partition]]]
    """A child poller's partitions, from its parents' snapshots in the store."""
    pause_dormant: Callable[[R, str, set[str]], Awaitable[None]]
    """Let go of the on_change children of tenants that left a root poller's listing."""
    wake: Callable[[R, Poller, str], Awaitable[None]]
    """Hold a dormant on_change child again (an operation names it)."""
