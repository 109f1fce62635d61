"""A positive number of a poller (``budget_weight``, ``circuit.multiplier``) must be finite:
YAML's ``.inf`` and JSON's ``1e999`` passed the check and failed later, as a ValueError from
the circuit (``watukuy-source validate`` exited 1 with its text) or as an infinite weight in a
budget. Found while fuzzing REST configs for the fault suite's scenario 9."""

from __future__ import annotations

import math
from typing import Any

import pytest

from watukuy import define_poller
from watukuy.core.errors import ConfigError


@pytest.mark.parametrize(
    ("field", "value", "path"),
    [
        ("budget_weight", math.inf, "poller 'invoices'.budget_weight"),
        ("circuit", {"multiplier": math.inf}, "poller 'invoices'.circuit.multiplier"),
    ],
)
def test_an_infinite_number_is_a_config_error(field: str, value: Any, path: str) -> None:
    with pytest.raises(ConfigError) as raised:
        define_poller(
            name="invoices",
            fetch=lambda ctx: None,
            identity=lambda item: item["id"],
            **{field: value},
        )
    assert raised.value.path == path
    assert str(raised.value) == f"{path}: must be a finite number, got inf"
