"""Failure texts without partition data: what ``last_error``, parked items and log lines get."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from watukuy.core.redaction import MAX_LENGTH, failure_text, redact, withhold_urls

SLUG = "acme-widgets"
HOST = "acme.vendor.example"
TOKEN = "tok_9f8e7d6c5b4a"


@dataclass
class Tenant:
    id: str
    slug: str
    token: str


class Account:
    def __init__(self) -> None:
        self.host = HOST
        self.number = 4_200_017


def test_every_string_inside_the_data_is_redacted_wherever_it_is() -> None:
    data: dict[str, Any] = {
        "slug": SLUG,
        "nested": {"auth": [{"token": TOKEN}]},
        "tenant": Tenant("t_1", "beta-co", "tok_beta_1234"),
        "account": Account(),
        "tags": ("gold", "eu"),
    }
    text = (
        f"GET https://{HOST}/{SLUG}/items with Bearer {TOKEN} for beta-co (tok_beta_1234), "
        "account 4200017, tier GOLD in eu"
    )

    assert redact(text, data) == (
        "GET https://[redacted]/[redacted]/items with Bearer [redacted] for [redacted] "
        "([redacted]), account [redacted], tier [redacted] in eu"
    )


@pytest.mark.parametrize(
    ("value", "text", "expected"),
    [
        ("Acme Corp", "q=acme%20corp", "q=[redacted]"),  # URL-encoded, other case
        ("Acme Corp", "q=Acme+Corp", "q=[redacted]"),
        ("a/b c", "path a%2Fb%20c", "path [redacted]"),
        ("ab", "ab is too short to be worth hiding", "ab is too short to be worth hiding"),
        (404, "GET x -> 404", "GET x -> 404"),  # short numbers are statuses and lines
        (True, "True", "True"),
    ],
)
def test_forms_and_lengths(value: object, text: str, expected: str) -> None:
    assert redact(text, {"v": value}) == expected


def test_the_longer_value_goes_as_a_whole() -> None:
    assert redact(f"https://{HOST}/x", {"slug": "acme", "host": HOST}) == "https://[redacted]/x"


def test_a_cycle_in_the_data_ends() -> None:
    data: dict[str, Any] = {"token": TOKEN}
    data["self"] = data

    assert redact(TOKEN, data) == "[redacted]"


def test_rendered_urls_are_withheld_templates_kept() -> None:
    text = (
        "500, message='Server Error', url='http://10.0.0.7:8080/t/items?x=1' "
        "(GET https://api.example.com/{partition.data.slug}/items)"
    )

    assert withhold_urls(text) == (
        "500, message='Server Error', url='<url withheld>' "
        "(GET https://api.example.com/{partition.data.slug}/items)"
    )


def test_failure_text_keeps_the_type_and_status_on_one_line() -> None:
    exc = RuntimeError(f"vendor said 503 for\n  https://{HOST}/{SLUG}/items\n{TOKEN}")

    text = failure_text(exc, {"slug": SLUG, "token": TOKEN})

    assert text == "RuntimeError: vendor said 503 for <url withheld> [redacted]"


def test_trusted_texts_keep_their_template_and_lose_data() -> None:
    exc = RuntimeError(f"GET https://{{partition.data.host}}/items -> 500 {TOKEN}")

    text = failure_text(exc, {"token": TOKEN}, trusted=True)

    assert text == "RuntimeError: GET https://{partition.data.host}/items -> 500 [redacted]"


def test_a_huge_message_is_clipped() -> None:
    text = failure_text(ValueError("x" * 10_000), None)

    assert len(text) == MAX_LENGTH
    assert text.startswith("ValueError: xxx")


def test_a_message_that_cannot_be_printed_still_gives_its_type() -> None:
    class Broken(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert failure_text(Broken(), None) == "Broken: <unprintable message>"
    assert failure_text(KeyError(), None) == "KeyError"
