"""Per-tenant OAuth2 grants: what a credential store keeps, and the pure rules of their life.

A tenant authorised its own account once; the tenants source hands in that first grant (a
refresh token) in partition data, which is never persisted. Many providers rotate the refresh
token at every use and treat a second use of a spent one as theft (they revoke the whole
chain). So a rotated grant lives only in the credential store, and these rules decide:

- which grant is current: the stored one, if the source's grant belongs to its chain (it is
  the one the chain started from, or one rotated from it); else the source's, which starts a
  new chain (a re-authorisation);
- when to refresh: when there is no access token, or it expires within ``refresh_early``;
- what a refresh's answer makes of the grant (:func:`rotated`), and what a refused one does
  (:func:`refused`: the tenant needs authorising again);
- who refreshes: one :class:`Claim` per refresh, the first in the store's order, and when a
  claim with no answer after it counts as lost to a crash (:func:`lost`).

Every value here is a secret except :class:`Claim` and :class:`GrantRef`, which name no token:
a :class:`Grant` is never logged (its ``repr`` hides the tokens) and crosses a store only
encrypted or over the user's own endpoint.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from watukuy.core.errors import StateCorrupted

__all__ = [
    "CHAIN_LENGTH",
    "Claim",
    "Grant",
    "GrantRef",
    "Reauthorize",
    "TokenAnswer",
    "current",
    "digest",
    "due",
    "handed_in",
    "lost",
    "refused",
    "rotated",
    "usable",
]

CHAIN_LENGTH = 64
"""Digests of a chain's refresh tokens kept (the first and the latest): the source may hand in
any of them."""


class Reauthorize(StrEnum):
    """Why a tenant needs authorising again (a reason code, never a provider's text)."""

    INVALID_GRANT = "invalid_grant"
    """The provider refused the refresh token (revoked, expired or reused)."""
    REFUSED = "refused"
    """The token endpoint answered 400/401 without ``invalid_grant``."""
    REFRESH_LOST = "refresh_lost"
    """A refresh was claimed and no answer was stored after it: its runner crashed between
    the provider's answer and the store's write, so the grant it held may be spent."""


@dataclass(frozen=True, slots=True)
class GrantRef:
    """One tenant of one connector: the store's key (``connector/tenant``)."""

    connector: str
    tenant: str

    @property
    def key(self) -> str:
        # Connector names match [A-Za-z0-9._-]+, so the first '/' splits this text.
        return f"{self.connector}/{self.tenant}"

    @classmethod
    def parse(cls, key: str) -> GrantRef:
        connector, sep, tenant = key.partition("/")
        if not sep or not connector:
            raise ValueError(f"not a grant key: {key!r}")
        return cls(connector, tenant)


def digest(token: str) -> str:
    """A token's fingerprint: enough to recognise it, nothing to use it with."""
    return hashlib.sha256(token.encode()).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class Grant:
    """A tenant's grant as the store keeps it. Secret: never logged or shown."""

    serial: int
    """0 for a grant handed in (source or REST); one more at every refresh."""
    refresh_token: str = field(repr=False)
    access_token: str | None = field(default=None, repr=False)
    expires_at: float | None = None
    """When ``access_token`` expires (epoch seconds); ``None``: unknown, used until a 401."""
    chain: tuple[str, ...] = field(default=(), repr=False)
    """Digests of every refresh token this grant is or supersedes, oldest first (the last is
    its own): a source handing any of them is behind the store."""
    written_at: float = 0.0
    needs_authorization: Reauthorize | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "serial": self.serial,
            "refresh_token": self.refresh_token,
            "access_token": self.access_token,
            "expires_at": self.expires_at,
            "chain": list(self.chain),
            "written_at": self.written_at,
            "needs_authorization": (
                None if self.needs_authorization is None else self.needs_authorization.value
            ),
        }

    @classmethod
    def from_json(cls, value: object) -> Grant:
        """The grant a store read; :class:`StateCorrupted` (naming fields, never values) when
        it is not one."""
        if not isinstance(value, dict):
            raise StateCorrupted("a stored grant is not a JSON object")
        try:
            serial = value["serial"]
            refresh = value["refresh_token"]
            access = value.get("access_token")
            expires = value.get("expires_at")
            chain = value.get("chain", [])
            written = value.get("written_at", 0.0)
            reason = value.get("needs_authorization")
        except KeyError as exc:
            raise StateCorrupted(f"a stored grant has no {exc.args[0]}") from None
        if isinstance(serial, bool) or not isinstance(serial, int) or serial < 0:
            raise StateCorrupted("a stored grant's serial is not a count")
        if not isinstance(refresh, str) or not refresh:
            raise StateCorrupted("a stored grant's refresh_token is not text")
        if access is not None and not isinstance(access, str):
            raise StateCorrupted("a stored grant's access_token is not text")
        if expires is not None and (isinstance(expires, bool) or not _number(expires)):
            raise StateCorrupted("a stored grant's expires_at is not a number")
        if not isinstance(chain, list) or not all(isinstance(d, str) for d in chain):
            raise StateCorrupted("a stored grant's chain is not a list of digests")
        if isinstance(written, bool) or not _number(written):
            raise StateCorrupted("a stored grant's written_at is not a number")
        try:
            needs = None if reason is None else Reauthorize(reason)
        except ValueError:
            raise StateCorrupted("a stored grant's needs_authorization is unknown") from None
        return cls(
            serial=serial,
            refresh_token=refresh,
            access_token=access,
            expires_at=None if expires is None else float(expires),
            chain=tuple(chain),
            written_at=float(written),
            needs_authorization=needs,
        )


def _number(value: object) -> bool:
    return isinstance(value, int | float)


@dataclass(frozen=True, slots=True)
class TokenAnswer:
    """What the token endpoint answered to a refresh. Secret."""

    access_token: str = field(repr=False)
    refresh_token: str | None = field(default=None, repr=False)
    """The rotated refresh token; ``None`` when the provider keeps the old one."""
    expires_at: float | None = None


@dataclass(frozen=True, slots=True)
class Claim:
    """One caller's claim to refresh ``serial`` of a grant. Names no token: safe to log and to
    keep unencrypted. The first claim for a serial, in the store's order, is the refresher."""

    ref: GrantRef
    serial: int
    attempt: str
    """Unique per claim (a random id), so a caller recognises its own."""
    runner: str
    at: float

    def to_json(self) -> dict[str, Any]:
        return {
            "connector": self.ref.connector,
            "tenant": self.ref.tenant,
            "serial": self.serial,
            "attempt": self.attempt,
            "runner": self.runner,
            "at": self.at,
        }

    @classmethod
    def from_json(cls, value: object) -> Claim:
        if not isinstance(value, dict):
            raise StateCorrupted("a stored claim is not a JSON object")
        try:
            claim = cls(
                ref=GrantRef(str(value["connector"]), str(value["tenant"])),
                serial=int(value["serial"]),
                attempt=str(value["attempt"]),
                runner=str(value["runner"]),
                at=float(value["at"]),
            )
        except (KeyError, TypeError, ValueError):
            raise StateCorrupted("a stored claim lacks a field or has a bad one") from None
        return claim


# -- the rules --------------------------------------------------------------------------------


def handed_in(refresh_token: str, now: float, replacing: Grant | None = None) -> Grant:
    """A grant from the tenants source or REST, with no access token yet. It replaces
    ``replacing`` (a re-authorisation): its serial is one more, so it is the newest, and its
    chain keeps the replaced chain's digests, so none of those grants wins over it again (a
    source that still hands out the first, spent grant after a REST hand-in)."""
    if replacing is None:
        return Grant(
            serial=0, refresh_token=refresh_token, chain=(digest(refresh_token),), written_at=now
        )
    return Grant(
        serial=replacing.serial + 1,
        refresh_token=refresh_token,
        chain=(*replacing.chain, digest(refresh_token))[-CHAIN_LENGTH:],
        written_at=now,
    )


def current(stored: Grant | None, source: str | None, now: float) -> Grant | None:
    """The grant to use: the stored one when the source hands none, or one the stored chain
    already knows (the first grant, which it may hand out long after rotations); else the
    source's, a new authorisation that replaces the stored one. ``None``: neither has one."""
    if source is None or source == "":
        return stored
    if stored is not None and digest(source) in stored.chain:
        return stored
    return handed_in(source, now, replacing=stored)


def usable(grant: Grant, now: float) -> bool:
    """Its access token may be sent now."""
    if grant.needs_authorization is not None or grant.access_token is None:
        return False
    return grant.expires_at is None or now < grant.expires_at


def due(grant: Grant, now: float, refresh_early: float) -> bool:
    """It should be refreshed now: no access token, or one expiring within ``refresh_early``."""
    if grant.needs_authorization is not None:
        return False
    if grant.access_token is None:
        return True
    return grant.expires_at is not None and now >= grant.expires_at - refresh_early


def rotated(grant: Grant, answer: TokenAnswer, now: float) -> Grant:
    """The grant after a refresh answered ``answer``: the next serial, the new access token
    and, when the provider rotated it, the new refresh token added to the chain."""
    refresh = answer.refresh_token or grant.refresh_token
    chain = grant.chain
    if refresh != grant.refresh_token:
        chain = (*chain, digest(refresh))
        if len(chain) > CHAIN_LENGTH:
            # Keep the grant the chain started from: a tenants source keeps handing out that
            # first (spent) grant for ever, and forgetting it would take it for a new
            # authorisation and send a spent token to the provider (which revokes the chain).
            chain = (chain[0], *chain[-(CHAIN_LENGTH - 1) :])
    return Grant(
        serial=grant.serial + 1,
        refresh_token=refresh,
        access_token=answer.access_token,
        expires_at=answer.expires_at,
        chain=chain,
        written_at=now,
    )


def refused(grant: Grant, reason: Reauthorize, now: float) -> Grant:
    """The grant once the tenant needs authorising again: kept (so the source's same grant is
    recognised and not tried again), its access token dropped."""
    return replace(
        grant, access_token=None, expires_at=None, needs_authorization=reason, written_at=now
    )


def lost(claim: Claim, grant: Grant, now: float, after: float) -> bool:
    """``claim`` refreshed ``grant`` (it claimed this serial) and no answer followed within
    ``after`` seconds: its runner died between the provider's answer and the store's write."""
    return (
        claim.serial == grant.serial
        and grant.needs_authorization is None
        and now - claim.at >= after
    )
