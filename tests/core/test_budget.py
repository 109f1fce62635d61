from __future__ import annotations

import math
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from watukuy.core.budget import Budget, Grant, Lane, TokenBucket, parse_rate

pytestmark = pytest.mark.unit


# -- parse_rate ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("10/s", 10.0),
        ("600/m", 10.0),
        ("5/h", 5 / 3600),
        (" 1.5 / sec ", 1.5),
        ("120/min", 2.0),
        ("86400/d", 1.0),
        ("3/H", 3 / 3600),
        (4, 4.0),
        (0.5, 0.5),
    ],
)
def test_parse_rate(value: str | float, expected: float) -> None:
    assert parse_rate(value) == pytest.approx(expected)


@pytest.mark.parametrize(
    "value", ["", "10", "10/", "/s", "10/w", "ten/s", "-1/s", "0/s", "1/s/s", 0, -2, math.inf, True]
)
def test_parse_rate_rejects(value: str | float) -> None:
    with pytest.raises(ValueError, match="rate"):
        parse_rate(value)


# -- lanes and bucket -----------------------------------------------------------------------


def test_lane_values_and_priority() -> None:
    assert [lane.value for lane in Lane] == ["live", "reconcile", "backfill"]
    assert Lane.LIVE.priority > Lane.RECONCILE.priority > Lane.BACKFILL.priority


def test_token_bucket_starts_full_and_refills() -> None:
    bucket = TokenBucket(rate=2.0, burst=3.0)
    assert bucket.tokens(100.0) == 3.0
    assert [bucket.try_take(100.0) for _ in range(4)] == [True, True, True, False]
    assert bucket.next_token_at(100.0) == 100.5
    assert not bucket.try_take(100.4)
    assert bucket.try_take(100.5)
    assert bucket.tokens(1000.0) == 3.0


def test_token_bucket_float_rounding_still_makes_a_token() -> None:
    bucket = TokenBucket(rate=10.0, burst=1.0)
    now = 0.0
    assert bucket.try_take(now)
    for _ in range(50):
        now = bucket.next_token_at(now)
        assert bucket.try_take(now)


def test_token_bucket_clock_going_back_mints_nothing() -> None:
    bucket = TokenBucket(rate=1.0, burst=1.0)
    assert bucket.try_take(100.0)
    assert not bucket.try_take(50.0)
    assert not bucket.try_take(100.5)
    assert bucket.try_take(101.0)


def test_token_bucket_rejects_bad_parameters() -> None:
    with pytest.raises(ValueError):
        TokenBucket(rate=0.0, burst=1.0)
    with pytest.raises(ValueError):
        TokenBucket(rate=1.0, burst=0.5)


@settings(max_examples=150, deadline=None)
@given(
    rate=st.floats(0.1, 50.0),
    burst=st.integers(1, 10),
    steps=st.lists(st.tuples(st.floats(0.0, 2.0), st.integers(0, 5)), min_size=1, max_size=60),
)
def test_bucket_never_exceeds_rate_times_elapsed_plus_burst(
    rate: float, burst: int, steps: list[tuple[float, int]]
) -> None:
    bucket = TokenBucket(rate, float(burst))
    t0 = now = 0.0
    granted = 0
    for dt, attempts in steps:
        now += dt
        granted += sum(bucket.try_take(now) for _ in range(attempts))
        assert granted <= rate * (now - t0) + burst + 1e-6


# -- Budget: basics -------------------------------------------------------------------------


def test_budget_grants_up_to_tokens_and_reports_next_grant() -> None:
    budget = Budget("vendor", "1/s", burst=2)
    assert budget.next_grant_at(0.0) is None
    for name in "abc":
        budget.request(name, Lane.LIVE, 1.0, 0.0)
    assert budget.grant(0.0) == ["a", "b"]
    assert budget.next_grant_at(0.0) == 1.0
    assert budget.grant(0.5) == []
    assert budget.grant(1.0) == ["c"]
    assert budget.next_grant_at(1.0) is None
    assert budget.waiting() == []


def test_request_is_idempotent_per_lane_and_lanes_are_separate() -> None:
    budget = Budget("vendor", 100, burst=10)
    budget.request("p/a", Lane.LIVE, 1.0, 0.0)
    budget.request("p/a", Lane.LIVE, 1.0, 1.0)
    budget.request("p/a", Lane.BACKFILL, 1.0, 1.0)
    assert [(r.requester, r.lane, r.since) for r in budget.waiting()] == [
        ("p/a", Lane.LIVE, 0.0),
        ("p/a", Lane.BACKFILL, 1.0),
    ]
    assert budget.grant_lanes(1.0) == [Grant("p/a", Lane.LIVE), Grant("p/a", Lane.BACKFILL)]


def test_cancel_and_forget() -> None:
    budget = Budget("vendor", 1, burst=1)
    budget.request("a", Lane.LIVE, 1.0, 0.0)
    budget.request("a", Lane.BACKFILL, 1.0, 0.0)
    budget.request("b", Lane.LIVE, 1.0, 0.0)
    budget.cancel("a", Lane.LIVE)
    assert [(r.requester, r.lane) for r in budget.waiting()] == [
        ("a", Lane.BACKFILL),
        ("b", Lane.LIVE),
    ]
    budget.cancel("a")
    budget.cancel("nobody")
    budget.forget("b")
    assert budget.waiting() == []
    assert budget.next_grant_at(0.0) is None


def test_budget_rejects_bad_parameters() -> None:
    with pytest.raises(ValueError, match="fairness"):
        Budget("vendor", "1/s", fairness="random")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="rate"):
        Budget("vendor", "fast")
    with pytest.raises(ValueError, match="weight"):
        Budget("vendor", "1/s").request("a", Lane.LIVE, 0.0, 0.0)


def test_lane_priority_beats_arrival_order() -> None:
    budget = Budget("vendor", "1/s", burst=1)
    budget.request("t1", Lane.BACKFILL, 1.0, 0.0)
    budget.request("t2", Lane.RECONCILE, 1.0, 0.0)
    budget.request("t3", Lane.LIVE, 1.0, 0.0)
    assert budget.grant(0.0) == ["t3"]
    assert budget.grant(1.0) == ["t2"]
    assert budget.grant(2.0) == ["t1"]


def test_round_robin_serves_least_recently_served() -> None:
    budget = Budget("vendor", "1/s", burst=1)
    for name in ["a", "b"]:
        budget.request(name, Lane.LIVE, 1.0, 0.0)
    assert budget.grant(0.0) == ["a"]
    budget.request("a", Lane.LIVE, 1.0, 0.5)
    assert budget.grant(1.0) == ["b"]
    budget.request("b", Lane.LIVE, 1.0, 1.5)
    budget.request("c", Lane.LIVE, 1.0, 1.5)
    # c was never served, a was served before b
    assert budget.grant(2.0) == ["c"]
    assert budget.grant(3.0) == ["a"]
    assert budget.grant(4.0) == ["b"]


# -- Budget: properties ---------------------------------------------------------------------

requesters = st.sampled_from([f"p/t{i}" for i in range(6)])
lanes = st.sampled_from(list(Lane))
actions = st.one_of(
    st.tuples(st.just("request"), requesters, lanes, st.floats(0.1, 5.0)),
    st.tuples(st.just("grant"), st.just(""), lanes, st.floats(0.0, 1.0)),
    st.tuples(st.just("cancel"), requesters, lanes, st.just(0.0)),
)


@settings(max_examples=150, deadline=None)
@given(
    rate=st.floats(0.2, 20.0),
    burst=st.integers(1, 5),
    fairness=st.sampled_from(["round-robin", "weighted"]),
    timeline=st.lists(actions, min_size=1, max_size=80),
)
def test_budget_never_exceeds_rate_and_respects_lanes(
    rate: float, burst: int, fairness: str, timeline: list[tuple[str, str, Lane, float]]
) -> None:
    budget = Budget("vendor", rate, burst=burst, fairness=fairness)  # type: ignore[arg-type]
    t0 = now = 0.0
    total = 0
    for action, requester, lane, amount in timeline:
        if action == "request":
            budget.request(requester, lane, amount, now)
        elif action == "cancel":
            budget.cancel(requester, lane)
        else:
            now += amount
            before = budget.waiting()
            grants = budget.grant_lanes(now)
            total += len(grants)
            assert total <= rate * (now - t0) + burst + 1e-6
            # every grant is of the best lane still waiting at that moment
            pending = [r.lane for r in before]
            for grant in grants:
                assert grant.lane.priority == max(lane.priority for lane in pending)
                pending.remove(grant.lane)
            next_at = budget.next_grant_at(now)
            assert (next_at is None) == (budget.waiting() == [])
            assert next_at is None or next_at > now


@settings(max_examples=100, deadline=None)
@given(
    n=st.integers(1, 8),
    lane=lanes,
    dts=st.lists(st.floats(0.0, 3.0), min_size=1, max_size=60),
    burst=st.integers(1, 4),
)
def test_round_robin_serves_every_waiter_within_n_grants(
    n: int, lane: Lane, dts: list[float], burst: int
) -> None:
    budget = Budget("vendor", "1/s", burst=burst)
    names = [f"p/t{i}" for i in range(n)]
    others_served = dict.fromkeys(names, 0)
    now = 0.0
    for name in names:
        budget.request(name, lane, 1.0, now)
    for dt in dts:
        now += dt
        for granted in budget.grant(now):
            for name in names:
                others_served[name] += name != granted
            assert others_served[granted] <= n - 1
            others_served[granted] = 0
            budget.request(granted, lane, 1.0, now)  # always wants more
        assert all(count <= n - 1 for count in others_served.values())


def shares(weights: dict[str, float], grants: int, lane: Lane = Lane.LIVE) -> Counter[str]:
    budget = Budget("vendor", "1/s", burst=1, fairness="weighted")
    for name, weight in weights.items():
        budget.request(name, lane, weight, 0.0)
    served: Counter[str] = Counter()
    for i in range(grants):
        for granted in budget.grant(float(i)):
            served[granted] += 1
            budget.request(granted, lane, weights[granted], float(i))
    return served


def test_weighted_shares_one_to_three() -> None:
    served = shares({"p/small": 1.0, "p/big": 3.0}, 400)
    assert sum(served.values()) == 400
    assert served["p/small"] / 400 == pytest.approx(0.25, abs=0.05)


@settings(max_examples=40, deadline=None)
@given(weights=st.lists(st.integers(1, 6), min_size=2, max_size=5))
def test_weighted_shares_are_proportional(weights: list[int]) -> None:
    named = {f"p/t{i}": float(w) for i, w in enumerate(weights)}
    grants = 600
    served = shares(named, grants)
    total_weight = sum(named.values())
    for name, weight in named.items():
        assert served[name] / grants == pytest.approx(weight / total_weight, abs=0.05)


def test_weighted_idle_requester_gets_no_hoarded_credit() -> None:
    budget = Budget("vendor", "1/s", burst=1, fairness="weighted")
    budget.request("busy", Lane.LIVE, 1.0, 0.0)
    for i in range(50):
        assert budget.grant(float(i)) == ["busy"]
        budget.request("busy", Lane.LIVE, 1.0, float(i))
    budget.request("late", Lane.LIVE, 1.0, 50.0)
    served = Counter(g for i in range(50, 70) for g in _grant_and_rerequest(budget, float(i)))
    assert served["late"] == pytest.approx(10, abs=1)


def _grant_and_rerequest(budget: Budget, now: float) -> list[str]:
    granted = budget.grant(now)
    for name in granted:
        budget.request(name, Lane.LIVE, 1.0, now)
    return granted


def test_live_waiter_always_beats_backfill_waiter_under_weights() -> None:
    budget = Budget("vendor", "1/s", burst=1, fairness="weighted")
    budget.request("heavy", Lane.BACKFILL, 100.0, 0.0)
    budget.request("light", Lane.LIVE, 0.01, 0.0)
    assert budget.grant(0.0) == ["light"]


# -- shares across instances: resize and rescale ---------------------------------------------


def test_resize_keeps_tokens_capped_at_the_new_burst_and_never_fills_a_bigger_one() -> None:
    bucket = TokenBucket(rate=2.0, burst=4.0)
    bucket.resize(1.0, 1.5, now=10.0)  # full (4) when first observed, capped at 1.5
    assert bucket.tokens(10.0) == 1.5
    assert bucket.try_take(10.0)
    bucket.resize(2.0, 4.0, now=10.25)  # 0.5 + 0.25 s at 1/s: 0.75, not topped up to 4
    assert bucket.tokens(10.25) == pytest.approx(0.75)
    assert bucket.next_token_at(10.25) == pytest.approx(10.375)  # now at 2/s
    assert bucket.tokens(20.0) == 4.0


def test_resize_to_zero_stops_the_bucket_until_resized_again() -> None:
    bucket = TokenBucket(rate=1.0, burst=2.0)
    bucket.resize(0.0, 0.0, now=0.0)
    assert bucket.tokens(0.0) == 0.0
    assert not bucket.try_take(1000.0)
    assert bucket.next_token_at(1000.0) == math.inf
    bucket.resize(0.5, 1.0, now=1000.0)  # nothing was earned while stopped
    assert not bucket.try_take(1001.0)
    assert bucket.next_token_at(1001.0) == pytest.approx(1002.0)
    assert bucket.try_take(1002.0)


@pytest.mark.parametrize(("rate", "burst"), [(-1.0, 1.0), (1.0, -0.5), (math.inf, 1.0)])
def test_resize_rejects_bad_parameters(rate: float, burst: float) -> None:
    with pytest.raises(ValueError, match="token bucket"):
        TokenBucket(1.0, 1.0).resize(rate, burst, 0.0)


def test_rescale_splits_rate_and_burst_by_the_share() -> None:
    budget = Budget("vendor", "4/s", burst=8)
    assert (budget.share, budget.bucket.rate, budget.bucket.burst) == (1.0, 4.0, 8.0)
    assert budget.rescale(0.25, 0.0)
    assert (budget.share, budget.rate, budget.burst) == (0.25, 4.0, 8.0)  # as configured
    assert (budget.bucket.rate, budget.bucket.burst) == (1.0, 2.0)
    for name in "abcd":
        budget.request(name, Lane.LIVE, 1.0, 0.0)
    assert budget.grant(0.0) == ["a", "b"]  # the burst, 8 x 0.25
    assert budget.next_grant_at(0.0) == 1.0  # 4/s x 0.25
    assert not budget.rescale(0.25, 0.5)  # unchanged: nothing to do


def test_a_sliver_of_a_share_still_holds_one_token() -> None:
    budget = Budget("vendor", "10/s", burst=5)
    budget.rescale(0.01, 0.0)  # 0.05 tokens could never pay for a request
    assert budget.bucket.burst == 1.0
    assert budget.bucket.rate == pytest.approx(0.1)
    budget.request("a", Lane.LIVE, 1.0, 0.0)
    assert budget.grant(0.0) == ["a"]
    budget.request("a", Lane.LIVE, 1.0, 0.0)
    assert budget.next_grant_at(0.0) == pytest.approx(10.0)


def test_share_zero_grants_nothing_and_waiters_resume_when_a_share_comes_back() -> None:
    budget = Budget("vendor", "2/s", burst=2)
    budget.rescale(0.0, 0.0)
    budget.request("a", Lane.LIVE, 1.0, 0.0)
    assert budget.grant(100.0) == []
    assert budget.next_grant_at(100.0) == math.inf
    budget.rescale(0.5, 100.0)
    assert budget.next_grant_at(100.0) == pytest.approx(101.0)  # earned from 0, at 1/s
    assert budget.grant(101.0) == ["a"]
    assert budget.waiting() == []


@pytest.mark.parametrize("share", [-0.1, 1.5, math.nan, True])
def test_rescale_rejects_a_share_outside_zero_to_one(share: float) -> None:
    with pytest.raises(ValueError, match="share"):
        Budget("vendor", "1/s").rescale(share, 0.0)


@settings(max_examples=150, deadline=None)
@given(
    rate=st.floats(0.2, 20.0),
    burst=st.integers(1, 10),
    first=st.floats(0.0, 1.0),
    steps=st.lists(
        st.tuples(
            st.floats(0.0, 2.0),
            st.one_of(st.none(), st.floats(0.0, 1.0)),
            st.integers(0, 4),
            st.integers(0, 4),
        ),
        min_size=1,
        max_size=60,
    ),
)
def test_two_instances_splitting_a_budget_together_stay_within_it(
    rate: float,
    burst: int,
    first: float,
    steps: list[tuple[float, float | None, int, int]],
) -> None:
    """Two instances whose shares add up to 1, rebalanced at random: together they grant at
    most ``rate x elapsed`` plus their first bursts, however the shares move (one budget each
    would allow twice the rate)."""
    a, b = Budget("vendor", rate, burst=burst), Budget("vendor", rate, burst=burst)
    t0 = now = 0.0
    a.rescale(first, now)
    b.rescale(1 - first, now)
    bursts = a.bucket.burst + b.bucket.burst
    assert bursts <= burst + 2
    granted = 0
    for dt, moved, wanted_a, wanted_b in steps:
        now += dt
        if moved is not None:  # a rebalance: keys move from one to the other
            a.rescale(moved, now)
            b.rescale(1 - moved, now)
        for budget, wanted in ((a, wanted_a), (b, wanted_b)):
            for i in range(wanted):
                budget.request(f"p/t{i}", Lane.LIVE, 1.0, now)
            granted += len(budget.grant(now))
        assert granted <= rate * (now - t0) + bursts + 1e-6
