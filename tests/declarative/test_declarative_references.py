"""``${env:...}`` references inside templates: their values are literal text (braces in a
secret are not placeholders) and what errors show is the reference, never its value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.declarative.helpers import Driver
from watukuy.config import parse_config
from watukuy.core.poller import Poller
from watukuy.http import reply

pytestmark = pytest.mark.unit

SECRET_TOKEN = "tok{en}-{partition.key}-s3cr3t"
VENDOR = "https://vendor-canary.test"


def load(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, poller: dict[str, Any]) -> Poller:
    monkeypatch.setenv("CANARY_TOKEN", SECRET_TOKEN)
    monkeypatch.setenv("CANARY_VENDOR", VENDOR)
    config = parse_config(
        {
            "kafka": {"bootstrap.servers": "127.0.0.1:9092"},
            "runner": {"id": "r1"},
            "pollers": [poller],
        },
        base_dir=tmp_path,
    )
    return config.pollers[0]


def entry() -> dict[str, Any]:
    return {
        "name": "tickets",
        "request": {
            "url": "${env:CANARY_VENDOR}/v1/items",
            "headers": {"X-Client": "${env:CANARY_TOKEN}"},
            "auth": {"bearer": "${env:CANARY_TOKEN}"},
        },
        "records": "data",
        "identity": "id",
    }


async def test_braces_in_a_secret_are_sent_as_written(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    driver = Driver(load(monkeypatch, tmp_path, entry()))
    driver.transport.add("GET", f"{VENDOR}/v1/items", json={"data": [{"id": "a"}]})

    items = await driver.poll()

    assert items == [{"id": "a"}]
    (sent,) = driver.transport.requests
    assert sent.headers["Authorization"] == f"Bearer {SECRET_TOKEN}"
    assert sent.headers["X-Client"] == SECRET_TOKEN


@pytest.mark.parametrize("status", [404, 500])
async def test_errors_show_the_reference_not_its_value(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, status: int
) -> None:
    driver = Driver(load(monkeypatch, tmp_path, entry()))
    driver.transport.add("GET", f"{VENDOR}/v1/items", reply(status))

    with pytest.raises(Exception) as raised:
        await driver.poll()

    text = f"{raised.value} {raised.value!r}"
    assert f"GET ${{env:CANARY_VENDOR}}/v1/items -> {status}" in text
    assert "vendor-canary" not in text
    assert "s3cr3t" not in text
