"""``{tenant.key}``: the tenant's own key in every stream (issue 43). A base URL written with
``{partition.key}`` in ``defaults`` breaks the child streams that inherit it, where the key is
``tenant/parent``; ``validate`` says so and names ``{tenant.key}``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.declarative.helpers import API, WHERE
from watukuy import Partition
from watukuy.cli import main
from watukuy.declarative import compile_connector_entry
from watukuy.declarative.streams import template_warnings
from watukuy.declarative.templates import Scope, compile_template

TENANTS = {"static": [{"key": "acme", "data": {}}]}


def connector(base: str, **child: Any) -> dict[str, Any]:
    return {
        "name": "tracker",
        "partitions": TENANTS,
        "defaults": {"request": {"base": f"{API}/v/{base}"}, "records": "data", "identity": "id"},
        "streams": [
            {"name": "projects", "request": {"path": "/projects"}},
            {
                "name": "issues",
                "parent": {"stream": "projects", "key": "id"},
                "request": {"path": "/projects/{parent.key}/issues"},
                **child,
            },
        ],
    }


@pytest.mark.parametrize(
    ("partition", "tenant"),
    [(Partition("acme"), "acme"), (Partition("acme/P1", parents=("P1",)), "acme")],
)
def test_tenant_key_is_the_tenants_own_key_in_a_child_too(
    partition: Partition, tenant: str
) -> None:
    template = compile_template("/v/{tenant.key}", "t", partitioned=True, cursor=False)
    assert template.render(Scope(partition=partition)) == f"/v/{tenant}"


def test_a_child_inheriting_partition_key_in_the_base_is_warned_about() -> None:
    entry = connector("{partition.key}")
    compile_connector_entry(entry, where=WHERE, base_dir=Path("."))  # valid all the same
    (warning,) = template_warnings(entry, WHERE)
    assert "pollers[0].defaults.request.base uses {partition.key}" in warning
    assert "issues" in warning and "projects" not in warning.split("stream(s)")[1].split(" is")[0]
    assert "{tenant.key}" in warning


@pytest.mark.parametrize(
    "entry",
    [
        connector("{tenant.key}"),
        connector("{partition.key}", request={"url": f"{API}/v/acme/issues"}),  # its own URL
        {k: v for k, v in connector("{partition.key}").items() if k != "streams"}
        | {"streams": [{"name": "projects", "request": {"path": "/p"}}]},  # no child at all
    ],
)
def test_no_warning_where_no_child_inherits_it(entry: dict[str, Any]) -> None:
    assert template_warnings(entry, WHERE) == []


def test_validate_prints_the_warning_and_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "kafka": {"bootstrap.servers": "127.0.0.1:1"},
                "pollers": [connector("{partition.key}")],
            }
        )
    )
    assert main(["validate", "--config", str(config)]) == 0
    err = capsys.readouterr().err
    assert "warning: pollers[0].defaults.request.base uses {partition.key}" in err
    assert err.rstrip().endswith("is valid")
