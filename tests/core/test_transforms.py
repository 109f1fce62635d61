"""Transforms as pure functions: filters, the fixed order, select's nesting, masking, set's
templates, and the ConfigErrors of a bad transform with the path of the bad field."""

from __future__ import annotations

import copy
import hashlib
import hmac
import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watukuy.core.errors import ConfigError
from watukuy.core.filters import compile_filter
from watukuy.core.transforms import STEPS, TransformContext, compile_transform

pytestmark = pytest.mark.unit

CONTEXT = TransformContext("acme")
ISSUE = {
    "id": 7,
    "title": "Printer on fire",
    "status": "open",
    "spam": False,
    "reporter": {"email": "ada@example.com", "internal_note": "VIP", "name": "Ada"},
    "updated_at": "2024-05-01T10:00:00Z",
}
KEY = b"pii-key"


def digest(text: str, key: bytes = KEY) -> str:
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


# -- filters -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "matches"),
    [
        ({"path": "status", "equals": "open"}, True),
        ({"path": "status", "equals": "closed"}, False),
        ({"path": "status", "in": ["open", "pending"]}, True),
        ({"path": "id", "in": [1, 7]}, True),
        ({"path": "spam", "equals": 0}, False),  # JSON equality: false is not 0
        ({"path": "reporter.name", "exists": True}, True),
        ({"path": "reporter.phone", "exists": True}, False),
        ({"path": "reporter.phone", "exists": False}, True),
        ({"path": "reporter.email", "matches": r".*@example\.com"}, True),
        ({"path": "reporter.email", "matches": "example"}, False),  # a full match only
        ({"path": "id", "matches": "7"}, False),  # not a string: no match
        ({"path": "missing", "equals": None}, False),  # a missing path does not match
        ({"path": "missing.deeper", "in": ["x"]}, False),
        ({"all": [{"path": "status", "equals": "open"}, {"path": "spam", "equals": False}]}, True),
        ({"all": [{"path": "status", "equals": "open"}, {"path": "spam", "equals": True}]}, False),
        ({"any": [{"path": "status", "equals": "done"}, {"path": "id", "equals": 7}]}, True),
        ({"not": {"path": "spam", "equals": True}}, True),
        ({"not": {"path": "missing", "equals": 1}}, True),
    ],
)
def test_a_filter_matches_as_documented(spec: dict[str, Any], matches: bool) -> None:
    assert compile_filter(spec, "where")(ISSUE) is matches


@given(st.one_of(st.none(), st.integers(), st.text(), st.lists(st.integers())))
def test_a_filter_on_something_that_is_not_an_object_matches_nothing(item: Any) -> None:
    assert compile_filter({"path": "status", "equals": "open"}, "f")(item) is False
    assert compile_filter({"path": "status", "exists": False}, "f")(item) is True


@pytest.mark.parametrize(
    ("spec", "path", "says"),
    [
        ({"path": "a", "equal": 1}, "f.equal", "did you mean 'equals'"),
        ({"path": "a"}, "f", "set exactly one of"),
        ({"path": "a", "equals": 1, "in": [1]}, "f", "found equals and in"),
        ({"equals": 1}, "f.path", "needs 'path'"),
        ({"path": "a", "matches": "(["}, "f.matches", "invalid regular expression"),
        ({"path": "a", "in": []}, "f.in", "non-empty list"),
        ({"path": "a", "exists": "yes"}, "f.exists", "true or false"),
        ({"path": "a..b", "equals": 1}, "f.path", "invalid path"),
        ({"all": [{"path": "a", "equals": 1}, {"path": "b", "like": 1}]}, "f.all[1].like", ""),
        ({"not": {"any": "x"}}, "f.not.any", "non-empty list"),
        ({"all": [], "path": "a"}, "f", "stands alone"),
        ("status == open", "f", "must be a mapping"),
    ],
)
def test_a_bad_filter_is_a_config_error_naming_its_path(spec: Any, path: str, says: str) -> None:
    with pytest.raises(ConfigError, match=None) as raised:
        compile_filter(spec, "f")
    assert raised.value.path == path
    assert says in str(raised.value)


# -- the steps ---------------------------------------------------------------------------------


def test_the_documented_example_publishes_what_the_contract_shows() -> None:
    transform = compile_transform(
        {
            "filter": {
                "all": [
                    {"path": "status", "in": ["open", "pending"]},
                    {"not": {"path": "spam", "equals": True}},
                ]
            },
            "select": ["id", "title", "status", "reporter.email", "reporter.internal_note"],
            "drop": ["reporter.internal_note"],
            "rename": {"title": "summary"},
            "mask": {"reporter.email": {"hmac": KEY}},
            "set": {"tenant": "{partition.key}", "project": "{parent.key}", "source": "tracker"},
        },
        "t",
        parents=1,
    )
    vendor = copy.deepcopy(ISSUE)
    published = transform.apply(vendor, transform.context("acme/P1"))
    assert published == {
        "id": 7,
        "summary": "Printer on fire",
        "status": "open",
        "reporter": {"email": digest("ada@example.com")},
        "tenant": "acme/P1",
        "project": "P1",
        "source": "tracker",
    }
    assert vendor == ISSUE  # the vendor's item is left as it was: identity and cursor read it
    assert transform.apply({**ISSUE, "spam": True}, CONTEXT) is None


SPECS: dict[str, Any] = {
    "filter": {"path": "status", "equals": "open"},
    "select": ["id", "title", "reporter"],
    "drop": ["reporter.name"],
    "rename": {"reporter": "who"},
    "mask": {"reporter.email": {"redact": "***"}},
    "set": {"who": {"fixed": True}},
}


@given(st.permutations(STEPS))
def test_the_steps_run_in_the_fixed_order_whatever_order_they_are_written_in(
    order: list[str],
) -> None:
    written = {step: SPECS[step] for step in order}
    published = compile_transform(written, "t").apply(ISSUE, CONTEXT)
    # select, then drop under reporter, then rename it, then mask its old path (now
    # who.email), then set overwrites who: each step saw the one before it.
    assert published == {"id": 7, "title": "Printer on fire", "who": {"fixed": True}}


def test_mask_follows_a_renamed_path_and_set_reads_the_vendors_item() -> None:
    transform = compile_transform(
        {
            "rename": {"reporter": "who"},
            "mask": {"reporter.email": {"redact": "***"}},
            "set": {"was": "{item.reporter.name} <{item.title}>", "raw": "{item.id}"},
        },
        "t",
    )
    published = transform.apply(ISSUE, CONTEXT)
    assert published["who"]["email"] == "***"
    assert published["was"] == "Ada <Printer on fire>"
    assert published["raw"] == 7  # one placeholder alone keeps the value's type
    assert "reporter" not in published


nested = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5)),
    lambda inner: st.dictionaries(st.sampled_from("abc"), inner, max_size=3),
    max_leaves=12,
)


def _walk(value: Any, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    if not isinstance(value, dict) or not value:
        return [(prefix, value)] if prefix else []
    return [pair for key, child in value.items() for pair in _walk(child, (*prefix, key))]


@given(st.dictionaries(st.sampled_from("abcd"), nested, min_size=1), st.randoms())
def test_select_keeps_each_path_where_it_is_nested(
    item: dict[str, Any], rnd: random.Random
) -> None:
    leaves = _walk(item)
    chosen = rnd.sample(leaves, k=rnd.randint(1, len(leaves))) if leaves else []
    transform = compile_transform({"select": [".".join(path) for path, _ in chosen]}, "t")
    published = transform.apply(item, CONTEXT)
    for path, value in chosen:
        here: Any = published
        for step in path:
            here = here[step]
        assert here == value
    kept = {path for path, _ in _walk(published)}
    assert kept == {path for path, _ in chosen}


keys = st.sampled_from("abcd")


@st.composite
def top_level_specs(draw: st.DrawFn) -> dict[str, Any]:
    """A transform of every step but filter, each path one key deep."""
    spec: dict[str, Any] = {}
    if draw(st.booleans()):
        spec["select"] = draw(st.lists(keys, min_size=1, max_size=3, unique=True))
    if draw(st.booleans()):
        spec["drop"] = draw(st.lists(keys, min_size=1, max_size=2, unique=True))
    spec["rename"] = draw(st.dictionaries(keys, st.sampled_from("cdxy"), max_size=2))
    masks = st.sampled_from([{"redact": "***"}, {"hmac": KEY}])
    spec["mask"] = draw(st.dictionaries(keys, masks, max_size=2))
    values = st.sampled_from(["{partition.key}", "{item.a}", "n={item.b}", "fixed", 3, [1]])
    spec["set"] = draw(st.dictionaries(st.sampled_from("aexy"), values, max_size=2))
    return spec


def _one_level_down(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with every path (and every ``{item.PATH}``) under ``wrap``."""

    def down(path: str) -> str:
        return f"wrap.{path}"

    def template(value: Any) -> Any:
        return value.replace("{item.", "{item.wrap.") if isinstance(value, str) else value

    out: dict[str, Any] = {}
    for step in ("select", "drop"):
        if step in spec:
            out[step] = [down(path) for path in spec[step]]
    out["rename"] = {down(source): down(target) for source, target in spec["rename"].items()}
    out["mask"] = {down(path): how for path, how in spec["mask"].items()}
    out["set"] = {down(key): template(value) for key, value in spec["set"].items()}
    return out


@given(st.dictionaries(keys, nested), top_level_specs())
def test_a_transform_of_top_level_keys_gives_what_it_gives_one_level_down(
    item: dict[str, Any], spec: dict[str, Any]
) -> None:
    # Top-level paths take a shorter way through the steps than nested ones; a user must not
    # be able to tell which way an item went.
    vendor = copy.deepcopy(item)
    published = compile_transform(spec, "t").apply(item, CONTEXT)
    wrapped = compile_transform(_one_level_down(spec), "t").apply({"wrap": item}, CONTEXT)
    assert set(wrapped) <= {"wrap"}
    assert wrapped.get("wrap", {}) == published
    assert item == vendor  # the vendor's item is not modified


@given(st.text(), st.binary(min_size=1), st.binary(min_size=1))
def test_masking_is_deterministic_under_one_key_and_different_under_another(
    value: str, key: bytes, other: bytes
) -> None:
    def masked(under: bytes) -> Any:
        spec = {"mask": {"secret": {"hmac": under}}}
        return compile_transform(spec, "t").apply({"secret": value}, CONTEXT)["secret"]

    assert masked(key) == masked(key) == digest(value, key)
    if (
        hmac.new(key, digestmod=hashlib.sha256).digest()
        != hmac.new(other, digestmod=hashlib.sha256).digest()
    ):  # keys HMAC treats alike (padding) give the same digest, as they should
        assert masked(key) != masked(other)


def test_a_value_that_is_not_a_string_is_masked_as_its_compact_json() -> None:
    spec = {"mask": {"n": {"hmac": KEY}, "o": {"hmac": KEY}}}
    published = compile_transform(spec, "t").apply({"n": 42, "o": {"b": 1, "a": [1, 2]}}, CONTEXT)
    assert published == {"n": digest("42"), "o": digest('{"a":[1,2],"b":1}')}


def test_the_hmac_key_is_in_no_repr() -> None:
    transform = compile_transform({"mask": {"email": {"hmac": b"do-not-print-me"}}}, "t")
    assert "do-not-print-me" not in repr(transform)
    assert "do-not-print-me" not in repr(transform.mask)


def test_a_step_that_cannot_write_names_the_path_not_the_value() -> None:
    transform = compile_transform({"set": {"title.short": "x"}}, "t")
    with pytest.raises(ValueError, match="'title' is not an object") as raised:
        transform.apply(ISSUE, CONTEXT)
    assert "Printer" not in str(raised.value)


# -- compile errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "path", "says"),
    [
        ({"flter": {}}, "t.flter", "did you mean 'filter'"),
        ({"select": "id"}, "t.select", "list of paths"),
        ({"drop": ["a."]}, "t.drop[0]", "invalid path"),
        ({"rename": {"a": 3}}, "t.rename.a", "dotted path"),
        ({"mask": {"a": {"hash": "x"}}}, "t.mask.a.hash", "expected one of: hmac, redact"),
        ({"mask": {"a": {"hmac": b"k", "redact": "x"}}}, "t.mask.a", "exactly one"),
        ({"mask": {"a": {"hmac": "${env:KEY}"}}}, "t.mask.a.hmac", "unresolved secret"),
        ({"set": {"t": "{partition.data.token}"}}, "t.set.t", "partition data is never"),
        ({"set": {"t": "{parent.key}"}}, "t.set.t", "no parent"),
        ({"set": {"t": "{cursor}"}}, "t.set.t", "unknown placeholder"),
        ({"set": {"t": "{item.id!r}"}}, "t.set.t", "no format specs"),
        ({"set": {"t": "{unclosed"}}, "t.set.t", "invalid template"),
        ({"filter": {"path": "a", "matches": "*"}}, "t.filter.matches", "regular expression"),
    ],
)
def test_a_bad_transform_is_a_config_error_naming_its_path(
    spec: dict[str, Any], path: str, says: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        compile_transform(spec, "t")
    assert raised.value.path == path
    assert says in str(raised.value)


def test_a_rename_target_the_data_schema_lacks_is_a_config_error() -> None:
    schema = {
        "type": "record",
        "name": "Issue",
        "fields": [
            {"name": "summary", "type": "string"},
            {
                "name": "who",
                "type": [
                    "null",
                    {"type": "record", "name": "W", "fields": [{"name": "mail", "type": "string"}]},
                ],
            },
        ],
    }
    compile_transform({"rename": {"title": "summary", "a": "who.mail"}}, "t", schema=schema)
    for target in ("headline", "who.email"):
        with pytest.raises(ConfigError, match=f"{target!r} is not a field") as raised:
            compile_transform({"rename": {"title": target}}, "t", schema=schema)
        assert raised.value.path == "t.rename.title"


def test_a_declarative_hmac_key_must_be_a_reference_and_no_error_shows_it() -> None:
    spec = {"mask": {"email": {"hmac": "plain-key-in-config"}}}
    with pytest.raises(ConfigError) as raised:
        compile_transform(spec, "t", secret_at=lambda path: False)
    assert raised.value.path == "t.mask.email.hmac"
    assert "plain-key-in-config" not in str(raised.value)
    referenced = compile_transform(spec, "t", secret_at=lambda path: path == "t.mask.email.hmac")
    assert referenced.apply({"email": "x"}, CONTEXT) == {
        "email": digest("x", b"plain-key-in-config")
    }


def test_parent_keys_are_the_last_segments_of_a_child_partition_key() -> None:
    spec = {"set": {"p": "{parent.key}", "pp": "{parent.parent.key}", "k": "{partition.key}"}}
    transform = compile_transform(spec, "t", parents=2)
    published = transform.apply({}, transform.context("acme/P1/I7"))
    assert published == {"p": "I7", "pp": "P1", "k": "acme/P1/I7"}
