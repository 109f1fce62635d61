"""`make demo`: a local Kafka broker, the vendor simulator, and events arriving per tenant.

    python -m integration.demo [--tenants 3] [--seconds 20]

A stand-in for the engine until it exists: every 2 s it polls each simulated tenant from its
``resume`` cursor and publishes the new and changed items as events keyed ``demo/<tenant>``, one
Kafka transaction per round, while the simulator changes a few items and a read_committed
consumer prints what arrives. Values are JSON (the engine writes Avro); deletions need a
reconcile scan, so they are not reported. The broker is ``$WATUKUY_BOOTSTRAP``, else the one in
``.watukuy/broker``, which the demo starts (and stops at the end) if it is not running.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import signal
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from integration.kafka import broker
from integration.simulator import Tenant, VendorSimulator, running_simulator

TOPIC = "watukuy.events.demo"
POLLER = "demo"
ROUND_SECONDS = 2.0
MUTATIONS_PER_ROUND = 3

Received = defaultdict[str, list[int]]  # tenant -> sequence numbers in arrival order


@dataclass
class TenantPoll:  # what the demo remembers of a tenant: cursor, items seen, last sequence
    tenant: Tenant
    resume: str | None = None
    seen: set[str] = field(default_factory=set)
    sequence: int = 0


async def fetch_changes(http: aiohttp.ClientSession, base: str, poll: TenantPoll) -> list[Any]:
    """Every item created or updated since the tenant's ``resume`` cursor, all pages."""
    items: list[Any] = []
    cursor, headers = poll.resume, {"Authorization": f"Bearer {poll.tenant.token}"}
    while True:
        query = {"limit": "50"} | ({"cursor": cursor} if cursor else {})
        url = f"{base}/{poll.tenant.slug}/items"
        async with http.get(url, params=query, headers=headers) as response:
            response.raise_for_status()
            page = await response.json()
        items.extend(page["data"])
        poll.resume = page["resume"]
        if page["next"] is None:
            return items
        cursor = page["next"]


def to_event(poll: TenantPoll, item: dict[str, Any]) -> dict[str, Any]:
    kind = "updated" if item["id"] in poll.seen else "created"
    poll.seen.add(item["id"])
    poll.sequence += 1
    identity = "\0".join((POLLER, poll.tenant.id, item["id"], item["etag"]))
    return {
        "id": hashlib.sha256(identity.encode()).hexdigest()[:32],
        "poller": POLLER,
        "partition": poll.tenant.id,
        "subject": item["id"],
        "type": kind,
        "version": item["etag"],
        "sequence": poll.sequence,
        "data": item,
    }


def open_consumer(bootstrap: str, group: str) -> Consumer:
    """Create the topic if needed, then read it from its current end: this run's events only."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    future = admin.create_topics([NewTopic(TOPIC, num_partitions=3, replication_factor=1)])[TOPIC]
    try:
        future.result(timeout=30)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
    settings = {"group.id": group, "isolation.level": "read_committed", "enable.auto.commit": False}
    consumer = Consumer({"bootstrap.servers": bootstrap} | settings)
    partitions = consumer.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions
    assignment = [TopicPartition(TOPIC, p) for p in partitions]
    for tp in assignment:
        tp.offset = consumer.get_watermark_offsets(tp, 10)[1]
    consumer.assign(assignment)
    return consumer


async def consume(consumer: Consumer, received: Received, done: asyncio.Event) -> None:
    while not done.is_set():
        msg = await asyncio.to_thread(consumer.poll, 0.2)
        if msg is None or msg.error():
            if msg is not None:
                print(f"consumer: {msg.error()}", file=sys.stderr)
            continue
        e, key = json.loads(msg.value() or b"{}"), (msg.key() or b"").decode()
        received[e["partition"]].append(e["sequence"])
        print(f"{key} #{e['sequence']} {e['type']} {e['subject']} etag={e['version']}")


async def publish_round(
    producer: Producer, http: aiohttp.ClientSession, base: str, polls: list[TenantPoll]
) -> list[dict[str, Any]]:
    """Fetch every tenant's changes and publish them all in one transaction."""
    events = [to_event(p, item) for p in polls for item in await fetch_changes(http, base, p)]
    if events:
        producer.begin_transaction()
        for event in events:
            value = json.dumps(event).encode()
            producer.produce(TOPIC, key=f"{POLLER}/{event['partition']}", value=value)
        await asyncio.to_thread(producer.commit_transaction, 30)
    return events


async def run(bootstrap: str, tenants: int, seconds: float) -> bool:
    tag = f"watukuy-demo-{os.getpid()}"
    consumer = open_consumer(bootstrap, tag)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": tag, "partitioner": "murmur2_random"}
    )
    await asyncio.to_thread(producer.init_transactions, 30)
    stop, done = asyncio.Event(), asyncio.Event()
    produced, received = Counter[str](), Received(list)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    sim = VendorSimulator(tenants=tenants, items_per_tenant=20, seed=0)
    polls = [TenantPoll(tenant) for tenant in sim.tenants]
    consumer_task = asyncio.create_task(consume(consumer, received, done))
    try:
        async with running_simulator(sim) as base, aiohttp.ClientSession() as http:
            print(f"demo: broker {bootstrap}, simulator {base}, topic {TOPIC}; Ctrl-C to stop")
            deadline = loop.time() + seconds
            while not stop.is_set() and loop.time() < deadline:
                batch = await publish_round(producer, http, base, polls)
                produced.update(event["partition"] for event in batch)
                for _ in range(MUTATIONS_PER_ROUND):
                    sim.mutate_randomly()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), ROUND_SECONDS)
        drain_until = loop.time() + 10
        while produced.total() > sum(map(len, received.values())) and loop.time() < drain_until:  # noqa: ASYNC110
            await asyncio.sleep(0.1)
    finally:
        done.set()
        await consumer_task
        consumer.close()
    return summarize(produced, received)


def summarize(produced: Counter[str], received: Received) -> bool:
    """Print produced vs consumed per tenant; True if every event arrived once, in order."""
    print("\nsummary: tenant    produced  consumed  in order")
    tenants = sorted(produced.keys() | received.keys())
    in_order = {t: received[t] == list(range(1, produced[t] + 1)) for t in tenants}
    for t in tenants:
        print(f"         {t:<9} {produced[t]:>8}  {len(received[t]):>8}  {in_order[t]!s:>8}")
    print(f"         total     {produced.total():>8}  {sum(map(len, received.values())):>8}")
    ok = all(in_order.values())
    print("demo: every event arrived once, in order per tenant" if ok else "demo: MISMATCH")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m integration.demo", description=__doc__)
    parser.add_argument("--tenants", type=int, default=3, help="simulated tenants (3)")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long to run (20)")
    args = parser.parse_args(argv)
    bootstrap = os.environ.get("WATUKUY_BOOTSTRAP")
    started_here = bootstrap is None and broker.read_running() is None
    if started_here:
        print("demo: starting a local Kafka broker (the first run fetches Kafka) ...")
    bootstrap = bootstrap or broker.start().bootstrap
    try:
        return 0 if asyncio.run(run(bootstrap, args.tenants, args.seconds)) else 1
    except KeyboardInterrupt:
        return 130
    finally:
        if started_here:
            broker.stop()
            print("demo: stopped the broker it started")


if __name__ == "__main__":
    sys.exit(main())
