"""KIP-558's routes, as Connect clients (kc list-topics / reset-topics) call them."""

from __future__ import annotations

from tests.rest.fake_control import FakeControl
from tests.rest.support import error_of, rest_client, seed


async def test_list_then_reset_a_connectors_active_topics() -> None:
    fake = seed(FakeControl())
    fake.connectors_by_name["tenants"].topics[:] = ["watukuy.dlq.tenants", "tenants.events"]
    async with rest_client(fake) as client:
        listed = await client.get("/connectors/tenants/topics")
        assert listed.status == 200
        assert await listed.json() == {
            "tenants": {"topics": ["tenants.events", "watukuy.dlq.tenants"]}
        }
        reset = await client.put("/connectors/tenants/topics/reset")
        assert reset.status == 202
        after = await (await client.get("/connectors/tenants/topics")).json()
        assert after == {"tenants": {"topics": []}}
        assert await error_of(await client.get("/connectors/nope/topics"), 404)
        assert await error_of(await client.put("/connectors/nope/topics/reset"), 404)
