"""``parent.poll`` of a child stream: ``schedule`` (the default) or ``on_change``; anything else
is a ``ConfigError`` naming ``...parent.poll``; it reaches the compiled poller, the flat Connect
form carries it, and the reference documents it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.declarative.helpers import WHERE
from watukuy import ConfigError, Poller
from watukuy.declarative import compile_connector_entry
from watukuy.options.declarative import key_doc
from watukuy.options.flat import flatten, unflatten

TENANTS = {"static": [{"key": "acme", "data": {"slug": "acme"}}]}


def desk(poll: Any = None) -> dict[str, Any]:
    parent: dict[str, Any] = {"stream": "tickets", "key": "id"}
    if poll is not None:
        parent["poll"] = poll
    return {
        "name": "desk",
        "partitions": TENANTS,
        "defaults": {
            "request": {"base": "http://vendor.test/{tenant.key}/"},
            "records": "data",
            "identity": "id",
        },
        "streams": [
            {"name": "tickets", "request": {"path": "/tickets"}},
            {
                "name": "comments",
                "parent": parent,
                "request": {"path": "/tickets/{parent.key}/comments"},
            },
        ],
    }


def compiled(entry: dict[str, Any]) -> list[Poller]:
    return compile_connector_entry(entry, where=WHERE, base_dir=Path("."))


def child_of(entry: dict[str, Any]) -> Poller:
    return next(p for p in compiled(entry) if p.name == "desk.comments")


def test_on_change_reaches_the_child_poller_and_schedule_is_the_default() -> None:
    spec = child_of(desk("on_change")).parent
    assert spec is not None and spec.on_change and spec.poll == "on_change"
    spec = child_of(desk()).parent
    assert spec is not None and not spec.on_change and spec.poll == "schedule"
    spec = child_of(desk("schedule")).parent
    assert spec is not None and spec.poll == "schedule"


@pytest.mark.parametrize("bad", ["sometimes", "ON_CHANGE", 1, True, ["on_change"]])
def test_anything_else_is_refused_at_its_path(bad: Any) -> None:
    with pytest.raises(ConfigError) as caught:
        compiled(desk(bad))
    assert caught.value.path == "pollers[0].streams[1].parent.poll"
    assert "schedule, on_change" in str(caught.value)


def test_the_flat_form_carries_it() -> None:
    entry = desk("on_change")
    flat = flatten(entry, "http")
    assert '"poll":"on_change"' in flat["streams"].replace(" ", "")
    assert unflatten(flat) == ("http", entry)
    spec = child_of(unflatten(flat)[1]).parent
    assert spec is not None and spec.on_change


def test_the_reference_documents_it() -> None:
    doc = key_doc("parent.poll")
    assert doc.default == "schedule" and "on_change" in doc.doc
    text = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text()
    assert "| `parent.poll` |" in text
