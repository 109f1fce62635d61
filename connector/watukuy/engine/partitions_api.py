"""``engine.partitions``: a poller's partitions listed (a refresh forced) and removed."""

from __future__ import annotations

from watukuy.core.poller import Partition
from watukuy.engine.roster import Roster

__all__ = ["PartitionsApi"]


class PartitionsApi:
    """``engine.partitions``: list (forcing a refresh) and remove."""

    def __init__(self, roster: Roster) -> None:
        self._roster = roster

    async def list(self, poller: str) -> list[Partition]:
        self._roster.poller(poller)
        return await self._roster.refresh(poller, force=True)

    async def remove(self, poller: str, partition: str) -> None:
        await self._roster.remove(poller, partition)

    def listed(self, poller: str, key: str) -> Partition | None:
        """Partition ``key`` of ``poller`` as last listed, with its data (a webhook's
        per-tenant secret is read from it); ``None`` if it is not listed."""
        return self._roster.listings.partition(poller, key)
