"""The credential store contract: every implementation passes these.

A test file subclasses :class:`CredentialContract` and provides the fixture ``opener``: an
async callable that returns a new, started store instance over the same durable state (for
Kafka a fresh ``KafkaCredentials`` on the same topic; for HTTP a fresh ``HttpCredentials``
on the same endpoint and claim log; for memory the same object, which is all a new engine
over it would see). The fixture closes what it opened.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace

import pytest

from watukuy.core.grants import Claim, Grant, GrantRef, Reauthorize, handed_in, refused, rotated
from watukuy.core.grants import TokenAnswer as Answer
from watukuy.store.credentials import CredentialStore

Opener = Callable[[], Awaitable[CredentialStore]]
NOW = 1_750_000_000.0


def grant(token: str = "refresh-1") -> Grant:
    return rotated(handed_in(token, NOW), Answer("access-1", f"{token}-next", NOW + 3600), NOW)


def claim(ref: GrantRef, serial: int, runner: str = "r1") -> Claim:
    return Claim(ref, serial, attempt=uuid.uuid4().hex, runner=runner, at=NOW)


class CredentialContract:
    restarts = True
    """``False``: nothing survives a new instance (memory), so restart tests are skipped."""

    @pytest.fixture
    def ref(self) -> GrantRef:
        # A connector of this test's own: the durable stores may hold other tests' records.
        return GrantRef(f"conn-{uuid.uuid4().hex[:8]}", "tenant/1 %")

    async def test_save_then_load_answers_the_grant(self, opener: Opener, ref: GrantRef) -> None:
        store = await opener()
        saved = grant()
        await store.save(ref, saved)
        assert await store.load(ref) == saved

    async def test_load_of_an_unknown_ref_is_none(self, opener: Opener, ref: GrantRef) -> None:
        store = await opener()
        assert await store.load(ref) is None

    async def test_refs_are_isolated(self, opener: Opener, ref: GrantRef) -> None:
        store = await opener()
        nested = GrantRef(ref.connector, f"{ref.tenant}/b")
        other_connector = GrantRef(f"{ref.connector}-x", ref.tenant)
        await store.save(ref, grant("r-a"))
        assert await store.load(nested) is None
        assert await store.load(other_connector) is None
        await store.save(nested, grant("r-ab"))
        await store.save(other_connector, grant("r-x"))
        assert await store.load(ref) == grant("r-a")
        assert await store.load(nested) == grant("r-ab")
        assert await store.load(other_connector) == grant("r-x")

    async def test_the_newest_saved_wins(self, opener: Opener, ref: GrantRef) -> None:
        store = await opener()
        first = grant()
        second = rotated(first, Answer("access-2", "refresh-3", NOW + 7200), NOW + 10)
        third = refused(second, Reauthorize.INVALID_GRANT, NOW + 20)
        for saved in (first, second, third):
            await store.save(ref, saved)
        loaded = await store.load(ref)
        assert loaded == third
        assert loaded is not None and loaded.needs_authorization is Reauthorize.INVALID_GRANT

    async def test_a_saved_grant_is_there_for_a_new_instance(
        self, opener: Opener, ref: GrantRef
    ) -> None:
        if not self.restarts:
            pytest.skip("nothing of this store survives its instance")
        first = await opener()
        saved = replace(grant(), expires_at=None)
        await first.save(ref, saved)
        await first.close()
        again = await opener()
        assert await again.load(ref) == saved

    async def test_the_first_claim_wins_and_every_caller_is_told_so(
        self, opener: Opener, ref: GrantRef
    ) -> None:
        store = await opener()
        mine, theirs = claim(ref, 3, "r1"), claim(ref, 3, "r2")
        assert await store.claimed(ref, 3) is None
        assert await store.claim(mine) == mine
        assert await store.claim(theirs) == mine
        assert await store.claimed(ref, 3) == mine
        # Another serial, or another tenant, has a refresher of its own.
        assert await store.claimed(ref, 4) is None
        later = claim(ref, 4, "r2")
        assert await store.claim(later) == later
        nested = GrantRef(ref.connector, f"{ref.tenant}/b")
        assert await store.claimed(nested, 3) is None

    async def test_a_claim_asked_again_is_answered_as_before(
        self, opener: Opener, ref: GrantRef
    ) -> None:
        # The vault asks a claim again when its read-back failed (engine/credentials.py).
        store = await opener()
        mine, theirs = claim(ref, 5, "r1"), claim(ref, 5, "r2")
        assert await store.claim(mine) == mine
        assert await store.claim(theirs) == mine
        assert await store.claim(mine) == mine
        assert await store.claim(theirs) == mine
        assert await store.claimed(ref, 5) == mine

    async def test_racing_instances_are_told_one_winner(
        self, opener: Opener, ref: GrantRef
    ) -> None:
        one, two = await opener(), await opener()
        claims = [claim(ref, 7, f"r{i}") for i in range(6)]
        stores = [one if i % 2 else two for i in range(len(claims))]
        answers = await asyncio.gather(*(s.claim(c) for s, c in zip(stores, claims, strict=True)))
        winner = answers[0]
        assert winner in claims
        assert all(answer == winner for answer in answers)
        assert await one.claimed(ref, 7) == winner
        assert await two.claimed(ref, 7) == winner

    async def test_a_claim_is_there_for_a_new_instance(self, opener: Opener, ref: GrantRef) -> None:
        if not self.restarts:
            pytest.skip("nothing of this store survives its instance")
        first = await opener()
        mine = claim(ref, 1)
        await first.claim(mine)
        await first.close()
        again = await opener()
        assert await again.claimed(ref, 1) == mine
        assert await again.claim(claim(ref, 1, "r9")) == mine
