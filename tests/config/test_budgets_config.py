"""Budgets per tenant and several budgets per stream, as a user writes them: the runner's
YAML, a connector's ``streams`` and the flat Connect form (issue 44)."""

from __future__ import annotations

from typing import Any

import pytest

from watukuy.config import parse_config
from watukuy.config.budgets import engine_budgets
from watukuy.core.errors import ConfigError
from watukuy.core.poller import Partition
from watukuy.core.tenant_budget import TenantRate
from watukuy.options.flat import flatten, unflatten

pytestmark = pytest.mark.unit

BUDGETS = {
    "vendor": {"rate": "{partition.data.rate_limit}/15s", "per": "tenant"},
    "reports": {"rate": "100/15m", "per": "tenant"},
}


def harvest(reports_budget: Any) -> dict[str, Any]:
    return {
        "name": "harvest",
        "partitions": {"static": [{"key": "acme", "data": {"rate_limit": 100}}]},
        "defaults": {
            "request": {"base": "http://127.0.0.1:9/{partition.key}"},
            "records": "data",
            "identity": "id",
            "budget": "vendor",
        },
        "streams": [
            {"name": "projects", "request": {"path": "projects"}},
            {"name": "reports", "request": {"path": "reports"}, "budget": reports_budget},
        ],
    }


def runner_config(*entries: Any, **sections: Any) -> dict[str, Any]:
    return {
        "kafka": {"bootstrap.servers": "127.0.0.1:9092"},
        "runner": {"id": "runner-1"},
        "pollers": list(entries),
        **sections,
    }


def test_a_stream_names_several_budgets_and_the_others_keep_the_default() -> None:
    cfg = parse_config(runner_config(harvest(["vendor", "reports"]), budgets=BUDGETS))
    by_name = {poller.name: poller for poller in cfg.pollers}
    assert by_name["harvest.projects"].budgets == ("vendor",)
    assert by_name["harvest.reports"].budgets == ("vendor", "reports")


def test_an_unknown_budget_in_a_list_is_named() -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(runner_config(harvest(["vendor", "report"]), budgets=BUDGETS))
    assert raised.value.path == "pollers[0]"
    assert "uses budget 'report', which is not under budgets (defined: reports, vendor)" in str(
        raised.value
    )


@pytest.mark.parametrize(
    ("budget", "path", "words"),
    [
        ([], "budget", "must be a budget name or a list of them, got []"),
        (["vendor", "vendor"], "budget[1]", "budget 'vendor' is named twice"),
        (["vendor", 5], "budget[1]", "must be a budget name, got 5"),
    ],
)
def test_a_bad_budget_list_is_refused_with_its_field(budget: Any, path: str, words: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(runner_config(harvest(budget), budgets=BUDGETS))
    assert raised.value.path == f"pollers[0].streams[1].{path}"
    assert str(raised.value) == f"pollers[0].streams[1].{path}: {words}"


def test_the_flat_form_carries_a_budget_list_both_ways() -> None:
    nested = {"request": {"url": "http://127.0.0.1:9/t"}, "identity": "id"}
    flat = flatten({**nested, "budget": ["vendor", "reports"]}, "http")
    assert flat["budget"] == '["vendor","reports"]'
    assert unflatten(flat) == ("http", {**nested, "budget": ["vendor", "reports"]})
    one = flatten({**nested, "budget": "vendor"}, "http")
    assert one["budget"] == "vendor"
    assert unflatten(one)[1]["budget"] == "vendor"


def test_the_engine_gets_each_tenant_s_rate_from_the_template() -> None:
    budgets = engine_budgets(BUDGETS)
    rate = budgets["vendor"]["rate"]
    assert isinstance(rate, TenantRate)
    assert rate.shown == "{partition.data.rate_limit}/15s"
    assert rate.of(Partition("acme", {"rate_limit": 100, "token": "t0ps3cret"})) == "100/15s"
    assert budgets["reports"] == BUDGETS["reports"]  # a fixed rate as it is


def test_a_single_placeholder_keeps_the_value_s_type() -> None:
    budgets = engine_budgets({"v": {"rate": "{partition.data.plan.rate}", "per": "tenant"}})
    rate = budgets["v"]["rate"]
    assert rate.of(Partition("acme", {"plan": {"rate": 5}})) == 5
    assert rate.of(Partition("acme", {"plan": {"rate": "300/m"}})) == "300/m"
