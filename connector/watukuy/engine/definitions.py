"""The pollers an engine is given, checked as they enter: made with ``define_poller()``,
named once, their budgets known, a ``schema`` turned into the check of their items."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from watukuy.core.budget import Budget
from watukuy.core.clock import Clock
from watukuy.core.errors import ConfigError
from watukuy.core.observe import Observer
from watukuy.core.poller import Poller
from watukuy.engine.budgets import BudgetGate, Gate, TenantGate, build_budgets
from watukuy.engine.children import check_parents

__all__ = ["budget_gates", "check_budget_names", "checked_pollers", "prepared", "with_data_schema"]


def checked_pollers(pollers: Iterable[Poller]) -> dict[str, Poller]:
    """The constructor's pollers by name: each made with ``define_poller()`` and named once;
    one with a ``schema`` checks its items against it."""
    by_name: dict[str, Poller] = {}
    for index, poller in enumerate(pollers):
        if not isinstance(poller, Poller):
            raise ConfigError("must be made with define_poller()", f"pollers[{index}]")
        if poller.name in by_name:
            raise ConfigError(f"duplicate poller name '{poller.name}'", f"pollers[{index}]")
        by_name[poller.name] = with_data_schema(poller, f"pollers[{index}].schema")
    check_parents(by_name)
    return by_name


def budget_gates(
    pollers: Mapping[str, Poller],
    budgets: Mapping[str, Any] | None,
    clock: Clock,
    observer: Observer,
) -> dict[str, Gate]:
    """A gate per budget, once every poller's budgets are known to be among them."""
    specs = build_budgets(budgets)
    for poller in pollers.values():
        check_budget_names(poller, specs)
    return {
        name: BudgetGate(spec, clock, observer)
        if isinstance(spec, Budget)
        else TenantGate(spec, clock, observer)
        for name, spec in specs.items()
    }


def check_budget_names(poller: Poller, known: Mapping[str, object]) -> None:
    """A ``ConfigError`` naming the poller's first budget that is not ``known``."""
    for index, name in enumerate(poller.budgets):
        if name not in known:
            where = f"poller '{poller.name}'.budget"
            where += f"[{index}]" if isinstance(poller.budget, tuple) else ""
            raise ConfigError(f"unknown budget '{name}'", where)


def prepared(poller: object, path: str, gates: Mapping[str, object]) -> Poller:
    """A poller given at run time, checked as the constructor checks its list."""
    if not isinstance(poller, Poller):
        raise ConfigError("must be made with define_poller()", path)
    check_budget_names(poller, gates)
    return with_data_schema(poller, f"{path}.schema")


def with_data_schema(poller: Poller, path: str) -> Poller:
    """A poller with a ``schema`` checks each item against it: non-conforming ones are parked."""
    if poller.schema is None or poller.validate is not None:
        return poller
    from watukuy.serde.data import DataSchema  # fastavro only when a poller declares a schema

    return replace(poller, validate=DataSchema.load(poller.schema, path).validate)
