"""A child partition paused by its parent item or its tenant's removal is kept for its
poller's ``retain``, then deleted with everything stored for it, so child state does not grow
without bound as parent items come and go; one a user paused stays. The memory store, a fake
clock; the vendor and pollers of ``test_child_streams``."""

from __future__ import annotations

from dataclasses import replace

from tests.engine.test_child_streams import Vendor, keys_of, pollers
from watukuy import Engine, FakeClock, MemoryStore
from watukuy.core.poller import Poller

RETAIN = 7 * 86400.0


def vendor() -> Vendor:
    return Vendor(
        tenants={"acme": {"token": "secret-acme"}, "globex": {"token": "secret-globex"}},
        projects={"acme": [{"id": "P1"}, {"id": "P2"}], "globex": [{"id": "P1"}]},
        issues={("acme", "P1"): [{"id": "I7"}], ("acme", "P2"): [{"id": "I8"}]},
        comments={("acme", "P1", "I7"): [{"id": "C1"}]},
    )


def retaining(live: list[Poller]) -> list[Poller]:
    return [p if p.parent is None else replace(p, retain=RETAIN) for p in live]


async def started(vendor: Vendor) -> tuple[Engine, MemoryStore, FakeClock]:
    clock, store = FakeClock(), MemoryStore()
    engine = Engine(retaining(pollers(vendor, grandchildren=True)), store=store, clock=clock)
    for _ in range(3):
        await engine.tick()
    assert sorted(keys_of(engine, "tracker.comments")) == ["acme/P1/I7", "acme/P2/I8"]
    return engine, store, clock


async def refreshed_after(engine: Engine, clock: FakeClock, seconds: float) -> None:
    clock.advance(seconds)
    for name in ("tracker.projects", "tracker.issues", "tracker.comments"):
        await engine.partitions.list(name)
    await engine.tick()


async def test_a_child_paused_by_its_parent_is_deleted_after_retain() -> None:
    vendor_ = vendor()
    engine, store, clock = await started(vendor_)
    vendor_.projects["acme"] = [{"id": "P1"}]
    await engine.reconcile("tracker.projects", partition="acme")  # finds P2 deleted
    for _ in range(3):  # P2's issues paused; their comments paused with them
        await engine.tick()
    assert store.states["tracker.issues/acme/P2"].paused == "parent"
    assert store.states["tracker.issues/acme/P2"].paused_at == clock.now()

    await refreshed_after(engine, clock, RETAIN - 60)
    assert "tracker.issues/acme/P2" in store.states  # kept for retain
    await refreshed_after(engine, clock, 60)
    assert "tracker.issues/acme/P2" not in store.states
    assert "tracker.comments/acme/P2/I8" not in store.states  # paused with it, gone with it
    assert not [k for k in store.snapshots if k.startswith("tracker.issues/acme/P2")]
    assert "acme/P2" not in keys_of(engine, "tracker.issues")
    assert "tracker.issues/acme/P1" in store.states  # its live sibling stays

    vendor_.projects["acme"].append({"id": "P2"})  # back after expiry: created afresh
    await refreshed_after(engine, clock, 900)
    await engine.tick()
    assert keys_of(engine, "tracker.issues")["acme/P2"] is False
    assert store.states["tracker.issues/acme/P2"].paused_at is None


async def test_children_of_a_removed_tenant_are_deleted_after_retain() -> None:
    vendor_ = vendor()
    engine, store, clock = await started(vendor_)
    del vendor_.tenants["acme"]
    await refreshed_after(engine, clock, 60)
    paused = {k: s.paused for k, s in store.states.items() if "/acme/" in k}
    assert paused == {
        "tracker.issues/acme/P1": "removed",
        "tracker.issues/acme/P2": "removed",
        "tracker.comments/acme/P1/I7": "removed",
        "tracker.comments/acme/P2/I8": "removed",
    }
    await refreshed_after(engine, clock, RETAIN)
    assert not [k for k in store.states if "/acme/" in k]
    assert "tracker.projects/acme" in store.states  # a tenant's own state stays (paused)
    assert "tracker.issues/globex/P1" in store.states


async def test_a_child_a_user_paused_is_kept() -> None:
    engine, store, clock = await started(vendor())
    await engine.pause("tracker.issues", partition="acme/P1")
    await refreshed_after(engine, clock, 2 * RETAIN)
    assert store.states["tracker.issues/acme/P1"].paused == "user"
    await engine.resume("tracker.issues", partition="acme/P1")
    assert store.states["tracker.issues/acme/P1"].paused_at is None
