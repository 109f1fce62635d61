"""Change detection as users see it: event ids per partition and version, gap-free sequences."""

from __future__ import annotations

from typing import Any

from tests.engine.support import Env
from watukuy import Engine, MemoryStore


async def test_two_tenants_with_an_identical_item_get_different_event_ids(
    env: Env, engine: Engine
) -> None:
    recorder = env.recorder(engine)
    await engine.tick()
    recorder.take()
    first, second = env.tid(0), env.tid(1)
    fields = {"id": "it_shared", "name": "same invoice", "amount": 10.0, "currency": "EUR"}
    fields["status"] = "active"
    one = env.sim.create_item(first, **fields)
    two = env.sim.create_item(second, **fields)
    assert one == two  # same identity, same etag, same everything

    env.clock.advance(30)
    await engine.tick()

    events = {e.partition: e for e in recorder.events if e.subject == "it_shared"}
    assert set(events) == {first, second}
    assert events[first].version == events[second].version == one["etag"]
    assert events[first].id != events[second].id


async def test_the_same_version_has_one_id_and_a_new_version_another(env: Env) -> None:
    # Two engines that never shared anything see the same vendor: ids are derived, not drawn.
    engines = [env.make_engine(env.make_poller(), store=MemoryStore()) for _ in range(2)]
    recorders = [env.recorder(e) for e in engines]
    for each in engines:
        await each.tick()
    ids = [[e.id for e in r.take()] for r in recorders]
    assert len(set(ids[0])) == 30
    assert ids[0] == ids[1]

    tenant = env.tid(0)
    item = env.sim.items(tenant)[0]
    env.sim.update_item(tenant, item["id"], amount=1.0)
    env.clock.advance(30)
    for each in engines:
        await each.tick()
    (one,), (other,) = (r.take() for r in recorders)
    assert one.id == other.id
    assert one.id not in ids[0]
    assert (one.subject, one.type) == (item["id"], "updated")


def per_partition(events: list[Any]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for event in events:
        out.setdefault(event.partition, []).append(event.sequence)
    return out


async def test_sequence_is_gap_free_from_one_per_key_across_polls(env: Env) -> None:
    engine = env.make_engine(env.make_poller(limit=4))
    recorder = env.recorder(engine)
    store = engine.store
    assert isinstance(store, MemoryStore)

    await engine.tick()
    for round_ in range(4):
        for index, tenant in enumerate(env.tenants):
            items = env.sim.items(tenant.id)
            if (round_ + index) % 3 != 2:  # some tenants idle some rounds
                env.sim.update_item(tenant.id, items[round_]["id"], amount=float(round_))
                env.sim.create_item(tenant.id)
        if round_ == 1:
            env.sim.faults(env.tid(2)).drop_id = True  # invalid items take no number
        if round_ == 2:
            env.sim.faults(env.tid(2)).drop_id = False
        env.clock.advance(900)
        await engine.tick()
        if round_ == 2:
            env.sim.delete_item(env.tid(1), env.sim.items(env.tid(1))[0]["id"])
            await engine.reconcile("invoices", partition=env.tid(1))
            await engine.tick()

    sequences = per_partition(recorder.events)
    assert set(sequences) == {t.id for t in env.tenants}
    for tenant, numbers in sequences.items():
        assert numbers == list(range(1, len(numbers) + 1)), tenant
    assert per_partition(store.outbox["invoices"]) == sequences
    assert {i.partition: i.sequence for i in engine.inspect()} == {
        t: len(n) for t, n in sequences.items()
    }
    assert "deleted" in {e.type for e in recorder.events if e.partition == env.tid(1)}
    assert store.parked[f"invoices/{env.tid(2)}"]
