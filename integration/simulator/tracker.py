"""What a tracker's records look like, and how a demo keeps them moving.

The simulator serves, per tenant, projects, each project's issues, each issue's comments and
users (the collections of ``records.COLLECTIONS``), so a connector with a stream, a child and a
grandchild has something real to read. Fields are drawn from a seeded RNG the caller owns;
nothing here keeps state.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, Protocol


class Tracker(Protocol):
    """What :func:`mutate_tracker` changes: the simulator's records (``VendorSimulator``,
    which generates its fields here, so this module names it by what it does)."""

    @property
    def tenants(self) -> Sequence[Any]: ...

    def records(self, tenant_id: str, name: str) -> list[dict[str, Any]]: ...

    def create_record(self, tenant_id: str, name: str, /, **fields: Any) -> dict[str, Any]: ...

    def update_record(
        self, tenant_id: str, name: str, record_id: str, /, **fields: Any
    ) -> dict[str, Any]: ...

    def delete_record(self, tenant_id: str, name: str, record_id: str) -> None: ...


ISSUE_STATUSES = ("open", "pending", "closed")
_FIRST = ("ana", "bruno", "carla", "diego", "elena", "fidel", "gloria", "hugo")
_LAST = ("quispe", "mamani", "rojas", "flores", "torres", "vargas", "huaman", "castro")
_AREAS = ("billing", "mobile app", "checkout", "search", "onboarding", "reports", "api")
_VERBS = ("fix", "crash in", "slow", "redesign", "missing field in", "typo in", "timeout in")
_REMARKS = ("can reproduce", "works for me", "fixed in staging", "needs a log", "duplicate")


def generate(name: str, rng: random.Random, emails: Sequence[str]) -> dict[str, Any]:
    """Fresh fields of a record of collection ``name`` (not ``items``); ``emails`` are the
    tenant's users' addresses, which reporters and authors are drawn from when there are any."""
    if name == "projects":
        area = rng.choice(_AREAS)
        return {"name": f"{area} {rng.randint(1, 99)}", "archived": rng.random() < 0.25}
    if name == "issues":
        reporter = {"email": _someone(rng, emails), "internal_note": _note(rng)}
        return {
            "title": f"{rng.choice(_VERBS)} {rng.choice(_AREAS)}",
            "status": rng.choice(ISSUE_STATUSES),
            "spam": rng.random() < 0.1,
            "reporter": reporter,
        }
    if name == "comments":
        return {"body": rng.choice(_REMARKS), "author": _someone(rng, emails)}
    if name == "users":
        first, last = rng.choice(_FIRST), rng.choice(_LAST)
        email = f"{first}.{last}{rng.randint(1, 99)}@example.com"
        return {"email": email, "name": f"{first.title()} {last.title()}"}
    raise ValueError(f"no generator for collection {name!r}")


def _someone(rng: random.Random, emails: Sequence[str]) -> str:
    if emails:
        return rng.choice(emails)
    return f"{rng.choice(_FIRST)}.{rng.choice(_LAST)}@example.com"


def _note(rng: random.Random) -> str:
    # The kind of text a compliance team wants dropped before anything reaches Kafka.
    return f"customer tier {rng.randint(1, 3)}, phone +51 9{rng.randint(10_000_000, 99_999_999)}"


def mutate_tracker(sim: Tracker, rng: random.Random) -> tuple[str, str, str, str] | None:
    """One random tracker change in one tenant, for demos: an issue changes status, a comment
    is added, a project is archived or unarchived, an issue is deleted or created. Returns
    ``(operation, tenant id, collection, record id)``, or None without tenants or projects."""
    tenants = sorted(tenant.id for tenant in sim.tenants)
    if not tenants:
        return None
    tenant_id = rng.choice(tenants)
    projects = {p["id"]: p for p in sim.records(tenant_id, "projects")}
    issues = {i["id"]: i for i in sim.records(tenant_id, "issues")}
    if not projects:
        return None
    roll = rng.random()
    if issues and roll < 0.3:
        issue = issues[rng.choice(sorted(issues))]
        status = rng.choice([s for s in ISSUE_STATUSES if s != issue["status"]])
        sim.update_record(tenant_id, "issues", issue["id"], status=status)
        return ("update", tenant_id, "issues", issue["id"])
    if issues and roll < 0.55:
        comment = sim.create_record(tenant_id, "comments", issue=rng.choice(sorted(issues)))
        return ("create", tenant_id, "comments", comment["id"])
    if roll < 0.7:
        project = projects[rng.choice(sorted(projects))]
        sim.update_record(tenant_id, "projects", project["id"], archived=not project["archived"])
        return ("update", tenant_id, "projects", project["id"])
    if issues and roll < 0.8:
        issue_id = rng.choice(sorted(issues))
        sim.delete_record(tenant_id, "issues", issue_id)
        return ("delete", tenant_id, "issues", issue_id)
    issue = sim.create_record(tenant_id, "issues", project=rng.choice(sorted(projects)))
    return ("create", tenant_id, "issues", issue["id"])
