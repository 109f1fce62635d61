"""Budgets per tenant, pure: each tenant's rate, when a bucket may be let go, how a tenant's
bucket is split across instances, a rate's window (``100/15s``), and a poller naming several
budgets."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watukuy.core.budget import Budget, Lane, parse_rate
from watukuy.core.errors import ConfigError
from watukuy.core.poller import Partition, define_poller
from watukuy.core.tenant_budget import TenantBudgetSpec, TenantRate, idle, tenant_shares

pytestmark = pytest.mark.unit

PLAN = TenantRate(lambda partition: partition.data["rate_limit"], "{partition.data.rate_limit}")


def tenant(key: str, **data: Any) -> Partition:
    return Partition(key, {"token": "s3cr3t-t0ken", **data})


# -- rates with a window -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "per_second"),
    [("100/15s", 100 / 15), ("100/15m", 100 / 900), ("100 / 15 min", 100 / 900), ("1/1s", 1.0)],
)
def test_a_rate_may_count_its_window(text: str, per_second: float) -> None:
    assert parse_rate(text) == pytest.approx(per_second)


@pytest.mark.parametrize("text", ["100/0s", "100/15", "100/-15s", "100/15 fortnights"])
def test_a_window_that_is_not_one_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="rate"):
        parse_rate(text)


# -- each tenant's rate ------------------------------------------------------------------------


def test_a_fixed_rate_is_every_tenant_s() -> None:
    spec = TenantBudgetSpec("vendor", 2.0)
    assert spec.fixed
    assert spec.rate_of(tenant("acme")) == 2.0
    budget = spec.budget(2.0)
    assert (budget.rate, budget.burst, budget.fairness) == (2.0, 2.0, "round-robin")


def test_a_tenant_s_rate_comes_from_its_data_and_its_burst_from_its_rate() -> None:
    spec = TenantBudgetSpec("vendor", PLAN)
    assert spec.rate_of(tenant("acme", rate_limit="100/15s")) == pytest.approx(100 / 15)
    assert spec.rate_of(tenant("beta", rate_limit="400/m")) == pytest.approx(400 / 60)
    assert spec.budget(0.5).burst == 1.0  # never below one token
    assert spec.budget(400 / 60).burst == pytest.approx(400 / 60)
    assert TenantBudgetSpec("vendor", PLAN, burst=3).budget(400 / 60).burst == 3


def test_a_tenant_whose_data_gives_no_rate_fails_naming_the_field_and_value_only() -> None:
    spec = TenantBudgetSpec("vendor", PLAN)
    with pytest.raises(ConfigError) as raised:
        spec.rate_of(tenant("acme", rate_limit="lots"))
    assert raised.value.path == "budgets.vendor.rate"
    assert str(raised.value) == (
        "budgets.vendor.rate: '{partition.data.rate_limit}' gave 'lots' for this tenant, which "
        "is not a rate (expected '<count>/<unit>' with unit s, m, h or d, or a number per second)"
    )
    assert "s3cr3t" not in str(raised.value)


def test_a_tenant_whose_data_lacks_the_name_fails_without_showing_its_data() -> None:
    spec = TenantBudgetSpec("vendor", PLAN)
    with pytest.raises(ConfigError) as raised:
        spec.rate_of(tenant("acme"))
    assert raised.value.path == "budgets.vendor.rate"
    assert "no rate for this tenant from '{partition.data.rate_limit}'" in str(raised.value)
    assert "s3cr3t" not in str(raised.value)


# -- letting idle buckets go -------------------------------------------------------------------


def test_a_bucket_is_idle_once_full_again_and_nobody_waits() -> None:
    budget = Budget("vendor", 1.0, 2.0)
    assert idle(budget, 0.0)
    budget.request("a/x", Lane.LIVE, 1.0, 0.0)
    assert not idle(budget, 0.0)  # someone waits
    assert budget.grant(0.0) == ["a/x"]
    assert not idle(budget, 0.5)  # one token short: a new bucket would hand out one more
    assert idle(budget, 1.0)


def test_a_bucket_with_no_share_is_idle() -> None:
    budget = Budget("vendor", 1.0, 2.0)
    budget.rescale(0.0, 0.0)
    assert idle(budget, 0.0)


# -- splitting a tenant's bucket across instances --------------------------------------------


def test_each_tenant_s_share_is_the_part_of_its_keys_held_here() -> None:
    keys = [("acme", True), ("acme", False), ("acme", True), ("beta", False), ("gamma", True)]
    assert tenant_shares(keys) == {"acme": pytest.approx(2 / 3), "beta": 0.0, "gamma": 1.0}


@given(st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 2)), min_size=1))
def test_instances_shares_of_a_tenant_add_up_to_one(keys: list[tuple[str, int]]) -> None:
    """Each key is held by one of three instances: their shares of every tenant add to 1."""
    shares = [tenant_shares((t, owner == i) for t, owner in keys) for i in range(3)]
    for name in {t for t, _ in keys}:
        assert sum(share[name] for share in shares) == pytest.approx(1.0)


# -- a budget's rate changing on the way -----------------------------------------------------


def test_rerate_keeps_the_share_and_mints_no_tokens() -> None:
    budget = Budget("vendor", 10.0, 10.0)
    budget.rescale(0.5, 0.0)  # 5/s, 5 tokens held
    assert budget.rerate(2.0, 2.0, 0.0)
    assert budget.bucket.rate == pytest.approx(1.0)
    assert budget.bucket.tokens(0.0) == pytest.approx(1.0)  # capped at the new burst x share
    assert not budget.rerate(2.0, 2.0, 0.0)
    assert budget.rerate(20.0, 20.0, 0.0)
    assert budget.bucket.tokens(0.0) == pytest.approx(1.0)  # a larger burst is earned
    assert budget.bucket.tokens(1.0) == pytest.approx(10.0)


# -- a poller naming several budgets ----------------------------------------------------------


def poller(**options: Any) -> Any:
    return define_poller(name="p", fetch=lambda ctx: {}, identity=lambda i: i, **options)


def test_a_poller_names_none_one_or_several_budgets() -> None:
    assert poller().budgets == ()
    assert poller(budget="vendor").budgets == ("vendor",)
    assert poller(budget="vendor").budget == "vendor"
    assert poller(budget=["vendor", "reports"]).budgets == ("vendor", "reports")


@pytest.mark.parametrize(
    ("budget", "path"),
    [
        ([], "poller 'p'.budget"),
        (["a", "a"], "poller 'p'.budget[1]"),
        (["a", ""], "poller 'p'.budget[1]"),
    ],
)
def test_a_bad_list_of_budgets_names_its_entry(budget: Any, path: str) -> None:
    with pytest.raises(ConfigError) as raised:
        poller(budget=budget)
    assert raised.value.path == path
