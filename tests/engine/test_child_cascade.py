"""A child paused by its parent item pauses its own children, and they resume with it: a
deleted project's issues stop reading their comments, and read them again when it comes back.
The memory store, a fake clock; the vendor and pollers of ``test_child_streams``."""

from __future__ import annotations

from tests.engine.test_child_expiry import vendor
from tests.engine.test_child_streams import keys_of, pollers
from watukuy import Engine, FakeClock, MemoryStore


async def test_a_paused_childs_children_pause_and_resume_with_it() -> None:
    vendor_, clock, store = vendor(), FakeClock(), MemoryStore()
    engine = Engine(pollers(vendor_, grandchildren=True), store=store, clock=clock)
    for _ in range(3):
        await engine.tick()
    assert keys_of(engine, "tracker.comments") == {"acme/P1/I7": False, "acme/P2/I8": False}

    vendor_.projects["acme"] = [{"id": "P1"}]  # P2 is deleted
    await engine.reconcile("tracker.projects", partition="acme")
    for _ in range(3):
        await engine.tick()
    assert store.states["tracker.issues/acme/P2"].paused == "parent"
    assert store.states["tracker.comments/acme/P2/I8"].paused == "parent"
    assert store.states["tracker.comments/acme/P1/I7"].paused is None
    assert store.pending == {}
    polled = vendor_.polls("comments", "acme/P2/I8")
    clock.advance(7200)
    for _ in range(3):
        await engine.tick()
    assert vendor_.polls("comments", "acme/P2/I8") == polled  # paused: not read
    assert vendor_.polls("comments", "acme/P1/I7") > 1

    vendor_.projects["acme"].append({"id": "P2"})  # it comes back
    clock.advance(3600)  # the projects' next poll
    for _ in range(4):  # P2 created; its issues resumed; their comments resumed, then polled
        await engine.tick()
    assert keys_of(engine, "tracker.comments") == {"acme/P1/I7": False, "acme/P2/I8": False}
    assert vendor_.polls("comments", "acme/P2/I8") == polled + 1  # resumed, due at once
    assert store.pending == {}


async def test_resuming_never_creates_a_grandchild_the_parent_did_not_want() -> None:
    vendor_, clock, store = vendor(), FakeClock(), MemoryStore()
    live = pollers(vendor_, grandchildren=True)
    engine = Engine(live, store=store, clock=clock)
    for _ in range(3):
        await engine.tick()
    await engine.partitions.remove("tracker.comments", "acme/P2/I8")  # say it was never wanted
    vendor_.projects["acme"] = [{"id": "P1"}]
    await engine.reconcile("tracker.projects", partition="acme")
    for _ in range(3):
        await engine.tick()
    vendor_.projects["acme"].append({"id": "P2"})
    clock.advance(60)
    for _ in range(4):
        await engine.tick()
    assert keys_of(engine, "tracker.issues")["acme/P2"] is False
    assert "tracker.comments/acme/P2/I8" not in store.states
    assert store.pending == {}


async def test_a_child_stream_added_later_gets_its_keys_when_its_parent_is_replayed() -> None:
    # Unchanged parent items publish nothing, so they send nothing: a replay of the parent
    # republishes them (same event ids, so consumers see each once) and so creates the keys.
    vendor_, clock, store = vendor(), FakeClock(), MemoryStore()
    projects, issues = pollers(vendor_)
    engine = Engine([projects], store=store, clock=clock)
    await engine.tick()
    await engine.add_poller(issues)
    await engine.tick()
    await engine.tick()
    assert keys_of(engine, "tracker.issues") == {}

    for tenant in ("acme", "globex"):
        await engine.replay("tracker.projects", from_=None, partition=tenant)
    for _ in range(3):
        await engine.tick()
    assert keys_of(engine, "tracker.issues") == {
        "acme/P1": False,
        "acme/P2": False,
        "globex/P1": False,
    }
