"""The runner side of :mod:`integration.bench.onchange_children`: one engine on the Kafka store
(with a local state store) and an in-process ticketing vendor, in a process of its own so that
its RSS and CPU are its own.

    python -m integration.bench.onchange_runner --bootstrap B --prefix P --state-dir D \
        --tenants T --tickets N [--children] [--partitions 8] [--parent-every 30s]

Pollers (the connector ``desk``):

- ``desk.tickets``: one partition per tenant, a token cursor (the vendor's change sequence), so
  a poll returns the tickets changed since the last one (none while idle); identity ``id``,
  version ``v``.
- ``desk.comments``: ``parent: {poller: desk.tickets, key: id, poll: on_change}``, one
  partition per ticket; a ticket at version ``v`` has comments ``1..v``, each carrying the
  wall-clock time of the change that made it (``changed_at``), so a consumer of the events
  topic measures the latency from a parent's change to its child's event.

The process prints JSON lines: ``{"ready": s, "rss_mb": m}`` once every Kafka partition is
owned (``s``: seconds since the process started, interpreter and imports included), then reads
commands on stdin: ``change RATE SECONDS`` changes RATE tickets a minute (uniformly over the
tenants) for SECONDS, printing ``{"changed": n}`` at the end; ``rss`` prints the RSS; ``stop``
stops. The tickets a run changes are drawn from a seeded generator.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import gc
import json
import os
import random
import sys
import time
from array import array
from pathlib import Path
from typing import Any

from watukuy import Engine, Partition, define_poller
from watukuy.core.poller import ParentSpec, Poller
from watukuy.store.kafka.settings import KafkaSettings
from watukuy.store.kafka.store import KafkaStore
from watukuy.store.kafka.topics import TopicLayout

CONNECTOR = "desk"
PARENT, CHILD = f"{CONNECTOR}.tickets", f"{CONNECTOR}.comments"


def tenant_name(t: int) -> str:
    return f"t{t:04d}"


def ticket_name(i: int) -> str:
    return f"k{i:07d}"


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def process_age() -> float:
    """Seconds since this process started (from /proc, so imports are counted)."""
    ticks = int(Path("/proc/self/stat").read_text().rpartition(")")[2].split()[19])
    boot = time.time() - float(Path("/proc/uptime").read_text().split()[0])
    return time.time() - (boot + ticks / os.sysconf("SC_CLK_TCK"))


class Desk:
    """``tenants`` tenants of ``tickets`` tickets each (numbered across tenants), all at
    version 1; a change bumps one ticket's version and appends it to its tenant's log."""

    def __init__(self, tenants: int, tickets: int) -> None:
        self.tenants = tenants
        self.per_tenant = tickets
        self.versions = [array("i", [1]) * tickets for _ in range(tenants)]
        self.log: list[list[int]] = [[] for _ in range(tenants)]  # changed ticket indexes
        self.changed_at: dict[tuple[int, int, int], float] = {}  # (tenant, ticket, version)

    def listing(self) -> list[Partition]:
        return [Partition(tenant_name(t), {"t": t}) for t in range(self.tenants)]

    def change(self, rng: random.Random) -> None:
        t = rng.randrange(self.tenants)
        i = rng.randrange(self.per_tenant)
        self.versions[t][i] += 1
        self.changed_at[(t, i, self.versions[t][i])] = time.time()
        self.log[t].append(i)

    async def tickets(self, ctx: Any) -> dict[str, Any]:
        t = ctx.partition.data["t"]
        since = ctx.cursor.value or 0
        log = self.log[t]
        versions = self.versions[t]
        items = [{"id": ticket_name(i), "v": versions[i]} for i in log[since : since + 500]]
        return {"items": items, "cursor": min(len(log), since + 500)}

    async def comments(self, ctx: Any) -> dict[str, Any]:
        t = ctx.partition.data["t"]
        i = int(ctx.partition.parents[0][1:])
        version = self.versions[t][i]
        items = [
            {"id": f"{ticket_name(i)}-c{n}", "changed_at": self.changed_at.get((t, i, n), 0.0)}
            for n in range(max(1, version - 4), version + 1)  # the last five comments
        ]
        return {"items": items, "cursor": None}

    def pollers(self, parent_every: str) -> list[Poller]:
        return [
            define_poller(
                name=PARENT,
                partitions=self.listing,
                identity=lambda item: item["id"],
                version=lambda item: str(item["v"]),
                fetch=self.tickets,
                cursor={"strategy": "token"},
                schedule={"min": parent_every, "max": parent_every},
            ),
            define_poller(
                name=CHILD,
                parent=ParentSpec(PARENT, key=lambda item: item["id"], poll="on_change"),
                identity=lambda item: item["id"],
                version=lambda item: item["id"],  # a comment never changes
                fetch=self.comments,
                cursor={"strategy": "none"},
            ),
        ]


async def wait_owned(store: KafkaStore, count: int, limit: float) -> None:
    owned = asyncio.Event()

    def check() -> None:
        if len(store.owned_kafka_partitions()) == count:
            owned.set()

    store.watch(check)
    check()
    async with asyncio.timeout(limit):
        await owned.wait()


def say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


async def commands(desk: Desk) -> None:
    loop = asyncio.get_running_loop()
    rng = random.Random(44)
    while True:
        line = (await loop.run_in_executor(None, sys.stdin.readline)).split()
        if not line or line[0] == "stop":
            return
        if line[0] == "rss":
            say(rss_mb=rss_mb())
        elif line[0] == "trim":  # what is live: the collector run, freed C heap given back
            gc.collect()
            ctypes.CDLL("libc.so.6").malloc_trim(0)
            say(rss_mb=rss_mb())
        elif line[0] == "change":
            rate, seconds = float(line[1]), float(line[2])
            made, start = 0, time.monotonic()
            while (elapsed := time.monotonic() - start) < seconds:
                due = int(elapsed * rate / 60)
                while made < due:
                    desk.change(rng)
                    made += 1
                await asyncio.sleep(0.05)
            say(changed=made)


async def serve(args: argparse.Namespace) -> None:
    desk = Desk(args.tenants, args.tickets)
    layout = TopicLayout(prefix=args.prefix, partitions=args.partitions, replication_factor=1)
    settings = KafkaSettings(
        kafka={"bootstrap.servers": args.bootstrap},
        layout=layout,
        runner_id=args.runner,
        state_dir=str(args.state_dir),
        standby_replicas=0,
    )
    store = KafkaStore(settings)
    engine = Engine(desk.pollers(args.parent_every), store=store)
    await engine.__aenter__()
    try:
        await wait_owned(store, args.partitions, 3600)
        running = asyncio.create_task(engine.run())
        say(ready=process_age(), rss_mb=rss_mb())
        await commands(desk)
        await engine.stop()
        await running
    finally:
        await engine.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--runner", default="onchange-r1")
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--tenants", type=int, required=True)
    parser.add_argument("--tickets", type=int, required=True, help="per tenant")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--parent-every", default="30s")
    args = parser.parse_args(argv)
    asyncio.run(serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
