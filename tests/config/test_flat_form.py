"""Connect's config form (CONTRACT.md, "Connect's config form"): a poller config as a flat map of
string to string, and back.

The nested configs compared are the pollers of ``config/*.yaml`` as JSON (what REST carries: a
JSON object's keys are strings, so YAML's ``on_status: {404: fail}`` is ``{"404": "fail"}``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from watukuy.core.errors import ConfigError
from watukuy.options.flat import flatten, unflatten

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def _declarative_pollers() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted((REPO / "config").glob("*.yaml")):
        for entry in yaml.safe_load(path.read_text())["pollers"]:
            if "python" not in entry:
                found.append((f"{path.name}:{entry['name']}", json.loads(json.dumps(entry))))
    return found


POLLERS = _declarative_pollers()
IDS = [name for name, _ in POLLERS]

INVOICES = dict(POLLERS)["invoices.yaml:invoices"]


def test_every_example_file_with_declarative_pollers_is_covered() -> None:
    files = {name.split(":")[0] for name in IDS}
    assert {"invoices.yaml", "compose.yaml", "shared-budget.yaml"} <= files


@pytest.mark.parametrize("nested", [entry for _, entry in POLLERS], ids=IDS)
def test_nested_to_flat_to_nested_is_the_identity(nested: dict[str, Any]) -> None:
    flat = flatten(nested, "http")
    assert unflatten(flat) == ("http", nested)


@pytest.mark.parametrize("nested", [entry for _, entry in POLLERS], ids=IDS)
def test_every_flat_value_is_a_string(nested: dict[str, Any]) -> None:
    flat = flatten(nested, "http")
    assert all(isinstance(key, str) and isinstance(value, str) for key, value in flat.items())
    assert flat["connector.class"] == "http"


def test_settings_are_dotted_paths_and_scalars_are_their_json_text() -> None:
    flat = flatten(
        {
            "request": {"url": "https://x/{partition.key}", "query": {"limit": 100}},
            "paginate": {"next_token": {"path": "next", "param": "cursor"}},
            "schedule": {"min": "1s"},
            "max_pages": 7,
            "budget_weight": 0.5,
            "cursor": {"none": True},
            "version": None,
            "partitions": {"static": [{"key": "a", "data": {"x": 1}}]},
            "on_status": {"4xx": "ignore"},
        },
        "http",
    )
    assert flat == {
        "connector.class": "http",
        "request.url": "https://x/{partition.key}",
        "request.query": '{"limit":100}',
        "paginate.next_token.path": "next",
        "paginate.next_token.param": "cursor",
        "schedule.min": "1s",
        "max_pages": "7",
        "budget_weight": "0.5",
        "cursor.none": "true",
        "version": "null",
        "partitions.static": '[{"key":"a","data":{"x":1}}]',
        "on_status.4xx": "ignore",
    }


def test_a_map_whose_keys_contain_dots_is_one_json_key() -> None:
    nested = {"request": {"url": "https://x", "headers": {"X.Trace": "on"}}}
    flat = flatten(nested, "http")
    assert flat["request.headers"] == '{"X.Trace":"on"}'
    assert unflatten(flat) == ("http", nested)


def test_values_are_typed_by_their_key() -> None:
    _, nested = unflatten(
        {
            "connector.class": "http",
            "max_pages": "100",
            "budget_weight": "2.5",
            "paginate.link_header": "true",
            "identity": "100",
            "request.body": '{"since": "{cursor}"}',
            "request.query.limit": "100",
        }
    )
    assert nested == {
        "max_pages": 100,
        "budget_weight": 2.5,
        "paginate": {"link_header": True},
        "identity": "100",
        "request": {"body": {"since": "{cursor}"}, "query": {"limit": "100"}},
    }


def test_values_sent_as_numbers_are_taken_as_they_are() -> None:
    _, nested = unflatten(
        {"connector.class": "http", "max_pages": 100, "cursor.none": True, "identity": "id"}
    )
    assert nested == {"max_pages": 100, "cursor": {"none": True}, "identity": "id"}


def test_a_dotted_key_refines_a_subtree_given_as_json() -> None:
    flat = flatten(INVOICES, "http")
    flat["request.query.page_size"] = "50"
    _, nested = unflatten(flat)
    assert nested["request"]["query"] == {"limit": 100, "page_size": "50"}


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("schedule.min", "2s"),
        ("max_pages", "9"),
        ("request.headers.Accept", "text/csv"),
        ("request.auth.bearer", "${env:OTHER_TOKEN}"),
        ("on_status.404", "ignore"),
        ("request.query", '{"limit":5}'),
    ],
)
def test_a_patch_of_one_flat_key_changes_that_setting_alone(key: str, value: str) -> None:
    flat = flatten(INVOICES, "http")
    _, patched = unflatten({**flat, key: value})
    expected = json.loads(json.dumps(INVOICES))
    *parents, last = key.split(".")
    here = expected
    for name in parents:
        here = here[name]
    here[last] = json.loads(value) if key in {"max_pages", "request.query"} else value
    assert patched == expected


@pytest.mark.parametrize(
    ("key", "hint"),
    [
        ("schedule.mni", "did you mean 'schedule.min'?"),
        ("request.urll", "did you mean 'request.url'?"),
        ("max_page", "did you mean 'max_pages'?"),
        ("request.body.since", "unknown key"),
    ],
)
def test_an_unknown_flat_key_is_an_error_naming_it(key: str, hint: str) -> None:
    with pytest.raises(ConfigError) as caught:
        unflatten({**flatten(INVOICES, "http"), key: "1s"})
    assert caught.value.path == key
    assert hint in str(caught.value)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("max_pages", "many"),
        ("max_pages", "1.5"),
        ("max_pages", "true"),
        ("budget_weight", "heavy"),
        ("cursor.none", "yes"),
        ("partitions.static", '{"key": "a"}'),
        ("request.query", "[1, 2]"),
        ("request.body", "{not json"),
    ],
)
def test_a_mistyped_value_is_an_error_naming_the_key(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        unflatten({"connector.class": "http", key: value})
    assert caught.value.path == key
    assert repr(value) in str(caught.value)


@pytest.mark.parametrize("connector_class", [None, "jdbc"])
def test_the_connector_class_is_http_or_python(connector_class: str | None) -> None:
    flat = {"request.url": "https://x"}
    if connector_class is not None:
        flat["connector.class"] = connector_class
    with pytest.raises(ConfigError) as caught:
        unflatten(flat)
    assert caught.value.path == "connector.class"


def test_a_setting_under_a_scalar_is_an_error_naming_the_scalar() -> None:
    with pytest.raises(ConfigError) as caught:
        unflatten({"connector.class": "http", "request": 5, "request.url": "https://x"})
    assert caught.value.path == "request"
    assert "'request.url' cannot be set under it" in str(caught.value)


def test_a_null_subtree_is_refined_like_an_absent_one() -> None:
    _, nested = unflatten({"connector.class": "http", "request": "null", "request.url": "u"})
    assert nested == {"request": {"url": "u"}}


def test_a_python_connector_is_its_reference() -> None:
    flat = flatten({"python": "integration.pollers:invoices"}, "python")
    assert flat == {"connector.class": "python", "python": "integration.pollers:invoices"}
    assert unflatten(flat) == ("python", {"python": "integration.pollers:invoices"})
    with pytest.raises(ConfigError) as caught:
        unflatten({**flat, "request.url": "https://x"})
    assert caught.value.path == "request.url"


def test_secrets_stay_placeholders_both_ways() -> None:
    nested = {
        "request": {
            "url": "${env:VENDOR_URL}/items",
            "auth": {"basic": {"username": "${env:USER}", "password": "${file:/run/s:pw}"}},
            "headers": {"X-Api-Key": "${env:KEY}"},
        }
    }
    flat = flatten(nested, "http")
    assert flat["request.auth.basic.password"] == "${file:/run/s:pw}"
    assert flat["request.headers.X-Api-Key"] == "${env:KEY}"
    assert flat["request.url"] == "${env:VENDOR_URL}/items"
    assert unflatten(flat) == ("http", nested)


# -- generated configs --------------------------------------------------------------------------

_TEXT = st.text(max_size=12)
_NAME = st.text(st.characters(blacklist_characters=".", blacklist_categories=("Cs",)), min_size=1)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=6,
)
_SETTINGS = {
    "request.url": _TEXT,
    "request.method": st.sampled_from(["GET", "POST"]),
    "request.query": st.dictionaries(st.text(min_size=1, max_size=5), _TEXT | st.integers()),
    "request.headers": st.dictionaries(_NAME, _TEXT, max_size=3),
    "request.body": _JSON,
    "request.auth.bearer": _TEXT,
    "records": _TEXT,
    "identity": _TEXT,
    "paginate.page.start": st.integers(),
    "paginate.link_header": st.booleans(),
    "cursor.timestamp.lookback": _TEXT,
    "on_status": st.dictionaries(_NAME, _TEXT, max_size=3),
    "schedule.min": _TEXT,
    "budget_weight": st.integers() | st.floats(allow_nan=False, allow_infinity=False),
    "max_pages": st.integers(),
    "partitions.static": st.lists(st.fixed_dictionaries({"key": _TEXT, "data": _JSON})),
    "schema": _TEXT.filter(lambda text: not text.lstrip().startswith("{"))
    | st.dictionaries(_TEXT, _JSON, max_size=3),
}


@st.composite
def _configs(draw: st.DrawFn) -> dict[str, Any]:
    chosen = draw(st.lists(st.sampled_from(sorted(_SETTINGS)), unique=True, max_size=8))
    nested: dict[str, Any] = {}
    for path in chosen:
        *parents, last = path.split(".")
        here = nested
        for name in parents:
            here = here.setdefault(name, {})
        here[last] = draw(_SETTINGS[path])
    return nested


@settings(max_examples=200, deadline=None)
@given(_configs())
def test_generated_configs_round_trip_through_strings(nested: dict[str, Any]) -> None:
    flat = flatten(nested, "http")
    assert all(isinstance(value, str) for value in flat.values())
    assert unflatten(flat) == ("http", nested)
