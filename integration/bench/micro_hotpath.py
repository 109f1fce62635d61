"""CPU per event of the per-page hot path, in process: change detection and the records of
the page's transaction (events encoded as Avro single objects, snapshot entries, state).

    python -m integration.bench.micro_hotpath [--items 20000] [--page 100] [--rounds 5]
        [--profile] [--full]

Items are the vendor simulator's invoices (``integration.simulator``); the poller is the
runner benchmark's ``integration.pollers:invoices`` (identity ``id``, version ``etag``). Each
round walks every page against an empty snapshot (every item ``created``), as a first poll
does, and builds the Kafka records of each page exactly as the Kafka store does before it
produces them. No broker, no HTTP: this isolates the CPU the profile of issue 13 points at.
Printed: CPU µs per event (thread time, so other work on the machine inflates it less) of
detection, of the records, and of both (best of ``--rounds``).
``--profile`` prints the top of a cProfile of one round instead.

``--full`` walks each page as a runner's steady state does, on one thread: the page's JSON
body decoded (``Response.json``), the key's committed entries of its items read (empty: a
backlog's first pass), detection against them under the pages in flight (an ``Overlay``,
as a key with pages in flight sees its snapshot) with each event measured by the store
(``unpublishable``, which encodes it), the transaction's records, and each record handed
to a producer (librdkafka's queue; no broker, purged after each round), with the
collector's thresholds a runner sets (``watukuy.runner.GC_THRESHOLDS``). It prints the same
three figures, the second being the records and their produce.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import pstats
import time
from typing import Any

from confluent_kafka import Producer

from integration.pollers import invoices
from integration.simulator import VendorSimulator
from watukuy.core.changes import detect
from watukuy.core.poll import fresh_state
from watukuy.core.poller import Poller
from watukuy.engine.inflight import Overlay
from watukuy.http.response import Response
from watukuy.runner import GC_THRESHOLDS
from watukuy.serde.events import EventSchemas, encode_event
from watukuy.store.base import KeyCommit
from watukuy.store.kafka import transactions
from watukuy.store.kafka.outgoing import Outgoing
from watukuy.store.kafka.topics import TopicLayout


def pages(items: int, size: int) -> list[list[dict[str, Any]]]:
    sim = VendorSimulator(tenants=1, items_per_tenant=items, seed=7, now=lambda: 1_700_000_000.0)
    listed = sim.items(sim.tenants[0].id)
    return [listed[i : i + size] for i in range(0, len(listed), size)]


def one_round(
    chunks: list[list[dict[str, Any]]], outgoing: Outgoing, poller: Poller = invoices
) -> tuple[float, float, int]:
    state = fresh_state(poller, "tenant-1", 1_700_000_000.0)
    detect_s = records_s = 0.0
    events = 0
    for chunk in chunks:
        t0 = time.thread_time()
        found = detect(
            poller, "tenant-1", chunk, {}, lane="live", sequence=events, now=1_700_000_001.0
        )
        t1 = time.thread_time()
        commit = KeyCommit(state=state, events=found.events, upserts=found.upserts)
        outgoing.of(commit, 0)
        t2 = time.thread_time()
        detect_s += t1 - t0
        records_s += t2 - t1
        events += len(found.events)
    return detect_s, records_s, events


def full_round(
    bodies: list[bytes], outgoing: Outgoing, producer: Producer, poller: Poller = invoices
) -> tuple[float, float, int]:
    """One pass over ``bodies`` (pages as the vendor sends them) as a runner's steady state
    makes it (see ``--full``)."""
    state = fresh_state(poller, "tenant-1", 1_700_000_000.0)
    detect_s = records_s = 0.0
    events = 0
    pending: Overlay[Any] = Overlay({})
    for serial, raw in enumerate(bodies):
        t0 = time.thread_time()
        body = _decode(raw)
        found = detect(
            poller,
            "tenant-1",
            body["data"],
            pending.over({}),
            lane="live",
            sequence=events,
            now=1_700_000_001.0,
            publishable=outgoing.unpublishable,
        )
        pending.change(found.upserts, (), serial)
        t1 = time.thread_time()
        commit = KeyCommit(state=state, events=found.events, upserts=found.upserts)
        produce_all(producer, outgoing.of(commit, 0))
        t2 = time.thread_time()
        detect_s += t1 - t0
        records_s += t2 - t1
        events += len(found.events)
        pending.landed(found.upserts, serial)
    producer.purge(in_queue=True, in_flight=True, blocking=False)
    producer.poll(0)
    return detect_s, records_s, events


def produce_all(producer: Producer, records: list[Any]) -> None:
    """A request's records, as the Kafka thread hands them to the producer (record by record
    in a connector from before ``_produce_all``, which this bench also runs)."""
    every = getattr(transactions, "_produce_all", None)
    if every is not None:
        every(producer, records)
        return
    for record in records:
        transactions._produce(producer, record)


def _decode(raw: bytes) -> Any:
    """``Response.json`` without an event loop: its coroutine never awaits."""
    coroutine = Response(status=200, headers={}, url="http://vendor/items", body=raw).json()
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    raise RuntimeError("Response.json awaited")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--page", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--full", action="store_true", help="a runner's whole page path")
    args = parser.parse_args()
    chunks = pages(args.items, args.page)
    schemas = EventSchemas({"invoices": None})
    outgoing = Outgoing(
        TopicLayout("bench", 8, 1),
        {"invoices": "bench.events.invoices"},
        {},
        "watukuy://bench",
        lambda event: encode_event(event, schemas, validated=True),
    )
    if args.full:
        gc.set_threshold(*GC_THRESHOLDS)
        bodies = [json.dumps({"data": chunk, "next": None}).encode() for chunk in chunks]
        producer = Producer(
            {
                "bootstrap.servers": "127.0.0.1:9",  # nobody: the records stay queued
                "queue.buffering.max.messages": 10_000_000,
                "log_level": 0,
            }
        )

        def run_round() -> tuple[float, float, int]:
            return full_round(bodies, outgoing, producer)
    else:

        def run_round() -> tuple[float, float, int]:
            return one_round(chunks, outgoing)

    run_round()  # warm caches
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(run_round)
        pstats.Stats(profile).sort_stats("tottime").print_stats(25)
        return
    best: tuple[float, float, int] | None = None
    for _ in range(args.rounds):
        found = run_round()
        if best is None or sum(found[:2]) < sum(best[:2]):
            best = found
    assert best is not None
    detect_s, records_s, events = best
    per = 1e6 / events
    print(
        f"{events} events, pages of {args.page}: detect {detect_s * per:.1f} µs/event, "
        f"records {records_s * per:.1f} µs/event, total {(detect_s + records_s) * per:.1f} "
        f"µs/event ({events / (detect_s + records_s):,.0f} events/s)"
    )


if __name__ == "__main__":
    main()
