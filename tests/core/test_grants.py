"""The token lifecycle as pure functions (issue 45): which grant is current, when it is due,
what a rotation and a refusal make of it, when a claim is lost, and how it is stored, on a fake
clock (plain floats: nothing here reads the time)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watukuy.core.errors import StateCorrupted
from watukuy.core.grants import (
    CHAIN_LENGTH,
    Claim,
    Grant,
    GrantRef,
    Reauthorize,
    TokenAnswer,
    current,
    digest,
    due,
    handed_in,
    lost,
    refused,
    rotated,
    usable,
)

pytestmark = pytest.mark.unit

T0 = 1_750_000_000.0
REF = GrantRef("crm", "acme")
HOUR = 3600.0


def refreshed(grant: Grant, n: int, at: float = T0) -> Grant:
    """``grant`` after ``n`` refreshes that each rotated the refresh token (rt-1, rt-2, ...),
    each access token valid an hour from its refresh."""
    for i in range(1, n + 1):
        answer = TokenAnswer(access_token=f"at-{i}", refresh_token=f"rt-{i}", expires_at=at + HOUR)
        grant = rotated(grant, answer, at)
    return grant


# -- which grant is current -------------------------------------------------------------------


def test_a_source_handing_nothing_keeps_the_stored_grant() -> None:
    stored = refreshed(handed_in("rt-0", T0), 2)
    assert current(stored, None, T0 + 1) is stored
    assert current(stored, "", T0 + 1) is stored
    assert current(None, None, T0) is None


def test_the_first_grant_from_the_source_starts_a_chain() -> None:
    grant = current(None, "rt-0", T0)
    assert grant == Grant(serial=0, refresh_token="rt-0", chain=(digest("rt-0"),), written_at=T0)


def test_the_spent_first_grant_handed_after_rotations_picks_the_stored_grant() -> None:
    stored = refreshed(handed_in("rt-0", T0), 3)
    assert current(stored, "rt-0", T0 + 10) is stored
    assert current(stored, "rt-2", T0 + 10) is stored
    assert current(stored, "rt-3", T0 + 10) is stored


def test_a_grant_not_in_the_chain_is_a_new_authorisation_replacing_it() -> None:
    stored = refused(refreshed(handed_in("rt-0", T0), 3), Reauthorize.INVALID_GRANT, T0)
    fresh = current(stored, "new-rt", T0 + 50)
    assert fresh == handed_in("new-rt", T0 + 50, replacing=stored)
    assert fresh is not None
    assert fresh.serial == stored.serial + 1  # the newest, for every runner reading the store
    assert fresh.needs_authorization is None and fresh.access_token is None
    # The replaced chain stays known: a source still handing out the first, spent grant after
    # a re-authorisation does not win over the new one.
    assert current(fresh, "rt-0", T0 + 60) is fresh
    assert fresh is not None and fresh.needs_authorization is None and fresh.serial == 4


def test_a_refused_grant_is_kept_when_the_source_hands_the_same_chain_again() -> None:
    stored = refused(refreshed(handed_in("rt-0", T0), 1), Reauthorize.INVALID_GRANT, T0)
    assert current(stored, "rt-0", T0 + 1) is stored  # not tried again with a spent token


# -- usable and due ---------------------------------------------------------------------------


def test_a_grant_without_an_access_token_is_due_and_not_usable() -> None:
    grant = handed_in("rt-0", T0)
    assert due(grant, T0, 300.0)
    assert not usable(grant, T0)


def test_an_access_token_is_due_refresh_early_before_it_expires_and_usable_until_then() -> None:
    grant = refreshed(handed_in("rt-0", T0), 1)  # expires at T0 + 1h
    early = 300.0
    assert usable(grant, T0) and not due(grant, T0, early)
    assert not due(grant, T0 + HOUR - early - 0.001, early)
    assert due(grant, T0 + HOUR - early, early) and usable(grant, T0 + HOUR - early)
    assert usable(grant, T0 + HOUR - 0.001)
    assert not usable(grant, T0 + HOUR) and due(grant, T0 + HOUR, early)


def test_an_access_token_of_unknown_expiry_is_used_until_a_401_and_never_due() -> None:
    grant = rotated(handed_in("rt-0", T0), TokenAnswer("at-1", "rt-1"), T0)
    assert grant.expires_at is None
    assert usable(grant, T0 + 1e9) and not due(grant, T0 + 1e9, 300.0)


def test_a_grant_needing_authorisation_is_neither_usable_nor_due() -> None:
    grant = refused(refreshed(handed_in("rt-0", T0), 1), Reauthorize.REFUSED, T0)
    assert not usable(grant, T0) and not due(grant, T0 + HOUR, 300.0)


# -- rotation ---------------------------------------------------------------------------------


def test_a_rotation_counts_the_serial_and_adds_the_new_token_to_the_chain() -> None:
    first = handed_in("rt-0", T0)
    answer = TokenAnswer("at-1", "rt-1", expires_at=T0 + HOUR)
    grant = rotated(first, answer, T0 + 5)
    assert grant == Grant(
        serial=1,
        refresh_token="rt-1",
        access_token="at-1",
        expires_at=T0 + HOUR,
        chain=(digest("rt-0"), digest("rt-1")),
        written_at=T0 + 5,
    )


def test_a_provider_keeping_the_refresh_token_leaves_the_chain_alone() -> None:
    grant = refreshed(handed_in("rt-0", T0), 1)
    kept = rotated(grant, TokenAnswer("at-2", None, T0 + 2 * HOUR), T0 + HOUR)
    assert kept.serial == 2 and kept.refresh_token == "rt-1" and kept.access_token == "at-2"
    assert kept.chain == grant.chain
    same = rotated(kept, TokenAnswer("at-3", "rt-1", None), T0 + HOUR)
    assert same.chain == grant.chain and same.expires_at is None


def test_a_rotation_clears_a_needs_authorization_left_by_an_older_refusal() -> None:
    grant = refused(handed_in("rt-0", T0), Reauthorize.REFUSED, T0)
    assert rotated(grant, TokenAnswer("at-1", "rt-1"), T0).needs_authorization is None


def test_the_chain_is_bounded_and_keeps_the_grant_it_started_from() -> None:
    grant = refreshed(handed_in("rt-0", T0), CHAIN_LENGTH * 2)
    assert len(grant.chain) == CHAIN_LENGTH
    assert grant.chain[0] == digest("rt-0")  # the source's first grant: what it keeps handing
    assert grant.chain[-1] == digest(grant.refresh_token) == digest(f"rt-{CHAIN_LENGTH * 2}")
    assert current(grant, "rt-0", T0) is grant


@given(st.integers(min_value=0, max_value=3 * CHAIN_LENGTH), st.data())
def test_the_source_handing_any_grant_of_the_chain_picks_the_stored_one(
    rotations: int, data: st.DataObject
) -> None:
    stored = refreshed(handed_in("rt-0", T0), rotations)
    # Kept: the first grant and the latest CHAIN_LENGTH - 1 (all of them in a short chain).
    kept = [0, *range(max(1, rotations - CHAIN_LENGTH + 2), rotations + 1)]
    handed = data.draw(st.sampled_from(kept), label="grant handed by the source")
    assert current(stored, f"rt-{handed}", T0 + 1) is stored
    stranger = data.draw(st.text(min_size=1).filter(lambda t: not t.startswith("rt-")))
    assert current(stored, stranger, T0 + 1) == handed_in(stranger, T0 + 1, replacing=stored)


# -- refusal and lost refreshes ---------------------------------------------------------------


def test_a_refusal_keeps_the_chain_and_drops_the_access_token() -> None:
    grant = refreshed(handed_in("rt-0", T0), 2)
    parked = refused(grant, Reauthorize.INVALID_GRANT, T0 + 9)
    assert parked.needs_authorization is Reauthorize.INVALID_GRANT
    assert parked.access_token is None and parked.expires_at is None
    assert (parked.serial, parked.refresh_token, parked.chain) == (2, "rt-2", grant.chain)
    assert parked.written_at == T0 + 9


def claim(serial: int, at: float) -> Claim:
    return Claim(REF, serial, attempt="a1", runner="runner-1", at=at)


def test_a_claim_without_an_answer_is_lost_after_lost_after_and_not_before() -> None:
    grant = refreshed(handed_in("rt-0", T0), 2)
    assert not lost(claim(2, T0), grant, T0 + 59.9, after=60.0)
    assert lost(claim(2, T0), grant, T0 + 60.0, after=60.0)


def test_a_claim_of_another_serial_or_on_a_refused_grant_is_not_lost() -> None:
    grant = refreshed(handed_in("rt-0", T0), 2)
    assert not lost(claim(1, T0), grant, T0 + 600, after=60.0)  # answered: serial 2 exists
    assert not lost(claim(3, T0), grant, T0 + 600, after=60.0)
    parked = refused(grant, Reauthorize.REFRESH_LOST, T0)
    assert not lost(claim(2, T0), parked, T0 + 600, after=60.0)


# -- stored form ------------------------------------------------------------------------------


def test_a_grant_survives_its_json_round_trip() -> None:
    grant = refused(refreshed(handed_in("rt-0", T0), 3), Reauthorize.REFRESH_LOST, T0 + 1)
    for value in (grant, refreshed(handed_in("rt-0", T0), 2), handed_in("x", T0)):
        assert Grant.from_json(json.loads(json.dumps(value.to_json()))) == value


def test_a_claim_survives_its_json_round_trip_and_names_no_token() -> None:
    value = claim(4, T0)
    assert Claim.from_json(json.loads(json.dumps(value.to_json()))) == value
    with pytest.raises(StateCorrupted):
        Claim.from_json({"connector": "crm"})
    with pytest.raises(StateCorrupted):
        Claim.from_json([1])


SECRET = "SECRET-rt-do-not-show"
GOOD: dict[str, Any] = refreshed(handed_in(SECRET, T0), 0).to_json() | {
    "access_token": "SECRET-at",
    "expires_at": T0,
}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"serial": -1}, "serial"),
        ({"serial": True}, "serial"),
        ({"serial": "SECRET-rt-do-not-show"}, "serial"),
        ({"refresh_token": 7}, "refresh_token"),
        ({"refresh_token": ""}, "refresh_token"),
        ({"access_token": ["SECRET-at"]}, "access_token"),
        ({"expires_at": "SECRET-at"}, "expires_at"),
        ({"expires_at": False}, "expires_at"),
        ({"chain": "SECRET-rt-do-not-show"}, "chain"),
        ({"chain": [SECRET, 3]}, "chain"),
        ({"written_at": None}, "written_at"),
        ({"needs_authorization": "SECRET-rt-do-not-show"}, "needs_authorization"),
    ],
)
def test_a_bad_stored_grant_names_the_field_and_never_the_token(
    change: dict[str, Any], field: str
) -> None:
    with pytest.raises(StateCorrupted) as caught:
        Grant.from_json(GOOD | change)
    assert field in str(caught.value)
    assert "SECRET" not in str(caught.value)


@pytest.mark.parametrize("missing", ["serial", "refresh_token"])
def test_a_stored_grant_missing_a_required_field_names_it(missing: str) -> None:
    value = {k: v for k, v in GOOD.items() if k != missing}
    with pytest.raises(StateCorrupted, match=missing) as caught:
        Grant.from_json(value)
    assert "SECRET" not in str(caught.value)


def test_a_stored_grant_that_is_no_object_is_corrupt() -> None:
    with pytest.raises(StateCorrupted):
        Grant.from_json([SECRET])


def test_no_repr_shows_a_token() -> None:
    grant = refreshed(handed_in(SECRET, T0), 1)
    answer = TokenAnswer("SECRET-at", "SECRET-rt", T0)
    assert "SECRET" not in repr(refused(handed_in(SECRET, T0), Reauthorize.REFUSED, T0))
    assert "at-1" not in repr(grant) and "rt-1" not in repr(grant)
    assert digest("rt-1") not in repr(grant)
    assert "SECRET" not in repr(answer) and "SECRET" not in str(answer)
    assert "serial=1" in repr(grant)


def test_a_digest_recognises_a_token_without_holding_it() -> None:
    assert digest(SECRET) == digest(SECRET) != digest(SECRET + "x")
    assert SECRET not in digest(SECRET) and len(digest(SECRET)) == 32


def test_a_grant_key_is_connector_slash_tenant_and_parses_back() -> None:
    assert REF.key == "crm/acme"
    assert GrantRef.parse("crm/acme/eu") == GrantRef("crm", "acme/eu")
    for bad in ("crm", "/acme"):
        with pytest.raises(ValueError):
            GrantRef.parse(bad)
