"""Per-tenant grants at run time: one refresher per (connector, tenant), the others wait.

Every stream of a connector, on every runner, asks :meth:`Vault.access_token` for the tenant's
access token. Within a runner, one :class:`_Tenant` per (connector, tenant) holds a lock, so
its streams refresh once between them. Across runners, the store orders claims: a caller
records a :class:`~watukuy.core.grants.Claim` for the grant's serial before it calls the
provider, and only the first claim's caller calls it; it saves the rotated grant durably
before returning the new access token, so no request uses a token the store does not hold.
The others read the store until a newer grant appears. A claim that no grant follows within
``lost_after`` is a refresh lost to a crash between the provider's answer and the store's
write: reported (the tenant needs authorising again), never retried with the grant it spent.

What is decided is pure (:mod:`watukuy.core.grants`); this module only awaits.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace

from watukuy.core import grants
from watukuy.core.errors import Conflict, NeedsAuthorization, Retriable
from watukuy.core.grants import Claim, Grant, GrantRef, Reauthorize, TokenAnswer
from watukuy.store.credentials import CredentialStore
from watukuy.store.credentials.memory import MemoryCredentials

__all__ = ["GrantPending", "Refresh", "RefreshRefused", "Vault"]

log = logging.getLogger(__name__)

Refresh = Callable[[str], Awaitable[TokenAnswer]]
"""Asks the provider for a new access token with this refresh token (the auth kind's token
request). Raises :class:`RefreshRefused` when the provider refuses the grant."""

Clock = Callable[[], float]

WAIT_STEP = 0.2
"""How often a caller waiting for another's refresh reads the store."""
CLAIM_RETRY = 10.0
"""Seconds a claim whose read-back failed is asked again (:meth:`Vault._first_claim`)."""


class RefreshRefused(Exception):
    """The provider refused the refresh token: ``invalid_grant``, or 400/401 without it."""

    def __init__(self, reason: Reauthorize, status: int) -> None:
        self.reason = reason
        self.status = status
        super().__init__(f"the token endpoint refused the grant ({reason.value}, {status})")


class GrantPending(Retriable):
    """Another caller is refreshing this tenant's grant and its answer is not stored yet."""


@dataclass(slots=True)
class _Tenant:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    grant: Grant | None = None


class Vault:
    """The grants of every (connector, tenant) this runner polls, over one credential store."""

    def __init__(
        self,
        store: CredentialStore | None = None,
        *,
        runner: str = "",
        lost_after: float = 60.0,
        wait_max: float = 10.0,
        on_refresh: Callable[[GrantRef, str], None] | None = None,
    ) -> None:
        self.store: CredentialStore = MemoryCredentials() if store is None else store
        self._runner = runner or "runner"
        self._lost_after = lost_after
        self._wait_max = wait_max
        self._tenants: dict[GrantRef, _Tenant] = {}
        self._refreshing: set[asyncio.Future[tuple[Claim, Grant | None]]] = set()
        self._on_refresh = on_refresh
        """Told each refresh's result (``ok``, ``refused``, ``lost``, ``failed``), a grant
        ``handed_in``, and a tenant seen still ``needs_authorization``: for metrics."""

    async def access_token(
        self,
        ref: GrantRef,
        source: str | None,
        refresh: Refresh,
        *,
        now: Callable[[], float],
        early: float,
        stale: str | None = None,
    ) -> str:
        """An access token to send for ``ref``; ``source`` is the grant the tenants source
        hands in now; ``stale`` a token the API just refused (401), which is not answered
        again. Raises :class:`NeedsAuthorization` when a person must authorise the tenant."""
        tenant = self._tenants.setdefault(ref, _Tenant())
        async with tenant.lock:
            grant = tenant.grant
            if grant is not None and _ready(grant, source, now(), early, stale):
                return str(grant.access_token)  # most polls: no store read
            grant = await self._current(ref, tenant, source, now())
            if grant.needs_authorization is not None:
                self._told(ref, "needs_authorization")  # still: the gauge holds after a restart
                raise _needs(ref, grant.needs_authorization)
            if _ready(grant, source, now(), early, stale):
                return str(grant.access_token)
            fresh = grants.usable(grant, now()) and grant.access_token != stale
            grant = await self._refreshed(ref, tenant, grant, refresh, now, keep=fresh)
            if grant.needs_authorization is not None:
                raise _needs(ref, grant.needs_authorization)
            return str(grant.access_token)

    async def hand_in(self, ref: GrantRef, refresh_token: str, now: float) -> None:
        """A grant handed in over REST (a re-authorisation): saved as the newest, so every
        runner uses it from its next poll. A grant the stored chain already holds is not a new
        authorisation but one the store has (the tenants source handed it in first, and it may
        be spent since): it changes nothing, and :class:`Conflict` says so when the tenant
        still needs authorising."""
        tenant = self._tenants.setdefault(ref, _Tenant())
        async with tenant.lock:
            stored = await self.store.load(ref)
            if stored is not None and grants.digest(refresh_token) in stored.chain:
                if stored.needs_authorization is not None:
                    raise Conflict(
                        f"tenant {ref.tenant!r}: this grant was handed in before and may be "
                        "spent; hand in the grant of a new authorisation"
                    )
                log.info("%s: the grant handed in is already in use here; nothing changes", ref.key)
                return
            grant = grants.handed_in(refresh_token, now, replacing=stored)
            await self.store.save(ref, grant)
            tenant.grant = grant
        self._told(ref, "handed_in")
        log.info("%s: a new grant was handed in; its keys poll again", ref.key)

    async def _current(
        self, ref: GrantRef, tenant: _Tenant, source: str | None, now: float
    ) -> Grant:
        stored = await self.store.load(ref)
        chosen = grants.current(stored, source, now)
        if chosen is None:
            raise NeedsAuthorization(f"tenant {ref.tenant!r}: no grant was handed in")
        if chosen is not stored:  # the source hands a grant the store does not know: saved
            await self.store.save(ref, chosen)
            if stored is not None:
                self._told(ref, "handed_in")
                log.info(
                    "%s: the tenants source hands a new grant; it replaces the stored one", ref.key
                )
        tenant.grant = chosen
        return chosen

    async def _refreshed(
        self,
        ref: GrantRef,
        tenant: _Tenant,
        grant: Grant,
        refresh: Refresh,
        now: Clock,
        *,
        keep: bool,
    ) -> Grant:
        """The grant after a refresh: this caller's, if its claim is the first, else the one
        the first claim's caller stores. ``keep``: the current access token is still good, so
        a caller whose claim lost goes on with it rather than wait."""
        mine = Claim(ref, grant.serial, uuid.uuid4().hex, self._runner, now())
        # The claim, the refresh and its save finish even if this poll is cancelled (its fetch
        # timed out, or the runner stops): a claim in the store may be the first, and then
        # every other caller waits for its answer (a claim never answered is a lost refresh);
        # once the provider may have rotated the grant, only the save keeps the new one. The
        # vault's close waits for them.
        task = asyncio.ensure_future(
            self._claim_and_refresh(ref, tenant, grant, mine, refresh, now)
        )
        self._refreshing.add(task)
        task.add_done_callback(self._refreshing.discard)
        first, refreshed = await asyncio.shield(task)
        if refreshed is not None:
            return refreshed
        if keep:
            return grant
        return await self._awaited(ref, tenant, grant, first, now)

    async def _claim_and_refresh(
        self,
        ref: GrantRef,
        tenant: _Tenant,
        grant: Grant,
        mine: Claim,
        refresh: Refresh,
        now: Clock,
    ) -> tuple[Claim, Grant | None]:
        """The first claim for ``grant``'s serial, and the refreshed grant if it is ``mine``."""
        first = await self._first_claim(ref, tenant, grant, mine, now)
        if first.attempt != mine.attempt:
            return first, None
        return first, await self._refresh(ref, tenant, grant, refresh, now)

    async def _first_claim(
        self, ref: GrantRef, tenant: _Tenant, grant: Grant, mine: Claim, now: Clock
    ) -> Claim:
        """The first claim for ``mine``'s serial. A claim may be written and its read-back
        fail (a broker slow to answer): given up then, a first claim would have nobody
        refreshing for it, and every caller would report the grant lost after ``lost_after``
        though it was never sent. So it is asked again, with the same attempt (the store answers
        the first claim as before), for :data:`CLAIM_RETRY` seconds at most, and less than
        half of ``lost_after``; then, if the store shows it first, it is released as a failed
        refresh releases it (a grant with the next serial), and the error is raised."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + min(CLAIM_RETRY, self._lost_after / 2)
        while True:
            try:
                return await self.store.claim(mine)
            except Retriable as exc:
                if loop.time() + WAIT_STEP < give_up:
                    log.info("%s: reading its refresh claim back: %s; again", ref.key, exc)
                    await asyncio.sleep(WAIT_STEP)
                    continue
                first = await self.store.claimed(ref, grant.serial)
                if first is not None and first.attempt == mine.attempt:
                    await self._release(ref, tenant, grant, now)
                raise

    async def _refresh(
        self, ref: GrantRef, tenant: _Tenant, grant: Grant, refresh: Refresh, now: Clock
    ) -> Grant:
        try:
            answer = await refresh(grant.refresh_token)
        except RefreshRefused as exc:
            refused = grants.refused(grant, exc.reason, now())
            await self.store.save(ref, refused)
            tenant.grant = refused
            self._told(ref, "refused")
            log.warning("%s: needs authorising again: %s", ref.key, exc)
            return refused
        except Exception:
            # The provider answered without rotating anything (5xx, 429), or could not be
            # reached: the claim is freed for the next caller.
            await self._release(ref, tenant, grant, now)
            raise
        rotated = grants.rotated(grant, answer, now())
        await self.store.save(ref, rotated)  # before any request uses its access token
        tenant.grant = rotated
        self._told(ref, "ok")
        return rotated

    async def _release(self, ref: GrantRef, tenant: _Tenant, grant: Grant, now: Clock) -> None:
        """Free the claim on ``grant``'s serial, whose grant the provider was never sent or
        did not rotate: a grant with the next serial, the same tokens, for the next caller."""
        released = replace(grant, serial=grant.serial + 1, written_at=now())
        await self.store.save(ref, released)
        tenant.grant = released
        self._told(ref, "failed")

    async def close(self) -> None:
        """Wait for the refreshes under way to store what they got."""
        while self._refreshing:
            await asyncio.gather(*self._refreshing, return_exceptions=True)

    async def _awaited(
        self, ref: GrantRef, tenant: _Tenant, grant: Grant, first: Claim, now: Clock
    ) -> Grant:
        """The grant another caller's refresh stores; a refresh lost to a crash is reported."""
        waited = 0.0
        while True:
            stored = await self.store.load(ref)
            if stored is not None and (
                stored.serial > grant.serial or stored.needs_authorization is not None
            ):
                tenant.grant = stored
                return stored
            if grants.lost(first, grant, now(), self._lost_after):
                lost = grants.refused(grant, Reauthorize.REFRESH_LOST, now())
                await self.store.save(ref, lost)
                tenant.grant = lost
                self._told(ref, "lost")
                log.error(
                    "%s: a refresh claimed by runner %s was never answered in the store (it "
                    "crashed between the provider's answer and the store's write); the grant "
                    "it used may be spent, so the tenant needs authorising again",
                    ref.key,
                    first.runner,
                )
                return lost
            if waited >= self._wait_max:
                raise GrantPending(
                    f"tenant {ref.tenant!r}: runner {first.runner} is refreshing its grant"
                )
            await asyncio.sleep(WAIT_STEP)
            waited += WAIT_STEP

    def _told(self, ref: GrantRef, result: str) -> None:
        if self._on_refresh is not None:
            self._on_refresh(ref, result)


def _ready(grant: Grant, source: str | None, now: float, early: float, stale: str | None) -> bool:
    """``grant``'s access token may be sent as it is: good for a while yet, not the one just
    refused, and the source hands no grant it does not know."""
    if source and grants.digest(source) not in grant.chain:
        return False
    return (
        grants.usable(grant, now)
        and grant.access_token != stale
        and not grants.due(grant, now, early)
    )


def _needs(ref: GrantRef, reason: Reauthorize) -> NeedsAuthorization:
    why = {
        Reauthorize.INVALID_GRANT: "the provider refused its grant (invalid_grant)",
        Reauthorize.REFUSED: "the provider refused its grant",
        Reauthorize.REFRESH_LOST: "a refresh's answer was lost to a crash",
    }[reason]
    return NeedsAuthorization(f"tenant {ref.tenant!r}: {why}; hand in a new grant")
