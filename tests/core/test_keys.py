from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watukuy.core.keys import KeyId, key_text

pytestmark = pytest.mark.unit

names = st.from_regex(r"[A-Za-z0-9._-]+", fullmatch=True)


@given(names, st.text())
def test_text_form_parses_back_to_the_same_key_whatever_the_partition_holds(
    poller: str, partition: str
) -> None:
    key = KeyId(poller, partition)
    assert KeyId.parse(key.text) == key
    assert KeyId.parse_bytes(key.encode()) == key
    assert str(key) == key.text == key_text(poller, partition)


def test_a_child_key_keeps_every_slash_in_its_partition() -> None:
    key = KeyId.parse("tracker.comments/acme/P1/I7")
    assert key == KeyId("tracker.comments", "acme/P1/I7")


def test_the_unpartitioned_key_has_an_empty_partition() -> None:
    assert KeyId.parse("invoices/") == KeyId("invoices", "")


@pytest.mark.parametrize("text", ["invoices", "", "/t_42", "bad name/t_42"])
def test_text_that_is_not_a_key_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="poller/partition"):
        KeyId.parse(text)
