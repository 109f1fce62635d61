"""Child streams on the memory store: a parent's commit creates its children's keys once, due
at once; a deleted parent item (or one leaving ``where``) pauses its child, which resumes when
the item comes back; a removed tenant pauses its children and grandchildren; a parent item
without a key is parked with the reason. Keys read ``tenant/project[/issue]``."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from watukuy import ConfigError, Engine, FakeClock, MemoryStore, Partition, define_poller
from watukuy.core.errors import NewerRelease
from watukuy.core.poller import Poller


@dataclass
class Vendor:
    """Projects per tenant, issues per project, comments per issue; counts every fetch."""

    tenants: dict[str, dict[str, Any]] = field(default_factory=dict)
    projects: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    issues: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    comments: dict[tuple[str, str, str], list[dict[str, Any]]] = field(default_factory=dict)
    fetched: list[tuple[str, str, tuple[str, ...], Any]] = field(default_factory=list)

    def listing(self) -> list[Partition]:
        return [Partition(key, data) for key, data in self.tenants.items()]

    async def fetch_projects(self, ctx: Any) -> dict[str, Any]:
        self.fetched.append(("projects", ctx.partition.key, ctx.partition.parents, None))
        return {"items": list(self.projects.get(ctx.partition.key, [])), "cursor": None}

    async def fetch_issues(self, ctx: Any) -> dict[str, Any]:
        partition = ctx.partition
        self.fetched.append(("issues", partition.key, partition.parents, partition.data))
        tenant = partition.key.rsplit("/", 1)[0]
        return {"items": list(self.issues.get((tenant, partition.parents[0]), [])), "cursor": None}

    async def fetch_comments(self, ctx: Any) -> dict[str, Any]:
        partition = ctx.partition
        self.fetched.append(("comments", partition.key, partition.parents, partition.data))
        tenant = partition.key.rsplit("/", 2)[0]
        issue, project = partition.parents
        items = self.comments.get((tenant, project, issue), [])
        return {"items": list(items), "cursor": None}

    def polls(self, stream: str, key: str) -> int:
        return sum(1 for s, k, _, _ in self.fetched if (s, k) == (stream, key))


CHILDREN = ["acme/P1", "acme/P2", "globex/P1"]
"""The keys of tracker.issues: one per project of each tenant."""
CHILD_SCHEDULE = {"min": "10m", "max": "1h"}
"""Slower than the parent (30s): a child polled again right after its parent is a re-read."""


def pollers(vendor: Vendor, *, where: Any = None, grandchildren: bool = False) -> list[Poller]:
    none = {"strategy": "none"}
    out = [
        define_poller(
            name="tracker.projects",
            partitions=vendor.listing,
            identity=lambda item: item["id"],
            fetch=vendor.fetch_projects,
            cursor=none,
        ),
        define_poller(
            name="tracker.issues",
            parent={"poller": "tracker.projects", "key": "id", "where": where},
            identity=lambda item: item["id"],
            fetch=vendor.fetch_issues,
            cursor=none,
            schedule=CHILD_SCHEDULE,
        ),
    ]
    if grandchildren:
        out.append(
            define_poller(
                name="tracker.comments",
                parent={"poller": "tracker.issues", "key": lambda item: item["id"]},
                identity=lambda item: item["id"],
                fetch=vendor.fetch_comments,
                cursor=none,
            )
        )
    return out


def keys_of(engine: Engine, poller: str) -> dict[str, bool]:
    """The held keys of ``poller`` and whether each is paused."""
    return {i.partition: i.paused for i in engine.inspect() if i.poller == poller}


@pytest.fixture
def vendor() -> Vendor:
    return Vendor(
        tenants={"acme": {"token": "secret-acme"}, "globex": {"token": "secret-globex"}},
        projects={
            "acme": [{"id": "P1", "archived": False}, {"id": "P2", "archived": False}],
            "globex": [{"id": "P1", "archived": False}],
        },
        issues={("acme", "P1"): [{"id": "I7"}], ("acme", "P2"): [], ("globex", "P1"): []},
        comments={("acme", "P1", "I7"): [{"id": "C1"}]},
    )


async def test_a_parent_commit_creates_each_child_once_due_at_once(vendor: Vendor) -> None:
    clock, store = FakeClock(), MemoryStore()
    engine = Engine(pollers(vendor), store=store, clock=clock)

    await engine.tick()  # the projects are polled; their commit sends the children's creation
    assert keys_of(engine, "tracker.issues") == {}
    await engine.tick()  # the children are created and polled at once: no time passed

    assert keys_of(engine, "tracker.issues") == {
        "acme/P1": False,
        "acme/P2": False,
        "globex/P1": False,
    }
    assert vendor.polls("issues", "acme/P1") == 1
    # The child reads its tenant's live data and its parent's key.
    assert ("issues", "acme/P1", ("P1",), {"token": "secret-acme"}) in vendor.fetched
    assert store.pending == {}  # every creation was applied and taken away

    # A parent item that changes does not make its child poll again (its parent polls, and
    # sends an adopt that finds the child live).
    vendor.projects["acme"][0]["name"] = "renamed"
    clock.advance(30)
    await engine.tick()
    await engine.tick()
    assert vendor.polls("issues", "acme/P1") == 1
    assert (
        store.states["tracker.issues/acme/P1"].created
        == store.states["tracker.issues/acme/P2"].created
    )


async def test_a_restart_between_parent_commit_and_child_creation_creates_once(
    vendor: Vendor,
) -> None:
    clock, store = FakeClock(), MemoryStore()
    first = Engine(pollers(vendor), store=store, clock=clock)
    await first.tick()  # the parent committed; its commands wait in the store
    assert sorted(c.partition for c in store.pending.values()) == [
        "acme/P1",
        "acme/P2",
        "globex/P1",
    ]
    # "killed": the first engine never takes them. A second one over the same store does.
    second = Engine(pollers(vendor), store=store, clock=clock)
    await second.tick()
    await second.tick()
    assert vendor.polls("issues", "acme/P1") == 1
    assert store.pending == {}
    created = store.states["tracker.issues/acme/P1"]

    third = Engine(pollers(vendor), store=store, clock=clock)
    await third.tick()
    await third.tick()
    assert store.states["tracker.issues/acme/P1"].created == created.created
    assert store.states["tracker.issues/acme/P1"].sequence == created.sequence
    assert vendor.polls("issues", "acme/P1") == 1  # restored, not due: not polled again


async def test_a_deleted_parent_item_pauses_its_child_and_its_return_resumes_it(
    vendor: Vendor,
) -> None:
    clock = FakeClock()
    engine = Engine(pollers(vendor), store=MemoryStore(), clock=clock)
    await engine.tick()
    await engine.tick()

    vendor.projects["acme"] = [p for p in vendor.projects["acme"] if p["id"] != "P2"]
    await engine.reconcile("tracker.projects", partition="acme")  # finds the deletion
    await engine.tick()
    await engine.tick()
    assert keys_of(engine, "tracker.issues")["acme/P2"] is True
    assert keys_of(engine, "tracker.issues")["acme/P1"] is False
    clock.advance(3600)
    await engine.tick()
    await engine.tick()
    assert vendor.polls("issues", "acme/P2") == 1  # paused: not polled
    assert vendor.polls("issues", "acme/P1") > 1

    vendor.projects["acme"].append({"id": "P2", "archived": False})
    clock.advance(900)
    await engine.tick()
    await engine.tick()
    assert keys_of(engine, "tracker.issues")["acme/P2"] is False
    assert vendor.polls("issues", "acme/P2") == 2  # resumed, and due at once


@pytest.mark.parametrize(
    "where",
    [lambda item: item.get("archived") is False, {"path": "archived", "equals": False}],
    ids=["callable", "filter"],
)
async def test_a_parent_item_leaving_where_pauses_its_child(vendor: Vendor, where: Any) -> None:
    clock = FakeClock()
    live = pollers(vendor, where=where)
    vendor.projects["acme"][1]["archived"] = True  # never wanted: no child at all
    engine = Engine(live, store=MemoryStore(), clock=clock)
    await engine.tick()
    await engine.tick()
    assert sorted(keys_of(engine, "tracker.issues")) == ["acme/P1", "globex/P1"]

    vendor.projects["acme"][0]["archived"] = True
    clock.advance(900)
    await engine.tick()
    await engine.tick()
    assert keys_of(engine, "tracker.issues")["acme/P1"] is True

    vendor.projects["acme"][0]["archived"] = False
    clock.advance(900)
    await engine.tick()
    await engine.tick()
    assert keys_of(engine, "tracker.issues")["acme/P1"] is False


async def test_grandchildren_read_every_ancestor_and_pause_with_their_tenant(
    vendor: Vendor,
) -> None:
    clock = FakeClock()
    engine = Engine(pollers(vendor, grandchildren=True), store=MemoryStore(), clock=clock)
    for _ in range(3):
        await engine.tick()
    assert keys_of(engine, "tracker.comments") == {"acme/P1/I7": False}
    assert ("comments", "acme/P1/I7", ("I7", "P1"), {"token": "secret-acme"}) in vendor.fetched

    del vendor.tenants["acme"]  # the tenant goes: its children and grandchildren pause
    await engine.partitions.list("tracker.projects")
    await engine.tick()
    assert keys_of(engine, "tracker.comments") == {}
    assert sorted(keys_of(engine, "tracker.issues")) == ["globex/P1"]
    store = engine.store
    assert isinstance(store, MemoryStore)
    assert store.states["tracker.comments/acme/P1/I7"].paused == "removed"

    vendor.tenants["acme"] = {"token": "rotated"}  # it comes back: they resume, live data
    await engine.partitions.list("tracker.projects")
    await engine.tick()
    assert keys_of(engine, "tracker.comments") == {"acme/P1/I7": False}
    assert ("comments", "acme/P1/I7", ("I7", "P1"), {"token": "rotated"}) in vendor.fetched


async def test_a_parent_item_without_its_key_is_parked_with_the_reason(vendor: Vendor) -> None:
    vendor.projects["acme"].append({"name": "no id here", "archived": False})
    live = pollers(vendor)
    live[1] = define_poller(
        name="tracker.issues",
        parent={"poller": "tracker.projects", "key": "meta.slug"},
        identity=lambda item: item["id"],
        fetch=vendor.fetch_issues,
        cursor={"strategy": "none"},
    )
    live[0] = define_poller(
        name="tracker.projects",
        partitions=vendor.listing,
        identity=lambda item: item.get("id") or item["name"],
        fetch=vendor.fetch_projects,
        cursor={"strategy": "none"},
    )
    engine = Engine(live, store=MemoryStore(), clock=FakeClock())
    await engine.tick()
    await engine.tick()

    parked = await engine.parked.list("tracker.projects", partition="acme")
    assert len(parked) == 3  # every acme project lacks "meta.slug"
    assert all("child stream 'tracker.issues' has no key" in p.error for p in parked)
    assert all("no value at key path 'meta.slug'" in p.error for p in parked)
    assert keys_of(engine, "tracker.issues") == {}


def test_a_parent_is_checked_where_it_is_defined() -> None:
    async def fetch(ctx: Any) -> dict[str, Any]:
        return {"items": []}

    with pytest.raises(ConfigError, match=r"parent\.key"):
        define_poller(name="c", parent={"poller": "p", "key": 5}, identity=id, fetch=fetch)
    with pytest.raises(ConfigError, match=r"parent\.where"):
        define_poller(
            name="c",
            parent={"poller": "p", "key": "id", "where": {"path": "a", "near": 1}},
            identity=id,
            fetch=fetch,
        )
    with pytest.raises(ConfigError, match="own parent"):
        define_poller(name="c", parent={"poller": "c", "key": id}, identity=id, fetch=fetch)
    with pytest.raises(ConfigError, match="takes no partitions"):
        define_poller(
            name="c", parent={"poller": "p", "key": id}, partitions=list, identity=id, fetch=fetch
        )
    orphan = define_poller(name="c", parent={"poller": "p", "key": id}, identity=id, fetch=fetch)
    with pytest.raises(ConfigError, match="unknown parent poller 'p'"):
        Engine([orphan])


class SharedStore(MemoryStore):
    """A memory store that owns every key but ``acme/P2``'s children (another instance's)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[Any] = []

    def owns(self, poller: str, partition: str) -> bool:
        return not partition.startswith("acme/P2")

    async def send_command(self, command: Any) -> None:
        self.sent.append(command)


async def test_an_operation_on_a_child_key_held_elsewhere_goes_to_its_owner(
    vendor: Vendor,
) -> None:
    store = SharedStore()
    engine = Engine(pollers(vendor), store=store, clock=FakeClock())
    await engine.tick()
    await engine.tick()
    assert sorted(keys_of(engine, "tracker.issues")) == ["acme/P1", "globex/P1"]
    assert "tracker.issues/acme/P2" not in store.states  # not ours to create

    await engine.pause("tracker.issues", partition="acme/P2")

    assert [(c.op, c.key) for c in store.sent] == [("pause", "tracker.issues/acme/P2")]


class NewerStore(MemoryStore):
    """A memory store where ``acme/P2``'s child was written by a newer release."""

    async def load(self, poller: str, partition: str, *, snapshot: bool = True) -> Any:
        if partition == "acme/P2":
            raise NewerRelease("written by a newer release")
        return await super().load(poller, partition, snapshot=snapshot)


async def test_a_child_written_by_a_newer_release_is_left_for_it(vendor: Vendor) -> None:
    store = NewerStore()
    engine = Engine(pollers(vendor), store=store, clock=FakeClock())
    await engine.tick()
    await engine.tick()  # does not stop on it: the other children are created

    assert sorted(keys_of(engine, "tracker.issues")) == ["acme/P1", "globex/P1"]
    assert [c.partition for c in store.pending.values()] == ["acme/P2"]  # left pending


async def test_a_parent_that_does_not_publish_still_drives_its_children(vendor: Vendor) -> None:
    projects, *rest = pollers(vendor)
    silent = replace(projects, extra={**projects.extra, "publish": False})
    store = MemoryStore()
    engine = Engine([silent, *rest], store=store, clock=FakeClock())

    await engine.tick()
    await engine.tick()

    assert set(keys_of(engine, "tracker.issues")) == set(CHILDREN)
    assert store.outbox["tracker.projects"] == []  # polled, never published
    assert [event.subject for event in store.outbox["tracker.issues"]] == ["I7"]
