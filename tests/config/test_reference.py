"""The config reference in docs/configuration.md is generated from the tables the validator
reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from watukuy.config import TOP_LEVEL_KEYS, sections
from watukuy.config.reference import END, RUNNER_KEYS, START, embed, keys_under, reference_markdown

pytestmark = pytest.mark.unit

CONFIGURATION = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


@pytest.mark.parametrize(
    ("section", "known"),
    [
        ("topics", sections.TOPICS_KEYS),
        ("runner", sections.RUNNER_KEYS),
        ("rest", sections.REST_KEYS),
        ("schema.registry", sections.SCHEMA_REGISTRY_KEYS),
        ("log", sections.LOG_KEYS),
        ("metrics", sections.METRICS_KEYS),
    ],
)
def test_every_key_the_validator_knows_is_documented(section: str, known: object) -> None:
    assert sorted(keys_under(section)) == sorted(known)  # type: ignore[call-overload]


def test_budget_keys_are_documented() -> None:
    assert sorted(keys_under("budgets.NAME")) == sorted(sections.BUDGET_KEYS)


def test_every_top_level_key_is_documented() -> None:
    documented = {doc.path.split(".")[0] for doc in RUNNER_KEYS}
    documented = {"schema.registry" if key == "schema" else key for key in documented}
    assert documented == set(TOP_LEVEL_KEYS)


def test_the_configuration_page_carries_the_generated_reference() -> None:
    text = CONFIGURATION.read_text(encoding="utf-8")
    assert START in text and END in text
    assert embed(text, reference_markdown()) == text, (
        "docs/configuration.md is stale: "
        "run python -m watukuy.config.reference --write docs/configuration.md"
    )
