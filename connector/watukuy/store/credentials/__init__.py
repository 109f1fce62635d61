"""Where rotated per-tenant grants live: the credential store seam.

Implementations: :mod:`.memory` (tests, embedding), :mod:`.kafka` (the compacted
``<prefix>.credentials`` topic, AES-256-GCM) and :mod:`.http` (the user's own endpoint). Every
one passes ``tests/store/credentials/contract.py``.

The store also orders claims (:class:`watukuy.core.grants.Claim`): of the claims for one serial
of a grant, the first in the store's order is the one refresher; every other caller waits for
the grant it saves. That is what keeps a rotated refresh token used once, by one caller, across
streams and runner instances.
"""

from __future__ import annotations

from typing import Protocol

from watukuy.core.grants import Claim, Grant, GrantRef

__all__ = ["CredentialStore"]


class CredentialStore(Protocol):
    async def start(self) -> None:
        """Ready to answer: a store that cannot be read with the configured key raises
        :class:`watukuy.core.errors.ConfigError` naming the setting, never the key."""

    async def load(self, ref: GrantRef) -> Grant | None:
        """The newest grant saved for ``ref``, or ``None``."""

    async def save(self, ref: GrantRef, grant: Grant) -> None:
        """Keep ``grant`` as ``ref``'s newest, durably before returning (a grant saved is never
        lost to a crash of this process after it returns)."""

    async def claim(self, claim: Claim) -> Claim:
        """Record ``claim`` and return the first claim recorded for its ref and serial: the
        caller refreshes only when that is its own (same ``attempt``)."""

    async def claimed(self, ref: GrantRef, serial: int) -> Claim | None:
        """The first claim recorded for ``ref`` and ``serial``, if any (to wait for its answer,
        or to report it lost)."""

    async def close(self) -> None:
        """Release what it holds; idempotent."""
