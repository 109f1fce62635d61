"""A declarative connector with a stream, a child and a grandchild (``parent:``), run by the
engine on the memory store against the vendor simulator's tracker: projects (those not
archived have issues polled), their issues, and the issues' comments."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from integration.simulator import TrackerSizes, VendorSimulator, running_simulator
from watukuy import ConfigError, Engine, FakeClock, MemoryStore
from watukuy.declarative import compile_connector_entry

SIZES = TrackerSizes(projects=4, issues_per_project=3, comments_per_issue=2, users=1)


def connector(base_url: str, sim: VendorSimulator) -> dict[str, Any]:
    tenants = [{"key": t.id, "data": {"slug": t.slug, "token": t.token}} for t in sim.tenants]
    return {
        "name": "tracker",
        "partitions": {"static": tenants},
        "defaults": {
            "request": {
                "base": base_url + "/{partition.data.slug}",
                "auth": {"bearer": "{partition.data.token}"},
            },
            "records": "data",
            "identity": "id",
            "paginate": {"next_token": {"path": "next", "param": "cursor"}},
            "cursor": {"none": True},
        },
        "streams": [
            {"name": "projects", "request": {"path": "/projects"}, "publish": False},
            {
                "name": "issues",
                "parent": {
                    "stream": "projects",
                    "key": "id",
                    "where": {"path": "archived", "equals": False},
                },
                "request": {"path": "/projects/{parent.key}/issues"},
            },
            {
                "name": "comments",
                "parent": {"stream": "issues", "key": "id"},
                "request": {"path": "/projects/{parent.parent.key}/issues/{parent.key}/comments"},
            },
        ],
    }


@pytest.fixture
async def served() -> AsyncIterator[tuple[VendorSimulator, str, FakeClock]]:
    clock = FakeClock()
    sim = VendorSimulator(tenants=2, items_per_tenant=1, seed=3, now=clock.now, tracker=SIZES)
    async with running_simulator(sim) as base_url:
        yield sim, base_url, clock


async def test_projects_issues_and_comments_as_child_streams(
    served: tuple[VendorSimulator, str, FakeClock],
) -> None:
    sim, base_url, clock = served
    pollers = compile_connector_entry(
        connector(base_url, sim), where="pollers[0]", base_dir=Path(".")
    )
    assert [(p.name, p.parent and p.parent.poller) for p in pollers] == [
        ("tracker.projects", None),
        ("tracker.issues", "tracker.projects"),
        ("tracker.comments", "tracker.issues"),
    ]
    store = MemoryStore()
    async with Engine(pollers, store=store, clock=clock) as engine:
        for _ in range(4):  # projects, then issues, then comments: each due at once
            await engine.tick()

        expected_issues, expected_comments = set(), set()
        for tenant in sim.tenants:
            live = {p["id"] for p in sim.records(tenant.id, "projects") if not p["archived"]}
            issues = [i for i in sim.records(tenant.id, "issues") if i["project"] in live]
            expected_issues |= {f"{tenant.id}/{p}" for p in live}
            parents = {i["id"]: i["project"] for i in issues}
            expected_comments |= {f"{tenant.id}/{parents[i]}/{i}" for i in parents}
        held = {(i.poller, i.partition) for i in engine.inspect() if not i.paused}
        assert {k for p, k in held if p == "tracker.issues"} == expected_issues
        assert {k for p, k in held if p == "tracker.comments"} == expected_comments
        assert any(p["archived"] for t in sim.tenants for p in sim.records(t.id, "projects"))

    comments = store.outbox["tracker.comments"]
    assert {e.partition for e in comments} == expected_comments
    assert len(comments) == len(expected_comments) * SIZES.comments_per_issue


@pytest.mark.parametrize(
    ("change", "path", "message"),
    [
        ({"parent": {"stream": "nope", "key": "id"}}, "streams[1].parent.stream", "nope"),
        ({"parent": {"stream": "issues", "key": "id"}}, "streams[1].parent", "parents loop"),
        ({"parent": {"stream": "projects"}}, "streams[1].parent.key", "path"),
        ({"request": {"path": "/x/{parent.parent.key}"}}, "streams[1].request.path", "deep"),
    ],
)
def test_a_bad_parent_is_refused_at_its_path(
    change: dict[str, Any], path: str, message: str
) -> None:
    entry = connector("https://api.test", VendorSimulator(tenants=1, items_per_tenant=1))
    entry["streams"][1] = {**entry["streams"][1], **change}
    with pytest.raises(ConfigError, match=message) as caught:
        compile_connector_entry(entry, where="pollers[0]", base_dir=Path("."))
    assert caught.value.path == f"pollers[0].{path}"


def test_parent_is_not_a_default() -> None:
    entry = connector("https://api.test", VendorSimulator(tenants=1, items_per_tenant=1))
    entry["defaults"]["parent"] = {"stream": "projects", "key": "id"}
    with pytest.raises(ConfigError) as caught:
        compile_connector_entry(entry, where="pollers[0]", base_dir=Path("."))
    assert caught.value.path == "pollers[0].defaults.parent"
