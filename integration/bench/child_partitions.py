"""Cost of child partitions on one runner: state bytes, memory and idle CPU per child.

    PYTHONPATH=. .venv/bin/python -m integration.bench.child_partitions \
        [--children 10000] [--tenants 10] [--items 2] [--window 30] [--interval 300]

One engine (memory store, system clock) runs a parent poller ``tracker.projects`` with
``--tenants`` tenants and ``--children`` projects in all, and a child poller
``tracker.issues`` (one partition per project, ``--items`` issues each). Fetches are
in-process functions (no HTTP), so the figures are the engine's own. Measured:

- creation: wall and CPU seconds from the parents' first poll until every child was created
  (by the parents' commits) and polled once;
- state bytes per child: the child's state record as the Kafka store writes it
  (``encode_state``) and its snapshot records (``encode_item``), mean and max: nothing else is
  stored per child, and nothing grows with the number of children;
- memory per child: RSS growth from before the parents' first poll to every child held,
  divided by the children (after a ``gc.collect()``);
- idle CPU: over ``--window`` seconds of ``run()`` with every child idle (polled every
  ``--interval`` seconds, nothing changes), as % of one core and µs per child per second,
  with the number of child polls in the window: the children are created in one burst, so
  with ``--interval`` longer than the window and the burst, none is polled in the window
  (the cost of holding them); a shorter one measures idle polls too.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import resource
import statistics
import time
from typing import Any

from watukuy import Engine, MemoryStore, Partition, define_poller
from watukuy.core.poller import ParentSpec, Poller
from watukuy.serde.state import encode_item, encode_state


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


POLLS = [0]
"""Child polls so far (the idle window's figure is its growth)."""


def make_pollers(
    children: int, tenants: int, items: int, interval: float, all_polled: asyncio.Event
) -> list[Poller]:
    projects = {f"t{t:03d}": [f"P{p}" for p in range(t, children, tenants)] for t in range(tenants)}

    async def fetch_projects(ctx: Any) -> dict[str, Any]:
        return {"items": [{"id": p} for p in projects[ctx.partition.key]], "cursor": None}

    async def fetch_issues(ctx: Any) -> dict[str, Any]:
        POLLS[0] += 1
        if POLLS[0] >= children:  # each child is polled once before any is due again
            all_polled.set()
        project = ctx.partition.parents[0]
        return {"items": [{"id": f"{project}-{i}", "v": 1} for i in range(items)], "cursor": None}

    every = f"{interval:g}s"
    return [
        define_poller(
            name="tracker.projects",
            partitions=lambda: [Partition(t, {"slug": t}) for t in projects],
            identity=lambda item: item["id"],
            fetch=fetch_projects,
            cursor={"strategy": "none"},
            schedule={"min": every, "max": every},
            max_pages=1,
        ),
        define_poller(
            name="tracker.issues",
            parent=ParentSpec("tracker.projects", key=lambda item: item["id"]),
            identity=lambda item: item["id"],
            fetch=fetch_issues,
            cursor={"strategy": "none"},
            schedule={"min": every, "max": every},
        ),
    ]


def state_bytes(store: MemoryStore) -> tuple[list[int], list[int]]:
    states, snapshots = [], []
    for key, state in store.states.items():
        if state.poller != "tracker.issues":
            continue
        states.append(len(encode_state(state)))
        entries = store.snapshots.get(key, {})
        snapshots.append(
            sum(len(encode_item(state.poller, state.partition, i, e)) for i, e in entries.items())
        )
    return states, snapshots


async def bench(children: int, tenants: int, items: int, window: float, interval: float) -> None:
    store = MemoryStore()
    all_polled = asyncio.Event()
    engine = Engine(make_pollers(children, tenants, items, interval, all_polled), store=store)
    gc.collect()
    rss_before = rss_mb()
    cpu0, wall0 = cpu_seconds(), time.monotonic()
    runner = asyncio.create_task(engine.run())
    try:
        await all_polled.wait()
        await asyncio.sleep(0.5)  # the last polls' commits
        held = sum(1 for i in engine.inspect() if i.poller == "tracker.issues")
        assert held == children, f"{held} children held"
        created_wall, created_cpu = time.monotonic() - wall0, cpu_seconds() - cpu0
        gc.collect()
        rss_held = rss_mb()
        cpu1, wall1, polls1 = cpu_seconds(), time.monotonic(), POLLS[0]
        await asyncio.sleep(window)
        idle_cpu, idle_wall = cpu_seconds() - cpu1, time.monotonic() - wall1
        polls = POLLS[0] - polls1
    finally:
        await engine.stop()
        await runner
        await engine.close()
    states, snapshots = state_bytes(store)
    per_child_mb = (rss_held - rss_before) / children
    print(f"children: {children} ({tenants} tenants, {items} items each), one runner")
    print(f"creation: {created_wall:.1f} s wall, {created_cpu:.1f} s CPU")
    print(
        f"state record per child: mean {statistics.mean(states):.0f} B, max {max(states)} B; "
        f"snapshot records per child: mean {statistics.mean(snapshots):.0f} B "
        f"({items} item(s))"
    )
    print(
        f"RSS: {rss_before:.0f} MB before, {rss_held:.0f} MB with every child held: "
        f"{per_child_mb * 1024:.1f} KB per child"
    )
    share = 100 * idle_cpu / idle_wall
    print(
        f"idle ({idle_wall:.0f} s, {polls} child polls, none with a change): {share:.1f} % of "
        f"one core, {1e6 * idle_cpu / idle_wall / children:.1f} µs CPU per child per second"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--children", type=int, default=10_000)
    parser.add_argument("--tenants", type=int, default=10)
    parser.add_argument("--items", type=int, default=2)
    parser.add_argument("--window", type=float, default=30.0)
    parser.add_argument("--interval", type=float, default=300.0)
    args = parser.parse_args()
    asyncio.run(bench(args.children, args.tenants, args.items, args.window, args.interval))


if __name__ == "__main__":
    main()
