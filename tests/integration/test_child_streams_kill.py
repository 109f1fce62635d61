"""Child partitions created by a parent's commit while the runner that owns them is SIGKILLed:
two real runner processes on the real broker, against the simulator's tracker.

Runners A and B share the keys of a connector whose ``projects`` stream is the parent of an
``issues`` stream (one child key ``<tenant>/<project>`` per project). B is killed; at once the
vendor gets new projects, some chosen so that their child keys live in B's Kafka partitions
while their tenant's parent key is A's. A polls the parent and commits the children's creation
while B is dead but still in the group; when the group gives B's partitions to A, A creates
those children and polls them. What a user sees must show each child created once and polled
once: every issue once on the issues topic (read_committed), each child key's sequences
1..n, each child endpoint fetched once at the vendor, and A owning every child key.

The second test kills B later: after B created its children and fetched one, before that poll
was committed (B's transactions are held open by the fault runner). A polls such a child once
more, never twice, and its issues still appear once.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from integration.demo import Simulator, runner_config
from integration.demo import write_config as write_runner_config
from tests.integration.kafka_support import latest_values, read_topic
from tests.integration.runners import (
    Runner,
    assignments,
    free_port,
    rest_healthy,
    runner_env,
    wait_for,
)
from tests.integration.test_rest_runners import call
from watukuy.store.kafka.partitioner import partition_for

PARTITIONS = 4  # of the internal topics; with two runners, two each
TENANTS = 6  # the runner holding more of their parent keys (the survivor) holds three or more
ISSUES = 2  # per project
PARENT = "tracker.projects"
CHILD = "tracker.issues"
# The victim's session: how long the group keeps a dead B's partitions. Long enough that A's
# parent commit (within a second or two of the new projects) lands while B still holds them,
# on a loaded machine too; short enough to keep the test quick.
VICTIM_SESSION = "8s"


def tracker() -> dict[str, Any]:
    """Projects polled every second (so new ones are seen at once) and their issues, a child
    stream polled once when created: its next poll is ten minutes away, so any second fetch of
    a child's endpoint within the test is a repeated first poll."""
    return {
        "name": "tracker",
        "partitions": {
            "http": {
                "url": "${env:WATUKUY_VENDOR_URL}/tenants",
                "records": "tenants",
                "key": "id",
                "data": {"slug": "slug", "token": "token"},
            },
            "refresh": "5m",  # the tenants never change here
        },
        "defaults": {
            "request": {
                "base": "${env:WATUKUY_VENDOR_URL}/{partition.data.slug}",
                "auth": {"bearer": "{partition.data.token}"},
                "query": {"limit": 100},  # one page per poll: one request per child poll
            },
            "records": "data",
            "identity": "id",
            "version": "etag",
            "paginate": {"next_token": {"path": "next", "param": "cursor"}},
            "cursor": {"token": {"path": "resume", "param": "cursor"}},
        },
        "streams": [
            {
                "name": "projects",
                "request": {"path": "/projects"},
                "schedule": {"min": "1s", "max": "1s"},
            },
            {
                "name": "issues",
                "parent": {
                    "stream": "projects",
                    "key": "id",
                    "where": {"path": "archived", "equals": False},
                },
                "request": {"path": "/projects/{parent.key}/issues"},
                "schedule": {"min": "10m", "max": "1h"},
            },
        ],
    }


class Vendor:
    """The simulator's admin API (not counted among the vendor's requests)."""

    def __init__(self, sim: Simulator) -> None:
        self.url = sim.base_url
        self.slugs = {t["id"]: t["slug"] for t in sim.tenants}

    def send(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.url}/_admin{path}", data=data, method=method)
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=10) as answer:
            raw = answer.read()
        return json.loads(raw) if raw else None

    def add_project(self, tenant: str, project: str) -> list[str]:
        """A project with its issues, hidden from the child stream (archived) until
        :meth:`publish`: its child would otherwise be created, and polled, before its issues
        exist. The issues' ids."""
        self.send("POST", f"/tenants/{tenant}/projects", {"id": project, "archived": True})
        made = [
            self.send("POST", f"/tenants/{tenant}/issues", {"project": project})
            for _ in range(ISSUES)
        ]
        return [issue["id"] for issue in made]

    def publish(self, tenant: str, project: str) -> None:
        self.send("PATCH", f"/tenants/{tenant}/projects/{project}", {"archived": False})

    def fetches(self, tenant: str, project: str) -> int:
        """How many times the project's issues endpoint was requested, any page or cursor."""
        path = f"/{self.slugs[tenant]}/projects/{project}/issues"
        return sum(
            1 for entry in self.send("GET", f"/tenants/{tenant}/log") if entry["path"] == path
        )


@dataclass
class Pair:
    """Runners kill-a and kill-b (once started) sharing a group, each with a REST port."""

    bootstrap: str
    prefix: str
    vendor_url: str
    tmp: Path
    runners: dict[str, Runner] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)

    def start(
        self, name: str, faults: list[str] | None = None, session: str = VICTIM_SESSION
    ) -> None:
        port = self.ports[name] = free_port()
        example = {"pollers": [tracker()]}
        config = runner_config(
            self.bootstrap, self.prefix, name, partitions=PARTITIONS, example=example
        )
        config["runner"]["session.timeout"] = session
        config["rest"] = {"listen": f"127.0.0.1:{port}"}
        path = write_runner_config(self.tmp / f"{name}.yaml", config)
        env = runner_env(self.vendor_url)
        runner = Runner(name, path, env, self.tmp / f"{name}.log", faults=faults)
        self.runners[name] = runner
        runner.start()

    def held(self) -> dict[str, set[int]]:
        found = assignments(self.bootstrap, f"{self.prefix}.runners")
        return {name: parts for name, parts in found.items() if parts}

    def sharing(self) -> dict[str, set[int]] | None:
        """Who holds what, once both runners are healthy and share every partition."""
        if not all(rest_healthy(port) for port in self.ports.values()):
            return None
        held = self.held()
        covered = set().union(*held.values()) if held else set()
        both = set(held) == set(self.runners) and covered == set(range(PARTITIONS))
        return held if both else None

    def alone(self, survivor: str) -> bool:
        return self.held() == {survivor: set(range(PARTITIONS))}


@pytest.fixture
def simulator(simulator_process: Callable[..., Simulator]) -> Simulator:
    # Tenants without projects: every project, and so every child key, is made by the test.
    return simulator_process(TENANTS, 0, "--projects", "0", "--users", "0", "--quota", "100000")


@pytest.fixture
def pair(kafka_bootstrap: str, prefix: str, simulator: Simulator, tmp_path: Path) -> Iterator[Pair]:
    made = Pair(kafka_bootstrap, prefix, simulator.base_url, tmp_path)
    try:
        yield made
    finally:
        for runner in made.runners.values():
            runner.stop(30)


def tenant_key(tenant: str) -> str:
    return f"{PARENT}/{tenant}"


def child_key(tenant: str, project: str) -> str:
    return f"{CHILD}/{tenant}/{project}"


def projects_in(tenant: str, wanted: set[int], count: int, taken: set[str]) -> list[str]:
    """``count`` project ids, not in ``taken``, whose child keys lie in Kafka partitions
    ``wanted``."""
    found: list[str] = []
    for n in range(1, 1000):
        project = f"p{n}"
        if project not in taken and partition_for(child_key(tenant, project), PARTITIONS) in wanted:
            found.append(project)
            if len(found) == count:
                return found
    raise AssertionError(f"no {count} project ids of {tenant} in partitions {wanted}")


@dataclass
class Plan:
    """The projects the test makes: ``moved`` are the children that live in the victim's
    partitions while their parent is polled by the survivor; their issues' ids in ``issues``."""

    moved: list[tuple[str, str]] = field(default_factory=list)
    stayed: list[tuple[str, str]] = field(default_factory=list)  # children of the survivor
    later: list[tuple[str, str]] = field(default_factory=list)  # parent on the victim too
    issues: dict[tuple[str, str], list[str]] = field(default_factory=dict)

    @property
    def children(self) -> list[tuple[str, str]]:
        return [*self.moved, *self.stayed, *self.later]


def plan(tenants: list[str], survivor: set[int], victim: set[int]) -> Plan:
    made = Plan()
    for tenant in tenants:
        if partition_for(tenant_key(tenant), PARTITIONS) in survivor:
            moved = projects_in(tenant, victim, 2, set())
            made.moved += [(tenant, p) for p in moved]
            made.stayed += [(tenant, p) for p in projects_in(tenant, survivor, 1, set(moved))]
        else:
            made.later += [(tenant, p) for p in projects_in(tenant, survivor | victim, 1, set())]
    return made


def choose(pair: Pair, tenants: list[str]) -> tuple[str, str, Plan]:
    """Once both runners share the partitions: the survivor, the victim and the projects to
    make. The survivor is the runner holding more tenants' parent keys, so it has some."""
    held = wait_for(pair.sharing, 90, "both runners holding partitions")
    owners = {
        t: next(r for r, p in held.items() if partition_for(tenant_key(t), PARTITIONS) in p)
        for t in tenants
    }
    survivor = max(held, key=lambda r: sum(1 for o in owners.values() if o == r))
    (victim,) = [r for r in held if r != survivor]
    made = plan(tenants, held[survivor], held[victim])
    assert made.moved, owners
    return survivor, victim, made


def created_lines(runners: list[Runner]) -> dict[str, int]:
    """How many times each child key was logged created from nothing, by any runner."""
    counts: dict[str, int] = {}
    for runner in runners:
        for line in runner.output().splitlines():
            if "child partition created" in line:
                key = line.split(": child partition created")[0].rsplit(" ", 1)[-1]
                counts[key] = counts.get(key, 0) + 1
    return counts


def assert_published_once(bootstrap: str, topic: str, made: Plan) -> None:
    """Every issue once on the child stream's topic (read_committed): each child key's
    events are its issues, ``created``, sequences 1..n without a gap or a repeat."""
    read = read_topic(bootstrap, topic, idle=3.0)
    assert sorted(read.by_key) == sorted(child_key(t, p) for t, p in made.children)
    for (tenant, project), ids in made.issues.items():
        events = read.by_key[child_key(tenant, project)]
        assert [e["sequence"] for e in events] == list(range(1, ISSUES + 1)), events
        assert sorted(e["subject"] for e in events) == sorted(ids)
        assert {e["type"] for e in events} == {"created"}


def add_projects(vendor: Vendor, made: Plan) -> None:
    """Make the planned projects with their issues, then show them to the child stream."""
    for tenant, project in made.children:
        made.issues[(tenant, project)] = vendor.add_project(tenant, project)
    for tenant, project in made.children:
        vendor.publish(tenant, project)


def settle(pair: Pair, vendor: Vendor, made: Plan, survivor: str) -> dict[str, int]:
    """Once the survivor holds every partition and has published every issue: stop it, check
    that every child key was created once, and return how often each child endpoint was
    fetched (``<tenant>/<project>``)."""
    wait_for(lambda: pair.alone(survivor), 60, f"{survivor} holding every partition")
    wait_for(lambda: all(vendor.fetches(*c) for c in made.children), 30, "every child polled")
    topic = f"{pair.prefix}.events.{CHILD}"

    def all_issues() -> bool:
        read = read_topic(pair.bootstrap, topic, idle=1.0)
        return sum(len(v) for v in read.by_key.values()) >= len(made.children) * ISSUES

    wait_for(all_issues, 30, "every child's issues on the topic", step=0.5)
    code, listed = call(pair.ports[survivor], "GET", f"/connectors/{CHILD}/partitions")
    assert pair.runners[survivor].stop() == 0, pair.runners[survivor].output()[-2000:]

    # Created once: the survivor owns every child key, none was logged created twice, and one
    # creation command per child was ever written (and taken away when applied).
    assert code == 200, listed
    assert sorted(p["key"] for p in listed) == sorted(f"{t}/{p}" for t, p in made.children)
    assert {p["owner"] for p in listed} == {survivor}
    created = created_lines(list(pair.runners.values()))
    assert set(created) <= {child_key(t, p) for t, p in made.children}, created
    assert set(created.values()) == {1}, created
    state = latest_values(pair.bootstrap, f"{pair.prefix}.state")
    commands = {k: v for k, v in state.items() if k.startswith(f"cmd/{CHILD}/".encode())}
    assert len(commands) == len(made.children) and all(v is None for v in commands.values())
    assert_published_once(pair.bootstrap, topic, made)
    return {f"{t}/{p}": vendor.fetches(t, p) for t, p in made.children}


def test_children_created_while_their_owner_is_dead_are_created_and_polled_once(
    pair: Pair, simulator: Simulator
) -> None:
    started = time.monotonic()
    vendor = Vendor(simulator)
    pair.start("kill-a")
    pair.start("kill-b")
    survivor, victim, made = choose(pair, sorted(vendor.slugs))

    pair.runners[victim].kill()
    killed = time.monotonic()
    add_projects(vendor, made)
    # The survivor polls its own children after its parent commit, which also sent the moved
    # children's creation: seen while the victim still holds their partitions, they were
    # created by a commit made while their owner was dead.
    wait_for(
        lambda: all(vendor.fetches(*c) for c in made.stayed), 30, "the survivor's own children"
    )
    assert victim in pair.held(), f"the group dropped {victim} before the parent's commit"
    assert not any(vendor.fetches(*c) for c in made.moved), "a dead runner's child was polled"

    fetched = settle(pair, vendor, made, survivor)
    everyone = {child_key(t, p): 1 for t, p in made.children}
    assert created_lines([pair.runners[survivor]]) == everyone
    assert created_lines([pair.runners[victim]]) == {}
    # Polled once: each child's endpoint was fetched by one owner, one time.
    assert set(fetched.values()) == {1}, fetched
    print(
        f"\n{len(made.moved)} children created for the dead {victim}, then by {survivor}; "
        f"the test took {time.monotonic() - started:.1f}s (SIGKILL at {killed - started:.1f}s)"
    )


def test_a_child_whose_owner_is_killed_during_its_first_poll_is_polled_again_once(
    pair: Pair, simulator: Simulator
) -> None:
    started = time.monotonic()
    vendor = Vendor(simulator)
    pair.start("kill-a", session="6s")
    # Every transaction of the victim stays open a second before its commit, so the SIGKILL
    # sent as soon as it fetched a child lands before that child's events are committed. Nothing
    # here races the victim's session, so it is 6s, the shortest a broker allows by default.
    pair.start("kill-b", faults=["--hold-transaction", "1"], session="6s")
    survivor, victim = "kill-a", "kill-b"
    held = wait_for(pair.sharing, 60, "both runners holding partitions")
    made = Plan()
    for tenant in sorted(vendor.slugs):  # wherever its parent is polled
        moved = projects_in(tenant, held[victim], 1, set())
        made.moved += [(tenant, p) for p in moved]
        made.stayed += [(tenant, p) for p in projects_in(tenant, held[survivor], 1, set(moved))]
    add_projects(vendor, made)

    def polling() -> list[str]:
        return [f"{t}/{p}" for t, p in made.moved if vendor.fetches(t, p)]

    in_flight = wait_for(polling, 30, f"{victim} polling a child", step=0.02)
    pair.runners[victim].kill()

    fetched = settle(pair, vendor, made, survivor)
    # The survivor's own children were polled once. Each of the victim's was polled by one
    # owner, or once by the victim, whose poll never committed, and once by the survivor:
    # never more, and never again once it was published.
    assert {fetched[f"{t}/{p}"] for t, p in made.stayed} == {1}, fetched
    again = {f"{t}/{p}" for t, p in made.moved if fetched[f"{t}/{p}"] == 2}
    assert {fetched[f"{t}/{p}"] for t, p in made.moved} <= {1, 2} and again, fetched
    print(
        f"\n{victim} killed while polling {len(in_flight)} child(ren); {len(again)} polled "
        f"again by {survivor}; the test took {time.monotonic() - started:.1f}s"
    )
