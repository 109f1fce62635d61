"""Per-tenant refresh-token grants (issue 45) on engines and the simulator's identity provider,
which rotates refresh tokens at every use and revokes a tenant's authorisation when a spent
one comes back. Two engines sharing one credential store stand for two runners: both streams
of every tenant are polled on both, and the grant is refreshed once per expiry between them,
never with a spent token; a refused grant parks the tenant's keys without another request, and
a grant handed in resumes them; a refresh whose answer never reached the store is reported."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from integration.simulator import VendorSimulator, running_simulator
from integration.simulator.identity import CLIENT_ID, CLIENT_SECRET
from watukuy import Engine, FakeClock
from watukuy.config import parse_config
from watukuy.control.keystatus import key_status
from watukuy.core.errors import Conflict, Retriable
from watukuy.core.grants import (
    Claim,
    GrantRef,
    Reauthorize,
    TokenAnswer,
    handed_in,
    refused,
)
from watukuy.core.lifecycle import TaskState
from watukuy.engine.credentials import Vault
from watukuy.store.credentials.memory import MemoryCredentials

pytestmark = pytest.mark.unit

START = 1_750_000_000.0
LIFETIME = 120  # the provider's access tokens, seconds
EARLY = 30  # refresh_early


def connector(base: str) -> dict[str, Any]:
    request = {
        "base": f"{base}/oauth-api/{{partition.data.slug}}",
        "auth": {
            "oauth2": {
                "grant": "refresh_token",
                "token_url": f"{base}/oauth/token",
                "client_id": CLIENT_ID,
                "client_secret": CLIENT_SECRET,
                "refresh_token": "{partition.data.refresh_token}",
                "expires": {"path": "expires_in"},
                "refresh_early": f"{EARLY}s",
            }
        },
    }
    return {
        "name": "crm",
        "partitions": {
            "http": {
                "url": f"{base}/oauth/tenants",
                "records": "tenants",
                "key": "id",
                "data": {"slug": "slug", "refresh_token": "refresh_token"},
            },
            "refresh": "1h",
        },
        "defaults": {
            "request": request,
            "records": "data",
            "identity": "id",
            "version": "etag",
            "paginate": {"next_token": {"path": "next", "param": "cursor"}},
            "cursor": {"token": {"path": "resume", "param": "cursor"}},
            "schedule": {"min": "10s", "max": "10s"},
        },
        "streams": [
            {"name": "contacts", "request": {"path": "/contacts"}},
            {"name": "deals", "request": {"path": "/deals"}},
        ],
    }


class World:
    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.sim = VendorSimulator(tenants=3, items_per_tenant=5, seed=11, now=clock.now)
        self.sim.identity.configure(expires_in=LIFETIME)
        self.store = MemoryCredentials()
        self.engines: list[Engine] = []

    def engine(self, base: str, runner: str) -> Engine:
        entry = connector(base)
        config = parse_config(
            {
                "kafka": {"bootstrap.servers": "unused:9092"},
                "credentials": {"store": "kafka", "key": "ab" * 32},
                "pollers": [entry],
            }
        )
        vault = Vault(self.store, runner=runner, lost_after=60.0, wait_max=0.0)
        engine = Engine(config.pollers, clock=self.clock, credentials=vault, owner=runner)
        self.engines.append(engine)
        return engine

    async def rounds(self, n: int, step: float = 10.0) -> None:
        for _ in range(n):
            for engine in self.engines:
                await engine.tick()
            self.clock.advance(step)


@pytest.fixture
async def world() -> AsyncIterator[tuple[World, str]]:
    world = World(FakeClock(START))
    async with running_simulator(world.sim) as base:
        yield world, base
    for engine in world.engines:
        await engine.close()


def refreshes(world: World, tenant: str | None = None) -> list[Any]:
    return [c for c in world.sim.identity.calls if tenant is None or c.tenant == tenant]


async def test_two_runners_refresh_each_tenants_grant_once_per_expiry_and_never_reuse_one(
    world: tuple[World, str],
) -> None:
    w, base = world
    a, b = w.engine(base, "a"), w.engine(base, "b")
    async with a, b:
        await w.rounds(40)  # 400 s: the 120 s tokens expire three times over
    assert w.sim.identity.reuses == []
    calls = refreshes(w)
    assert calls and {c.result for c in calls} == {"ok"}
    for tenant in {c.tenant for c in calls}:
        # A token lives 120 s and is renewed 30 s early: about every 90 s, 4-6 in 400 s,
        # whatever the number of streams and runners asking for it.
        assert 4 <= len(refreshes(w, tenant)) <= 6, refreshes(w, tenant)
    for engine in (a, b):
        for found in engine.inspect():
            assert found.last_error is None, (found.poller, found.partition, found.last_error)


async def test_a_refused_grant_parks_the_tenants_keys_until_a_grant_is_handed_in(
    world: tuple[World, str],
) -> None:
    w, base = world
    engine = w.engine(base, "a")
    async with engine:
        await w.rounds(2)
        tenant = sorted({c.tenant for c in refreshes(w)})[0]
        w.sim.identity.revoke(tenant)  # the customer disconnected the app
        w.clock.advance(LIFETIME)  # the access token expires: the next refresh is refused
        await w.rounds(3)
        asked = len(refreshes(w, tenant))
        await w.rounds(6)
        assert len(refreshes(w, tenant)) == asked  # nothing sent on a timer
        states = {
            (i.poller, i.partition): key_status(i, now=w.clock.now()).state
            for i in engine.inspect()
            if i.partition == tenant
        }
        assert set(states.values()) == {TaskState.NEEDS_AUTHORIZATION}, states
        others = [i for i in engine.inspect() if i.partition != tenant]
        assert others and all(i.last_error is None for i in others)
        stored = await w.store.load(GrantRef("crm", tenant))
        assert stored is not None and stored.needs_authorization is Reauthorize.INVALID_GRANT
        # The customer authorises again; it is handed in (as the REST route does).
        grant = w.sim.identity.authorize(tenant)
        await engine.credentials.hand_in(GrantRef("crm", tenant), grant, w.clock.now())
        for poller, partition in states:
            await engine.trigger(poller, partition=partition)
        await w.rounds(2)
        states = {
            (i.poller, i.partition): key_status(i, now=w.clock.now()).state
            for i in engine.inspect()
            if i.partition == tenant
        }
        assert set(states.values()) == {TaskState.RUNNING}, states
    assert w.sim.identity.reuses == []


async def test_a_refresh_whose_answer_never_reached_the_store_is_reported_not_retried(
    world: tuple[World, str],
) -> None:
    w, base = world
    engine = w.engine(base, "a")
    async with engine:
        await w.rounds(1)
        tenant = sorted({c.tenant for c in refreshes(w)})[0]
        ref = GrantRef("crm", tenant)
        stored = await w.store.load(ref)
        assert stored is not None
        # Runner "z" claimed the next refresh and died before it saved the provider's answer.
        await w.store.claim(Claim(ref, stored.serial, "z-attempt", "z", w.clock.now()))
        before = len(refreshes(w, tenant))
        w.clock.advance(LIFETIME)
        await w.rounds(8)  # 80 s: past lost_after (60 s)
        assert len(refreshes(w, tenant)) == before  # the possibly spent grant is never sent
        lost = await w.store.load(ref)
        assert lost is not None and lost.needs_authorization is Reauthorize.REFRESH_LOST
        errors = {i.last_error for i in engine.inspect() if i.partition == tenant}
        assert all(e and "lost to a crash" in e for e in errors), errors


async def test_a_grant_handed_in_that_the_store_already_used_is_never_sent_again() -> None:
    """The tenants source handed the new grant of a re-authorisation first (it was used and
    rotated); the operator then hands in the same grant over REST. It is spent: making it the
    newest grant would send it to the provider again, which revokes the tenant's chain."""
    ref, now = GrantRef("crm", "acme"), START
    sent: list[str] = []

    async def refresh(token: str) -> TokenAnswer:
        assert token not in sent, "a spent refresh token was sent again"
        sent.append(token)
        return TokenAnswer(f"at-{len(sent)}", f"rt-{len(sent)}", now + LIFETIME)

    vault = Vault(MemoryCredentials(), runner="a")

    async def token(source: str) -> str:
        return await vault.access_token(ref, source, refresh, now=lambda: now, early=EARLY)

    assert await token("first") == "at-1"
    now += LIFETIME  # expired: refreshed with the rotated grant
    assert await token("first") == "at-2"
    assert sent == ["first", "rt-1"]
    await vault.hand_in(ref, "first", now)  # known to the store's chain: spent already
    now += LIFETIME
    assert await token("first") == "at-3"
    assert sent == ["first", "rt-1", "rt-2"]
    stored = await vault.store.load(ref)
    assert stored is not None and stored.needs_authorization is None


async def test_a_used_grant_handed_in_for_a_tenant_needing_authorisation_is_a_conflict() -> None:
    ref, now = GrantRef("crm", "acme"), START
    store = MemoryCredentials()
    await store.save(ref, refused(handed_in("spent", now), Reauthorize.REFRESH_LOST, now))
    vault = Vault(store, runner="a")
    with pytest.raises(Conflict, match="hand in the grant of a new authorisation"):
        await vault.hand_in(ref, "spent", now)
    await vault.hand_in(ref, "new", now)  # a new authorisation replaces it
    stored = await store.load(ref)
    assert stored is not None and stored.refresh_token == "new" and not stored.needs_authorization


class SlowReadBack(MemoryCredentials):
    """A claim is in the store's log at once and read back only when told (a slow broker)."""

    def __init__(self) -> None:
        super().__init__()
        self.read_back = asyncio.Event()

    async def claim(self, claim: Claim) -> Claim:
        first = await super().claim(claim)
        await self.read_back.wait()
        return first


async def test_a_poll_cancelled_while_its_claim_is_read_back_still_refreshes_the_grant() -> None:
    # A fetch timing out (asyncio.timeout cancels the poll) while the claim it wrote is read
    # back must not leave the first claim with nobody refreshing: every other caller would
    # wait for its answer and, after lost_after, park the tenant as a lost refresh, although
    # the grant was never sent to the provider.
    store, ref, sent = SlowReadBack(), GrantRef("crm", "acme"), []

    async def refresh(token: str) -> TokenAnswer:
        sent.append(token)
        return TokenAnswer("at_new", "rt_second", START + LIFETIME)

    first = Vault(store, runner="a", lost_after=60.0, wait_max=0.0)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await first.access_token(ref, "rt_first", refresh, now=lambda: START, early=EARLY)
    store.read_back.set()
    await first.close()  # refreshes under way store what they got
    other = Vault(store, runner="b", lost_after=60.0, wait_max=0.0)
    later = START + 61  # past lost_after
    token = await other.access_token(ref, "rt_first", refresh, now=lambda: later, early=EARLY)
    assert sent == ["rt_first"]
    assert token == "at_new"


class ReadBackFails(MemoryCredentials):
    """A claim is written, and reading it back fails ``failures`` times (``None``: always)."""

    def __init__(self, failures: int | None) -> None:
        super().__init__()
        self.failures = failures

    async def claim(self, claim: Claim) -> Claim:
        first = await super().claim(claim)
        if self.failures is None or self.failures > 0:
            if self.failures is not None:
                self.failures -= 1
            raise Retriable("the claim's offset was not read back in time")
        return first


def rotating(sent: list[str]) -> Any:
    async def refresh(token: str) -> TokenAnswer:
        assert token not in sent, "a spent refresh token was sent again"
        sent.append(token)
        return TokenAnswer(f"at_{len(sent)}", f"rt_{len(sent)}", START + LIFETIME)

    return refresh


async def test_a_claim_whose_read_back_failed_is_asked_again_and_refreshes_once() -> None:
    # Given up at the first failure, the claim (the first) would have nobody refreshing for
    # it: every caller after lost_after would park the tenant as a lost refresh, though the
    # grant was never sent.
    store, ref, sent = ReadBackFails(failures=2), GrantRef("crm", "acme"), []
    first = Vault(store, runner="a", lost_after=60.0, wait_max=0.0)

    token = await first.access_token(
        ref, "rt_first", rotating(sent), now=lambda: START, early=EARLY
    )

    assert (token, sent) == ("at_1", ["rt_first"])
    other = Vault(store, runner="b", lost_after=60.0, wait_max=0.0)
    later = START + 61  # past lost_after: the claim was answered
    assert await other.access_token(ref, "rt_first", rotating(sent), now=lambda: later, early=0)
    stored = await store.load(ref)
    assert stored is not None and stored.needs_authorization is None


async def test_a_claim_never_read_back_is_released_and_the_next_caller_refreshes() -> None:
    store, ref, sent = ReadBackFails(failures=None), GrantRef("crm", "acme"), []
    first = Vault(store, runner="a", lost_after=0.5, wait_max=0.0)  # asked again for 0.25 s

    with pytest.raises(Retriable):
        await first.access_token(ref, "rt_first", rotating(sent), now=lambda: START, early=EARLY)

    assert sent == []  # the provider was never called
    store.failures = 0
    other = Vault(store, runner="b", lost_after=0.5, wait_max=0.0)
    later = START + 61
    token = await other.access_token(ref, "rt_first", rotating(sent), now=lambda: later, early=0)
    assert (token, sent) == ("at_1", ["rt_first"])  # released: not reported lost
    stored = await store.load(ref)
    assert stored is not None and stored.needs_authorization is None
