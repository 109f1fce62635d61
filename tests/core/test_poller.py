from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from watukuy.core.errors import ConfigError
from watukuy.core.poller import CursorSpec, Poller, define_poller

pytestmark = pytest.mark.unit


def make(**overrides: Any) -> Poller:
    fields: dict[str, Any] = {
        "name": "invoices",
        "fetch": lambda ctx: None,
        "identity": lambda i: i["id"],
        "version": lambda i: i["v"],
    }
    fields.update(overrides)
    return define_poller(**fields)


def config_error(**overrides: Any) -> ConfigError:
    with pytest.raises(ConfigError) as raised:
        make(**overrides)
    return raised.value


def test_defaults() -> None:
    poller = make()
    assert poller.name == "invoices"
    assert poller.schedule.min == 30.0
    assert poller.schedule.max == 900.0
    assert poller.partitions_refresh == 300.0
    assert poller.partitions is None
    assert poller.partitioned is False
    assert poller.cursor == CursorSpec(strategy="token", initial=None)
    assert poller.retain == 30 * 86400.0
    assert poller.schema_version == 1
    assert poller.budget is None
    assert poller.budget_weight == 1.0
    assert poller.reconcile is None


def test_partitioned_when_partitions_given() -> None:
    poller = make(partitions=lambda: [{"key": "t_1"}])
    assert poller.partitioned is True


def test_values_are_parsed() -> None:
    poller = make(
        schedule={"min": "1s", "max": "1h", "increase": "10s", "decrease_factor": 0.25},
        partitions_refresh=timedelta(minutes=1),
        retain="7d",
        reconcile="6h",
        cursor={"strategy": "timestamp", "field": "updated_at", "lookback": "5m", "initial": 0},
        budget="vendor",
        budget_weight=2.5,
        schema_version=3,
        topic="my.events",
    )
    assert (poller.schedule.min, poller.schedule.max) == (1.0, 3600.0)
    assert poller.schedule.increase == 10.0
    assert poller.schedule.decrease_factor == 0.25
    assert poller.partitions_refresh == 60.0
    assert poller.retain == 7 * 86400.0
    assert poller.reconcile == 6 * 3600.0
    assert poller.cursor == CursorSpec(
        strategy="timestamp", initial=0, field="updated_at", lookback=300.0
    )
    assert poller.budget == "vendor"
    assert poller.budget_weight == 2.5
    assert poller.schema_version == 3
    assert poller.topic == "my.events"


def test_schedule_max_defaults_to_at_least_min() -> None:
    assert make(schedule={"min": "1h"}).schedule.max == 3600.0
    assert make(schedule={"min": "10s"}).schedule.max == 900.0


@pytest.mark.parametrize("name", ["bad name!", "", "a/b", "ümlaut", None, 42])
def test_bad_name(name: object) -> None:
    error = config_error(name=name)
    assert error.path == "name"
    assert str(error).startswith("name:")


@pytest.mark.parametrize("name", ["invoices", "a.b-c_D9"])
def test_good_names(name: str) -> None:
    assert make(name=name).name == name


@pytest.mark.parametrize("field", ["fetch", "identity", "version", "fingerprint", "partitions"])
def test_non_callable_functions_are_named(field: str) -> None:
    error = config_error(**{field: "not a function"})
    assert error.path == f"poller 'invoices'.{field}"
    assert "callable" in str(error)


@pytest.mark.parametrize(
    ("overrides", "path_end"),
    [
        ({"schedule": {"min": "5x"}}, "schedule.min"),
        ({"schedule": {"max": "soon"}}, "schedule.max"),
        ({"schedule": {"min": "1m", "max": "30s"}}, "schedule.min"),
        ({"schedule": {"increase": "0s"}}, "schedule.increase"),
        ({"schedule": {"decrease_factor": 0}}, "schedule.decrease_factor"),
        ({"schedule": {"decrease_factor": 1.5}}, "schedule.decrease_factor"),
        ({"schedule": {"min": "30s", "every": "1m"}}, "schedule"),
        ({"schedule": "30s"}, "schedule"),
        ({"partitions_refresh": "often"}, "partitions_refresh"),
        ({"partitions_refresh": -1}, "partitions_refresh"),
        ({"retain": "inf"}, "retain"),
        ({"retain": None}, "retain"),
        ({"reconcile": "5x"}, "reconcile"),
        ({"fetch_timeout": 0}, "fetch_timeout"),
        ({"cursor": {"strategy": "offset"}}, "cursor.strategy"),
        ({"cursor": {"strategy": "timestamp"}}, "cursor.field"),
        ({"cursor": {"strategy": "timestamp", "field": ""}}, "cursor.field"),
        ({"cursor": {"strategy": "token", "start": 1}}, "cursor"),
        ({"cursor": {"strategy": "timestamp", "field": "t", "lookback": "5x"}}, "cursor.lookback"),
        ({"cursor": ["token"]}, "cursor"),
        ({"budget_weight": 0}, "budget_weight"),
        ({"budget_weight": -1}, "budget_weight"),
        ({"budget_weight": True}, "budget_weight"),
        ({"budget_weight": "1"}, "budget_weight"),
        ({"budget": ""}, "budget"),
        ({"budget": 5}, "budget"),
        ({"schema_version": 0}, "schema_version"),
        ({"schema_version": 1.5}, "schema_version"),
        ({"max_pages": 0}, "max_pages"),
        ({"topic": "bad topic"}, "topic"),
        ({"circuit": {"failure_threshold": 0}}, "circuit.failure_threshold"),
        ({"circuit": {"cooldown": "5x"}}, "circuit.cooldown"),
        ({"circuit": {"cooldown": "1m", "max_cooldown": "30s"}}, "circuit.max_cooldown"),
        ({"circuit": {"multiplier": 0.5}}, "circuit.multiplier"),
        ({"circuit": {"reset": 1}}, "circuit"),
        ({"handler": {"attempts": 0}}, "handler.attempts"),
        ({"handler": {"tries": 3}}, "handler"),
    ],
)
def test_every_validation_names_the_field(overrides: dict[str, Any], path_end: str) -> None:
    error = config_error(**overrides)
    assert error.path is not None
    assert error.path == f"poller 'invoices'.{path_end}"
    assert error.path in str(error)


def test_unknown_key_is_named_in_the_message() -> None:
    assert "'every'" in str(config_error(schedule={"every": "1m"}))
    assert "'start'" in str(config_error(cursor={"start": 1}))


def test_unknown_strategy_lists_the_known_ones() -> None:
    message = str(config_error(cursor={"strategy": "offset"}))
    assert "'offset'" in message
    for known in ("token", "timestamp", "none"):
        assert known in message


def test_bad_max_cooldown_names_the_field() -> None:
    error = config_error(circuit={"max_cooldown": "5x"})
    assert error.path == "poller 'invoices'.circuit.max_cooldown"


def test_cursor_initial_and_none_strategy_kept() -> None:
    poller = make(cursor={"strategy": "none", "initial": "page-1"})
    assert poller.cursor.strategy == "none"
    assert poller.cursor.initial == "page-1"
    assert poller.cursor.lookback == 0.0


def test_version_is_optional() -> None:
    assert make(version=None).version is None
