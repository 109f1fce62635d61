"""Grants and claims in memory: for tests and an embedded engine on the memory store. Nothing
survives the process, as nothing else of the memory store does."""

from __future__ import annotations

from watukuy.core.grants import Claim, Grant, GrantRef

__all__ = ["MemoryCredentials"]


class MemoryCredentials:
    def __init__(self) -> None:
        self._grants: dict[GrantRef, Grant] = {}
        self._claims: dict[tuple[GrantRef, int], Claim] = {}

    async def start(self) -> None:
        return None

    async def load(self, ref: GrantRef) -> Grant | None:
        return self._grants.get(ref)

    async def save(self, ref: GrantRef, grant: Grant) -> None:
        self._grants[ref] = grant

    async def claim(self, claim: Claim) -> Claim:
        return self._claims.setdefault((claim.ref, claim.serial), claim)

    async def claimed(self, ref: GrantRef, serial: int) -> Claim | None:
        return self._claims.get((ref, serial))

    async def close(self) -> None:
        return None
