"""The vendor simulator's tracker: projects, their issues, the issues' comments and users.

A connector with a stream, a child and a grandchild (issue 23) runs against these, so each
test pins what such a connector relies on, through HTTP as a poller sees it: paging, resume
cursors, ETags, faults, 404 for a parent that is gone, changes over time, and the admin
ground truth per collection.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
from aiohttp import ClientSession

from integration.simulator import TrackerSizes, VendorSimulator, running_simulator
from integration.simulator.__main__ import _parser

pytestmark = pytest.mark.unit

SIZES = TrackerSizes(projects=3, issues_per_project=7, comments_per_issue=4, users=5)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_750_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def sim() -> VendorSimulator:
    return VendorSimulator(tenants=2, items_per_tenant=4, seed=11, now=FakeClock(), tracker=SIZES)


@pytest.fixture
async def http(sim: VendorSimulator) -> AsyncIterator[ClientSession]:
    async with running_simulator(sim) as base_url, ClientSession(base_url=base_url) as session:
        yield session


async def get(
    http: ClientSession,
    sim: VendorSimulator,
    path: str,
    headers: Mapping[str, str] | None = None,
    **params: Any,
) -> tuple[int, dict[str, Any] | None, Mapping[str, str]]:
    """One listing request of the first tenant: status, parsed body, headers."""
    tenant = sim.tenants[0]
    query = {key: str(value) for key, value in params.items() if value is not None}
    auth = {"Authorization": f"Bearer {tenant.token}"} | dict(headers or {})
    async with http.get(f"/{tenant.slug}{path}", params=query, headers=auth) as resp:
        text = await resp.text()
        return resp.status, json.loads(text) if text else None, resp.headers


async def scan(
    http: ClientSession, sim: VendorSimulator, path: str, cursor: str | None = None
) -> tuple[list[dict[str, Any]], str, int]:
    """Follow ``next`` with pages of 2: every record, the last ``resume``, the page count."""
    records: list[dict[str, Any]] = []
    pages = 0
    while True:
        status, body, _ = await get(http, sim, path, cursor=cursor, limit=2)
        assert status == 200 and body is not None, body
        records.extend(body["data"])
        pages += 1
        if body["next"] is None:
            return records, body["resume"], pages
        cursor = body["next"]


def public(records: list[dict[str, Any]], parent_field: str | None = None) -> list[dict[str, Any]]:
    """The admin listing as the vendor API shows it: without the parent's id."""
    return [{k: v for k, v in r.items() if k != parent_field} for r in records]


def first_issue_path(sim: VendorSimulator) -> tuple[str, str, str]:
    """``(project id, issue id, comments path)`` of the first project's first issue."""
    tenant = sim.tenants[0].id
    project = sim.records(tenant, "projects")[0]["id"]
    issue = next(i["id"] for i in sim.records(tenant, "issues") if i["project"] == project)
    return project, issue, f"/projects/{project}/issues/{issue}/comments"


# -- shapes and sizes -------------------------------------------------------------------------


async def test_each_collection_has_the_promised_fields_and_sizes(
    http: ClientSession, sim: VendorSimulator
) -> None:
    tenant = sim.tenants[0].id
    users, _, _ = await scan(http, sim, "/users")
    projects, _, _ = await scan(http, sim, "/projects")
    assert len(users) == 5 and len(projects) == 3
    assert all(set(u) == {"id", "etag", "email", "name", "updated_at"} for u in users)
    assert all(set(p) == {"id", "etag", "name", "archived", "updated_at"} for p in projects)
    assert all(isinstance(p["archived"], bool) for p in projects)
    emails = {u["email"] for u in users}
    for project in projects:
        issues, _, _ = await scan(http, sim, f"/projects/{project['id']}/issues")
        assert len(issues) == 7
        for issue in issues:
            assert set(issue) == {"id", "etag", "title", "status", "spam", "reporter", "updated_at"}
            assert issue["status"] in ("open", "pending", "closed")
            assert isinstance(issue["spam"], bool)
            assert set(issue["reporter"]) == {"email", "internal_note"}
            assert issue["reporter"]["email"] in emails
    _, _, path = first_issue_path(sim)
    comments, _, _ = await scan(http, sim, path)
    assert len(comments) == 4
    assert all(set(c) == {"id", "etag", "body", "author", "updated_at"} for c in comments)
    assert len(sim.records(tenant, "comments")) == 3 * 7 * 4
    statuses = {i["status"] for i in sim.records(tenant, "issues")}
    assert statuses == {"open", "pending", "closed"}  # a filter on status has work to do


def test_the_tracker_leaves_the_items_and_tokens_as_they_were() -> None:
    plain = VendorSimulator(3, 10, seed=5, tracker=TrackerSizes(0, 0, 0, 0))
    tracked = VendorSimulator(3, 10, seed=5, tracker=TrackerSizes(4, 5, 6, 7))
    assert [t.to_json() for t in plain.tenants] == [t.to_json() for t in tracked.tenants]
    assert [plain.items(t.id) for t in plain.tenants] == [
        tracked.items(t.id) for t in tracked.tenants
    ]
    assert plain.records("t_0001", "projects") == []
    again = VendorSimulator(3, 10, seed=5, tracker=TrackerSizes(4, 5, 6, 7))
    assert again.records("t_0002", "comments") == tracked.records("t_0002", "comments")


def test_tracker_sizes_come_from_the_command_line() -> None:
    args = _parser().parse_args(["--projects", "4", "--issues", "2", "--comments", "0"])
    assert (args.projects, args.issues, args.comments, args.users) == (4, 2, 0, 3)
    with pytest.raises(ValueError, match="projects must be an integer >= 0"):
        TrackerSizes(projects=-1)


# -- paging, cursors, validators --------------------------------------------------------------


@pytest.mark.parametrize("collection", ["projects", "issues", "comments", "users"])
async def test_paging_covers_every_record_once_in_order(
    http: ClientSession, sim: VendorSimulator, collection: str
) -> None:
    tenant = sim.tenants[0].id
    project, issue, comments_path = first_issue_path(sim)
    path, parent_field, expected = {
        "projects": ("/projects", None, sim.records(tenant, "projects")),
        "users": ("/users", None, sim.records(tenant, "users")),
        "issues": (
            f"/projects/{project}/issues",
            "project",
            [i for i in sim.records(tenant, "issues") if i["project"] == project],
        ),
        "comments": (
            comments_path,
            "issue",
            [c for c in sim.records(tenant, "comments") if c["issue"] == issue],
        ),
    }[collection]
    records, _, pages = await scan(http, sim, path)
    assert records == public(expected, parent_field)
    assert len(expected) >= 3 and pages == -(-len(expected) // 2)  # several pages, none empty
    assert len({r["id"] for r in records}) == len(records)


async def test_resume_on_issues_gives_only_later_changes_of_that_project(
    http: ClientSession, sim: VendorSimulator
) -> None:
    tenant = sim.tenants[0].id
    project, issue, _ = first_issue_path(sim)
    other_project = sim.records(tenant, "projects")[1]["id"]
    _, resume, _ = await scan(http, sim, f"/projects/{project}/issues")
    changed = sim.update_record(tenant, "issues", issue, status="closed", title="renamed")
    created = sim.create_record(tenant, "issues", project=project)
    sim.create_record(tenant, "issues", project=other_project)  # not under this project
    later, _, _ = await scan(http, sim, f"/projects/{project}/issues", cursor=resume)
    assert [(i["id"], i["status"]) for i in later] == [
        (changed["id"], "closed"),
        (created["id"], created["status"]),
    ]


async def test_if_none_match_on_comments_is_304_until_a_comment_is_added(
    http: ClientSession, sim: VendorSimulator
) -> None:
    _, issue, path = first_issue_path(sim)
    status, _, headers = await get(http, sim, path)
    etag = headers["ETag"]
    status, body, headers = await get(http, sim, path, {"If-None-Match": etag})
    assert (status, body, headers["ETag"]) == (304, None, etag)
    sim.create_record(sim.tenants[0].id, "comments", issue=issue, body="me too")
    status, body, headers = await get(http, sim, path, {"If-None-Match": etag})
    assert status == 200 and body is not None and headers["ETag"] != etag
    assert body["data"][-1]["body"] == "me too"


# -- faults, auth, missing parents ------------------------------------------------------------


async def test_an_injected_429_on_a_child_endpoint_says_when_to_retry(
    http: ClientSession, sim: VendorSimulator
) -> None:
    project, _, path = first_issue_path(sim)
    sim.set_faults(sim.tenants[0].id, fail_next=2, fail_status=429, retry_after=4)
    status, body, headers = await get(http, sim, f"/projects/{project}/issues")
    assert status == 429 and headers["Retry-After"] == "4" and body is not None
    assert (await get(http, sim, path))[0] == 429
    assert (await get(http, sim, path))[0] == 200


async def test_the_quota_is_one_per_tenant_across_collections(http: ClientSession) -> None:
    sim = VendorSimulator(tenants=1, items_per_tenant=2, quota=2, now=FakeClock())
    async with running_simulator(sim) as base_url, ClientSession(base_url=base_url) as session:
        assert (await get(session, sim, "/items"))[0] == 200
        assert (await get(session, sim, "/users"))[0] == 200
        status, _, headers = await get(session, sim, "/projects")
        assert status == 429 and "Retry-After" in headers


async def test_a_missing_parent_or_token_is_refused(
    http: ClientSession, sim: VendorSimulator
) -> None:
    tenant = sim.tenants[0].id
    project, issue, path = first_issue_path(sim)
    other_project = sim.records(tenant, "projects")[1]["id"]
    assert (await get(http, sim, "/projects/pr_9999/issues"))[0] == 404
    wrong = f"/projects/{other_project}/issues/{issue}/comments"  # an issue of another project
    status, body, headers = await get(http, sim, wrong)
    assert status == 404 and body is not None and "RateLimit-Remaining" in headers
    assert (await get(http, sim, path, {"Authorization": "Bearer nope"}))[0] == 401
    sim.delete_record(tenant, "issues", issue)
    assert (await get(http, sim, path))[0] == 404  # a deleted issue's comments are gone too
    assert all(c["issue"] != issue for c in sim.records(tenant, "comments"))
    assert (await get(http, sim, f"/projects/{project}/issues", limit=0))[0] == 400


async def test_tracker_records_are_poisoned_their_own_way(
    http: ClientSession, sim: VendorSimulator
) -> None:
    project, _, _ = first_issue_path(sim)
    path = f"/projects/{project}/issues"
    sim.set_faults(sim.tenants[0].id, poison_rate=1.0, poison_kinds=["oversized"], poison_bytes=50)
    _, body, _ = await get(http, sim, path)
    assert body is not None and all(len(i["title"]) > 50 for i in body["data"])
    sim.set_faults(sim.tenants[0].id, poison_rate=1.0, poison_kinds=["schema"])
    _, body, _ = await get(http, sim, path)
    assert body is not None and all(isinstance(i["updated_at"], int) for i in body["data"])
    poisoned = sim.poisoned(sim.tenants[0].id, "issues")
    assert len(poisoned) == 7  # each version once, as first served
    assert {(p["kind"], p["project"]) for p in poisoned} == {("oversized", project)}
    assert sim.served(sim.tenants[0].id, "issues") == []


# -- admin API and ground truth ---------------------------------------------------------------


async def test_admin_creates_updates_and_deletes_records_of_any_collection(
    http: ClientSession, sim: VendorSimulator
) -> None:
    tenant = sim.tenants[0].id
    admin = f"/_admin/tenants/{tenant}"
    async with http.post(f"{admin}/projects", json={"name": "launch", "archived": False}) as r:
        assert r.status == 201
        project = (await r.json())["id"]
    async with http.post(f"{admin}/issues", json={"project": project, "status": "open"}) as r:
        assert r.status == 201
        issue = await r.json()
        assert issue["project"] == project and issue["status"] == "open"
    async with http.post(f"{admin}/comments", json={"issue": "is_9999"}) as r:
        assert r.status == 404
    async with http.post(f"{admin}/comments", json={"body": "no parent"}) as r:
        assert r.status == 400
    async with http.post(f"{admin}/comments", json={"issue": issue["id"], "body": "hi"}) as r:
        assert r.status == 201
    async with http.patch(f"{admin}/projects/{project}", json={"archived": True}) as r:
        assert r.status == 200 and (await r.json())["archived"] is True
    async with http.patch(f"{admin}/issues/{issue['id']}", json={"project": "pr_0001"}) as r:
        assert r.status == 400  # an issue does not move between projects
    async with http.get(f"{admin}/issues") as r:
        assert issue["id"] in [i["id"] for i in (await r.json())["data"]]
    async with http.delete(f"{admin}/projects/{project}") as r:
        assert r.status == 204
    assert issue["id"] not in [i["id"] for i in sim.records(tenant, "issues")]
    assert all(c["body"] != "hi" for c in sim.records(tenant, "comments"))
    assert (await get(http, sim, f"/projects/{project}/issues"))[0] == 404
    async with http.get(f"{admin}/widgets") as r:
        assert r.status == 404


async def test_served_ground_truth_is_per_collection_and_names_the_parent(
    http: ClientSession, sim: VendorSimulator
) -> None:
    tenant = sim.tenants[0].id
    project, issue, path = first_issue_path(sim)
    issues, _, _ = await scan(http, sim, f"/projects/{project}/issues")
    comments, _, _ = await scan(http, sim, path)
    await scan(http, sim, path)  # served twice, listed once
    admin = f"/_admin/tenants/{tenant}/served"
    async with http.get(admin, params={"collection": "issues"}) as r:
        assert await r.json() == [
            {"id": i["id"], "version": i["etag"], "project": project} for i in issues
        ]
    async with http.get(admin, params={"collection": "comments"}) as r:
        expected = [{"id": c["id"], "version": c["etag"], "issue": issue} for c in comments]
        assert await r.json() == expected
    async with http.get(admin) as r:
        assert await r.json() == []  # the items were not listed
    async with http.get(admin, params={"collection": "widgets"}) as r:
        assert r.status == 400


# -- changes over time ------------------------------------------------------------------------


async def test_random_mutation_moves_every_kind_of_tracker_record(
    http: ClientSession, sim: VendorSimulator
) -> None:
    tenant = sim.tenants[0].id
    _, resume, _ = await scan(http, sim, "/projects")
    changes = [sim.mutate_tracker_randomly() for _ in range(60)]
    kinds = {(c[0], c[2]) for c in changes if c is not None}
    assert kinds == {
        ("update", "issues"),
        ("create", "comments"),
        ("update", "projects"),
        ("delete", "issues"),
        ("create", "issues"),
    }
    mine = [c for c in changes if c is not None and c[1] == tenant]
    toggled = {c[3] for c in mine if c[2] == "projects"}
    later, _, _ = await scan(http, sim, "/projects", cursor=resume)
    assert {p["id"] for p in later} == toggled  # a resume cursor sees the archived flips
    deleted = {c[3] for c in mine if c[0] == "delete"}
    assert deleted and not deleted & {i["id"] for i in sim.records(tenant, "issues")}
    replay = VendorSimulator(tenants=2, items_per_tenant=4, seed=11, now=FakeClock(), tracker=SIZES)
    assert [replay.mutate_tracker_randomly() for _ in range(60)] == changes
