"""A command: an operation addressed to whichever instance owns a key.

The engine that cannot apply an operation itself (another instance holds the key) sends it as
a command; the owner's store hands it over and the owner applies it. What carries it between
instances (the Kafka store's command records) is the store's business: a command is known
everywhere else by its ``id``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from watukuy.core.keys import key_text

__all__ = ["Command"]


@dataclass(frozen=True, slots=True)
class Command:
    """An operation addressed to whichever instance owns the key.

    ``op`` names one of :data:`watukuy.core.operations.KEY_OPERATIONS` and ``args`` holds its
    arguments in their JSON form (:meth:`~watukuy.core.operations.KeyOperation.encode`).
    """

    id: str
    op: str
    poller: str
    partition: str
    args: dict[str, object] = field(default_factory=dict)
    issued_at: float = 0.0

    @property
    def key(self) -> str:
        return key_text(self.poller, self.partition)

    @classmethod
    def issue(
        cls, op: str, poller: str, partition: str, args: dict[str, object], now: float
    ) -> Command:
        """A new command with a fresh id."""
        return cls(uuid.uuid4().hex, op, poller, partition, args, now)
