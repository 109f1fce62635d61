"""A poller with an Avro ``schema`` for its items: items that do not conform are parked
``invalid`` with the field named, and the key's other items go on."""

from __future__ import annotations

import pytest

from tests.engine.support import INVOICE_SCHEMA, Env, Recorder
from watukuy import ConfigError

INVOICE = INVOICE_SCHEMA


async def test_an_item_that_does_not_fit_the_schema_is_parked_and_the_key_goes_on(
    env: Env,
) -> None:
    tenant = env.tenants[0]
    bad = env.sim.create_item(tenant.id, amount="a lot")
    engine = env.make_engine(env.make_poller(schema=INVOICE))
    seen = Recorder()
    engine.on("invoices", seen)
    await engine.tick()

    parked = await engine.parked.list("invoices", partition=tenant.id)
    assert [(p.kind, p.item["id"]) for p in parked] == [("invalid", bad["id"])]
    assert "amount" in parked[0].error and "SchemaError" in parked[0].error
    assert len(seen.of(tenant.id)) == 10  # every conforming item became an event
    assert bad["id"] not in {e.subject for e in seen.of(tenant.id)}

    # Fixed at the vendor, it is a change like any other.
    env.sim.update_item(tenant.id, bad["id"], amount=12.5)
    await engine.trigger("invoices", partition=tenant.id)
    await engine.tick()
    assert [e.subject for e in seen.of(tenant.id)][-1] == bad["id"]


def test_a_schema_that_is_not_avro_names_the_poller_field(env: Env) -> None:
    with pytest.raises(ConfigError) as raised:
        env.make_engine(env.make_poller(schema={"type": "record", "name": "X"}))
    assert raised.value.path == "pollers[0].schema"
