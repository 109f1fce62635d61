"""A transform's fingerprint, as pure functions: stable, changed by any step and by a rotated
HMAC key, and never holding the key (it is written to the status topic)."""

from __future__ import annotations

import hashlib

import pytest

from watukuy.core.events import canonical_json
from watukuy.core.poller import define_poller
from watukuy.core.transformprint import transform_fingerprint
from watukuy.core.transforms import compile_transform

pytestmark = pytest.mark.unit

KEY = "s3cret-pii-key-7f2a"
SPEC = {
    "filter": {"path": "status", "in": ["open", "pending"]},
    "select": ["id", "title", "reporter.email"],
    "rename": {"title": "summary"},
    "mask": {"reporter.email": {"hmac": KEY}},
    "set": {"tenant": "{partition.key}"},
}


def test_the_same_spec_has_the_same_fingerprint_whatever_its_written_order() -> None:
    reordered = dict(reversed(list(SPEC.items())))
    first = transform_fingerprint(SPEC)
    assert first is not None
    assert transform_fingerprint(reordered) == first
    assert compile_transform(SPEC, "t").fingerprint == first


@pytest.mark.parametrize(
    "change",
    [
        {"filter": {"path": "status", "in": ["open"]}},
        {"select": ["id", "title"]},
        {"drop": ["reporter.name"]},
        {"rename": {"title": "name"}},
        {"mask": {"reporter.email": {"redact": "***"}}},
        {"set": {"tenant": "{partition.key}", "source": "tracker"}},
    ],
)
def test_any_changed_step_changes_the_fingerprint(change: dict[str, object]) -> None:
    assert transform_fingerprint(SPEC | change) != transform_fingerprint(SPEC)


def test_a_rotated_hmac_key_changes_the_fingerprint() -> None:
    rotated = SPEC | {"mask": {"reporter.email": {"hmac": "another-key"}}}
    assert transform_fingerprint(rotated) != transform_fingerprint(SPEC)
    as_bytes = SPEC | {"mask": {"reporter.email": {"hmac": KEY.encode()}}}
    assert transform_fingerprint(as_bytes) == transform_fingerprint(SPEC)


def test_the_fingerprint_is_not_a_hash_of_the_key_written_in_the_spec() -> None:
    # The key stands in the hashed spec as its signature of a label: the hash of a spec
    # holding the key itself would let a guess of the key be checked against the record.
    fingerprint = transform_fingerprint(SPEC)
    plain = hashlib.sha256(canonical_json(SPEC).encode()).hexdigest()[:32]
    assert fingerprint is not None
    assert fingerprint != plain
    assert fingerprint not in hashlib.sha256(KEY.encode()).hexdigest()


def test_no_transform_or_one_without_steps_has_none() -> None:
    assert transform_fingerprint(None) is None
    assert transform_fingerprint({}) is None
    assert transform_fingerprint({"select": [], "mask": None}) is None
    assert compile_transform({}, "t").fingerprint is None


def test_a_python_poller_gets_the_fingerprint_of_its_transform_argument() -> None:
    async def fetch(_ctx: object) -> list[object]:
        return []

    poller = define_poller(name="p", identity=lambda item: item["id"], fetch=fetch, transform=SPEC)
    assert poller.transform is not None
    assert poller.transform.fingerprint == transform_fingerprint(SPEC)
