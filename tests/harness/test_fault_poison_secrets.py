"""The poison and secrets scenarios' own checks detect what they must: a dead letter missing,
doubled, of the wrong kind or about nothing served; an oversized item's letter names it; a
canary found raw, URL-encoded or lower-cased."""

from __future__ import annotations

import json
from typing import Any

from integration.faults.scenarios.declarative import DeadLetter
from integration.faults.scenarios.s07_poison import Poisoned, check_letters
from integration.faults.scenarios.s10_secrets import Canaries
from integration.faults.topics import Raw

TENANT = "t_0001"
KEY = f"invoices/{TENANT}"


def letter(kind: str, item: dict[str, Any], **headers: str) -> DeadLetter:
    stage = "publish" if kind == "oversize" else "poll"  # "oversize": a kind that is wrong now
    error = "event of 2000000 bytes exceeds max.message.bytes of its topic"
    if kind == "invalid":
        error = "identity() raised ValueError: no value at 'id'"
    base = {
        "watukuy.poller": "invoices",
        "watukuy.partition": TENANT,
        "watukuy.kind": kind,
        "watukuy.stage": stage,
        "watukuy.error.class": "Error",
        "watukuy.error.message": error,
        "watukuy.attempts": "1",
        "watukuy.cursor": "null",
    }
    pairs = tuple((name, value.encode()) for name, value in (base | headers).items())
    raw = Raw("p.dlq.invoices", 0, 0, KEY.encode(), b"", pairs)
    return DeadLetter(raw, {"item": json.dumps(item, sort_keys=True, separators=(",", ":"))})


MALFORMED = letter("invalid", {"etag": "00000000000000a1", "name": "x"})
POISONED: Poisoned = {TENANT: {("it_1", "00000000000000a1"): "malformed"}}


def test_one_letter_of_the_right_kind_passes() -> None:
    assert check_letters([MALFORMED], POISONED) == []


def test_a_missing_a_doubled_and_a_stray_letter_fail() -> None:
    assert any("no letter" in p for p in check_letters([], POISONED))
    assert any("2 letters" in p for p in check_letters([MALFORMED, MALFORMED], POISONED))
    stray = letter("invalid", {"etag": "00000000000000ff"})
    assert any("never served poisoned" in p for p in check_letters([MALFORMED, stray], POISONED))


def test_a_letter_of_the_wrong_kind_fails() -> None:
    wrong = letter("oversize", {"etag": "00000000000000a1"})
    assert any("expected ('invalid', 'poll')" in p for p in check_letters([wrong], POISONED))


def test_an_earlier_version_superseded_before_its_letter_is_not_missing() -> None:
    later = letter("invalid", {"etag": "00000000000000a2"})
    poisoned: Poisoned = {
        TENANT: {
            ("it_1", "00000000000000a1"): "malformed",
            ("it_1", "00000000000000a2"): "malformed",
        }
    }
    assert check_letters([later], poisoned) == []
    assert any("no letter" in p for p in check_letters([MALFORMED], poisoned))


def test_an_oversized_item_is_an_invalid_letter_that_names_it() -> None:
    poisoned: Poisoned = {TENANT: {("it_2", "0000000000000002"): "oversized"}}
    item = {"etag": "0000000000000002", "id": "it_2"}
    cut = {"watukuy.original.sha256": "ab" * 32}
    # The error of an "invalid" letter() is about the id; the store's names the size limit.
    named = letter("invalid", item, **{"watukuy.identity": "it_2"}, **cut)
    assert any("error" in p for p in check_letters([named], poisoned))
    sized = {"watukuy.error.message": "event of 2000000 bytes exceeds max.message.bytes"}
    good = letter("invalid", item, **{"watukuy.identity": "it_2"}, **cut, **sized)
    assert check_letters([good], poisoned) == []
    unnamed = letter("invalid", item, **cut, **sized)
    assert any("does not name it" in p for p in check_letters([unnamed], poisoned))


def test_a_canary_is_found_in_every_spelling() -> None:
    canaries = Canaries()
    canaries.add("token", "Tok/en+Secret")
    assert canaries.found(b"x Tok/en+Secret x") == ["token"]
    assert canaries.found(b"?k=Tok%2Fen%2BSecret") == ["token"]
    assert canaries.found(b"tok/en+secret") == ["token"]
    assert canaries.found(b"Tok/en Secret") == []
