"""The declarative ``transform:`` key: compiled at load by the core's transforms (errors name
the config path), with an HMAC key that must be a ``${...}`` reference and is never shown."""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path
from typing import Any

import pytest

from watukuy.config import parse_config
from watukuy.core.errors import ConfigError
from watukuy.core.poller import Poller
from watukuy.core.transforms import TransformContext
from watukuy.options.flat import flatten, unflatten

pytestmark = pytest.mark.unit

PII_KEY = "k3y-that-must-not-leak"


def load(tmp_path: Path, transform: Any, **extra: Any) -> Poller:
    poller = {
        "name": "issues",
        "request": {"url": "https://vendor.test/issues"},
        "identity": "id",
        "transform": transform,
        **extra,
    }
    config = parse_config(
        {"kafka": {"bootstrap.servers": "127.0.0.1:9092"}, "pollers": [poller]},
        base_dir=tmp_path,
    )
    return config.pollers[0]


def test_a_declarative_transform_publishes_what_the_core_one_does(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PII_KEY", PII_KEY)
    poller = load(
        tmp_path,
        {
            "set": {"source": "tracker"},
            "mask": {"reporter.email": {"hmac": "${env:PII_KEY}"}},
            "filter": {"path": "status", "in": ["open"]},
        },
    )
    assert poller.transform is not None
    published = poller.transform.apply(
        {"id": 1, "status": "open", "reporter": {"email": "a@b.c"}}, TransformContext("")
    )
    expected = hmac.new(PII_KEY.encode(), b"a@b.c", hashlib.sha256).hexdigest()
    assert published == {
        "id": 1,
        "status": "open",
        "reporter": {"email": expected},
        "source": "tracker",
    }
    assert PII_KEY not in repr(poller)


def test_an_hmac_key_written_in_the_config_is_refused_without_being_shown(
    tmp_path: Path,
) -> None:
    with pytest.raises(ConfigError) as raised:
        load(tmp_path, {"mask": {"email": {"hmac": PII_KEY}}})
    assert raised.value.path == "pollers[0].transform.mask.email.hmac"
    assert "secret reference" in str(raised.value)
    assert PII_KEY not in str(raised.value)


@pytest.mark.parametrize(
    ("transform", "path"),
    [
        ({"filter": {"path": "a", "matches": "(["}}, "pollers[0].transform.filter.matches"),
        ({"filter": {"path": "a", "like": "x"}}, "pollers[0].transform.filter.like"),
        ({"map": {}}, "pollers[0].transform.map"),
        ({"set": {"t": "{partition.data.token}"}}, "pollers[0].transform.set.t"),
        ({"rename": {"title": "headline"}}, "pollers[0].transform.rename.title"),
    ],
)
def test_a_bad_transform_names_its_config_path(
    tmp_path: Path, transform: dict[str, Any], path: str
) -> None:
    schema = {
        "type": "record",
        "name": "Issue",
        "fields": [{"name": "id", "type": "long"}, {"name": "summary", "type": "string"}],
    }
    with pytest.raises(ConfigError) as raised:
        load(tmp_path, transform, schema=schema)
    assert raised.value.path == path


def test_a_transform_survives_connects_flat_form() -> None:
    nested = {
        "name": "issues",
        "transform": {
            "filter": {"all": [{"path": "status", "equals": "open"}]},
            "select": ["id", "reporter.email"],
            "rename": {"title": "summary"},
            "mask": {"reporter.email": {"hmac": "${env:PII_KEY}"}},
            "set": {"tenant": "{partition.key}", "n": 1},
        },
    }
    flat = flatten(nested, "http")
    assert all(isinstance(value, str) for value in flat.values())
    assert flat["transform.rename.title"] == "summary"
    assert unflatten(flat) == ("http", nested)
