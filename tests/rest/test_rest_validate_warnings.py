"""``PUT /connector-plugins/{class}/config/validate`` warns, in a ``warnings`` field Connect's
client classes ignore, when a connector's transform changed since it last published; through
the real RunnerControl, with the status topic's view of the transform history stood in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from tests.rest.support import config, runner_control
from watukuy.core.transformprint import transform_fingerprint
from watukuy.rest import build_app

VALIDATE = "/connector-plugins/http/config/validate"
T1 = {"select": ["id", "email"], "mask": {"email": {"hmac": "${env:PII_KEY}"}}}
T2 = {"select": ["id", "email"], "mask": {"email": {"redact": "***"}}}
PII_KEY = "pii-k3y-never-shown"


class History:
    """The status topic's view, as far as validate reads it."""

    def __init__(self, recorded: dict[str, str | None]) -> None:
        self.recorded = recorded

    def transforms(self) -> dict[str, str | None]:
        return dict(self.recorded)


async def validated(tmp_path: Path, body: dict[str, Any], recorded: dict[str, str | None]) -> Any:
    control = runner_control(object(), tmp_path, status=History(recorded))
    async with TestClient(TestServer(build_app(control, None))) as client:
        response = await client.put(VALIDATE, json=body)
        assert response.status == 200, await response.text()
        return await response.json()


async def test_a_changed_transform_is_a_warning_not_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PII_KEY", PII_KEY)
    published_with = {"users": transform_fingerprint(T1 | {"mask": {"email": {"hmac": PII_KEY}}})}

    same = await validated(tmp_path, config(name="users", transform=T1), published_with)
    assert same["error_count"] == 0
    assert "warnings" not in same  # Connect's shape, untouched

    changed = await validated(tmp_path, config(name="users", transform=T2), published_with)
    assert changed["error_count"] == 0
    assert not any(c["value"]["errors"] for c in changed["configs"])
    [warning] = changed["warnings"]
    assert warning.startswith(
        "warning: users: its transform changed since it last published; only items polled "
        "from now on are published the new way"
    )
    assert "POST /connectors/users/partitions/{key}/replay" in warning

    other = await validated(tmp_path, config(name="orders", transform=T2), published_with)
    assert "warnings" not in other  # never published: nothing changed for it
    assert PII_KEY not in str([same, changed, other])


async def test_an_invalid_config_gets_its_error_and_no_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PII_KEY", PII_KEY)
    body = config(name="users", transform=T2, records=7)
    report = await validated(tmp_path, body, {"users": "an-older-fingerprint"})
    assert report["error_count"] == 1
    assert "warnings" not in report
