"""A declarative poll that fails is counted by what went wrong (the observers' outcome kind)."""

from __future__ import annotations

import pytest

from tests.declarative.helpers import API, Driver, compile_spec, spec
from watukuy.core.observe import OutcomeKind, outcome_kind
from watukuy.http import reply

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("answer", "kind"),
    [
        (reply(200, json={"items": []}), OutcomeKind.INVALID_BODY),  # no `data` in the body
        (reply(200, body="{not json"), OutcomeKind.INVALID_BODY),
        (reply(404), OutcomeKind.CLIENT_ERROR),
        (reply(503), OutcomeKind.SERVER_ERROR),
        (reply(429, headers={"Retry-After": "30"}), OutcomeKind.RATE_LIMITED),
    ],
)
async def test_failures_have_their_kind(answer: object, kind: OutcomeKind) -> None:
    driver = Driver(compile_spec(spec()))
    driver.transport.add("GET", f"{API}/items", answer)  # type: ignore[arg-type]

    with pytest.raises(Exception) as raised:
        await driver.poll()

    assert outcome_kind(raised.value) is kind
