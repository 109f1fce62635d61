"""inspect(): one PollerInspect per active partition, and a failing tenant that stays its own
problem (its circuit, its lag) while the others' events flow in the same tick."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.engine.support import Env
from watukuy import Engine, PollerInspect


def only(engine: Engine, partition: str) -> PollerInspect:
    (entry,) = [i for i in engine.inspect() if i.partition == partition]
    return entry


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


async def test_inspect_reports_each_active_partition(env: Env, engine: Engine) -> None:
    assert engine.inspect() == []  # nothing evaluated yet
    await engine.tick()
    start = env.clock.now()

    entries = engine.inspect()

    assert all(isinstance(i, PollerInspect) for i in entries)
    assert [(i.poller, i.partition) for i in entries] == [("invoices", t.id) for t in env.tenants]
    for entry in entries:
        assert entry.paused is False
        assert entry.circuit == "closed"
        assert entry.interval == 30.0
        assert entry.next_due == at(start + 30)
        assert entry.lag == 0.0
        assert entry.parked == {"invalid": 0, "poison": 0}
        assert entry.owner is None
        assert entry.sequence == 10

    env.clock.advance(12)
    assert [i.lag for i in engine.inspect()] == [12.0] * 3
    await engine.pause("invoices", partition=env.tid(1))
    assert [(i.partition, i.paused, i.next_due) for i in engine.inspect()] == [
        (env.tid(0), False, at(start + 30)),
        (env.tid(1), True, None),
        (env.tid(2), False, at(start + 30)),
    ]


async def test_a_failing_tenant_opens_only_its_own_circuit_and_delays_no_one(env: Env) -> None:
    poller = env.make_poller(circuit={"failure_threshold": 2, "cooldown": "60s"})
    engine = env.make_engine(poller)
    recorder = env.recorder(engine)
    sick, healthy = env.tid(0), env.tid(1)
    env.sim.faults(sick).error_rate = 1.0
    start = env.clock.now()

    await engine.tick()

    assert recorder.of(sick) == []
    assert len(recorder.of(healthy)) == 10  # the same tick delivered the healthy tenants
    assert len(recorder.of(env.tid(2))) == 10
    entry = only(engine, sick)
    assert entry.circuit == "closed"  # one failure, threshold 2
    assert entry.lag is None  # never succeeded
    assert entry.last_error is not None and "503" in entry.last_error
    assert entry.next_due == at(start + 30)

    env.clock.advance(30)
    item = env.sim.items(healthy)[0]
    env.sim.update_item(healthy, item["id"], amount=2.0)
    await engine.tick()

    entry = only(engine, sick)
    assert entry.circuit == "open"
    assert entry.next_due == at(start + 30 + 60)  # the cooldown
    assert [(e.subject, e.type) for e in recorder.of(healthy)[10:]] == [(item["id"], "updated")]
    assert only(engine, healthy).circuit == "closed"
    assert only(engine, env.tid(2)).circuit == "closed"
    requests = env.sim.request_count(sick)
    assert requests == 2

    env.clock.advance(59)
    await engine.tick()
    assert env.sim.request_count(sick) == requests  # open: no request before the cooldown

    env.sim.faults(sick).error_rate = 0.0
    env.clock.advance(1)
    await engine.tick()  # the probe succeeds
    assert only(engine, sick).circuit == "closed"
    assert only(engine, sick).lag == 0.0
    assert only(engine, sick).last_error is None
    assert [e.sequence for e in recorder.of(sick)] == list(range(1, 11))
