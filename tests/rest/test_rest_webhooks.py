"""The webhook route as a vendor meets it: served on its configured path, outside ``rest.auth``
(its signature is its authentication), 202 when signed, 401 when not, 413 over the body limit,
and listed in the OpenAPI document; any other method or path is the API's as before."""

from __future__ import annotations

import hashlib
import hmac

from tests.rest.fake_control import HOOK_SECRET, FakeControl, FakeWebhooks
from tests.rest.support import error_of, rest_client, seed
from watukuy.config.model import RestAuth

PATH = FakeWebhooks.PATH
BODY = b'{"type": "issue.updated", "issue": {"id": "is_1"}}'


def signed(body: bytes, secret: bytes = HOOK_SECRET) -> dict[str, str]:
    digest = hmac.new(secret, body, hashlib.sha256).hexdigest()
    return {"X-Hub-Signature-256": f"sha256={digest}", "Content-Type": "application/json"}


async def test_a_signed_webhook_is_accepted_without_the_apis_credentials() -> None:
    fake = seed(FakeControl())
    async with rest_client(fake, RestAuth(tokens=("api-token",))) as client:
        answer = await client.post(PATH, data=BODY, headers=signed(BODY))
        assert answer.status == 202, await answer.text()
        assert await answer.json() == {}
        # The rest of the API still asks for its token.
        assert (await client.get("/connectors")).status == 401
    assert fake.webhooks.received == [BODY]


async def test_a_bad_or_missing_signature_is_401_and_wakes_nothing() -> None:
    fake = seed(FakeControl())
    async with rest_client(fake) as client:
        forged = await client.post(PATH, data=BODY, headers=signed(BODY, b"guessed"))
        assert "signature" in await error_of(forged, 401)
        bare = await client.post(PATH, data=BODY)
        assert "signature" in await error_of(bare, 401)
        tampered = await client.post(PATH, data=BODY + b" ", headers=signed(BODY))
        await error_of(tampered, 401)
    assert fake.webhooks.received == []
    assert fake.webhooks.counted == ["bad_signature"] * 3


async def test_a_body_over_the_limit_is_413_and_counted() -> None:
    fake = seed(FakeControl())
    big = b"x" * 2048
    async with rest_client(fake, body_limit=1024) as client:
        answer = await client.post(PATH, data=big, headers=signed(big))
        assert "limit" in await error_of(answer, 413)
    assert fake.webhooks.counted == ["too_large"] and fake.webhooks.received == []


async def test_only_a_post_on_a_webhook_path_is_a_webhook() -> None:
    fake = seed(FakeControl())
    async with rest_client(fake) as client:
        assert (await client.get(PATH)).status in (404, 405)
        other = await client.post("/webhooks/other", data=BODY, headers=signed(BODY))
        assert other.status == 404
    assert fake.webhooks.received == []


async def test_the_openapi_document_lists_each_webhook_path() -> None:
    async with rest_client() as client:
        document = await (await client.get("/openapi.json")).json()
    operation = document["paths"][PATH]["post"]
    assert operation["security"] == []
    assert {"202", "401", "413", "503"} <= set(operation["responses"])
