"""Connect's own ``ConfigInfos`` (connect-runtime, through ``tests/connect_jvm/Decode.java``)
decodes a validate answer that carries watukuy's transform ``warnings``: a Connect client
reads the report as if the field were not there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.connect_jvm.decoder import ConnectDecoder
from tests.rest.support import config
from tests.rest.test_rest_validate_warnings import PII_KEY, T1, T2, validated
from watukuy.core.transformprint import transform_fingerprint


async def test_connects_config_infos_decodes_a_report_with_warnings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PII_KEY", PII_KEY)
    published_with = {"users": transform_fingerprint(T1 | {"mask": {"email": {"hmac": PII_KEY}}})}
    report = await validated(tmp_path, config(name="users", transform=T2), published_with)
    assert report["warnings"]
    [decoded] = ConnectDecoder.prepare().decode([("ConfigInfos", json.dumps(report))])
    assert decoded.ok, decoded.error
    value = decoded.get()
    assert value["errorCount"] == 0
    assert len(value["values"]) == len(report["configs"])
