"""``PUT .../config/validate`` with the config sent as a JSON string, as kafka-connect-py's
``kc validate-config`` sends it (the file's text, JSON-encoded once more)."""

from __future__ import annotations

import json

from tests.rest.support import config, error_of, rest_client

VALIDATE = "/connector-plugins/http/config/validate"


async def test_a_config_sent_as_json_text_is_validated_like_the_object() -> None:
    async with rest_client() as client:
        as_object = await (await client.put(VALIDATE, json=config())).json()
        as_text = await (await client.put(VALIDATE, json=json.dumps(config()))).json()
        assert as_text == as_object
        assert as_text["error_count"] == 0

        wrong = config(records=7)
        report = await (await client.put(VALIDATE, json=json.dumps(wrong))).json()
        assert report["error_count"] == 1
        named = [c["value"]["name"] for c in report["configs"] if c["value"]["errors"]]
        assert named == ["records"]


async def test_text_that_holds_no_object_is_still_refused() -> None:
    async with rest_client() as client:
        not_an_object = await client.put(VALIDATE, json="records: data")
        assert await error_of(not_an_object, 400) == "body: must be a JSON object, got a string"
        broken = await client.put(VALIDATE, json='{"records": ')
        assert await error_of(broken, 400) == "body: is not valid JSON (UTF-8)"
