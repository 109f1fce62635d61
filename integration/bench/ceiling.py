"""The bare ceiling loop of the side-by-side benchmark: encode + transactional produce, no HTTP.

    python -m integration.bench.ceiling --bootstrap HOST:PORT --topic T --items FILE
        [--page 500] [--commit-interval 0.1]

``FILE`` holds ``{tenant id: [item, ...]}`` (what the vendor simulator serves, read by
:mod:`integration.bench.side_by_side` before it starts this process). Page by page, round
robin over the tenants as a runner's keys take turns, every item becomes the same
``watukuy.Event`` envelope the Python poller's events carry (JSON ``data``, built and encoded
by ``watukuy.serde.events``, fastavro underneath) and is produced with the tenant's key in a
transaction committed every ``--commit-interval`` seconds. What a runner does on top of this
(HTTP, JSON, change detection, the snapshot and state records, scheduling) is what the
benchmark compares against it.

``--headers`` adds the seven CloudEvents headers a runner's event records carry (the
``ce_*`` attributes of the Kafka binding and ``content-type``, as ``watukuy.store.kafka.
outgoing`` writes them): the same records, so that what the headers cost is told apart from
what the runner does.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from watukuy.core.events import Event, event_id, utc
from watukuy.serde.events import EventSchemas, encode_event
from watukuy.store.kafka.outgoing import ce_time

POLLER = "invoices"


def pages(backlog: dict[str, list[dict[str, Any]]], size: int) -> Iterator[tuple[str, list[Any]]]:
    """``(tenant, page)`` in the order a runner's keys take turns: every tenant's first page,
    then every second page, ..."""
    longest = max((len(items) for items in backlog.values()), default=0)
    for start in range(0, longest, size):
        for tenant, items in backlog.items():
            page = items[start : start + size]
            if page:
                yield tenant, page


def run(args: argparse.Namespace) -> int:
    backlog: dict[str, list[dict[str, Any]]] = json.loads(Path(args.items).read_text())
    schemas = EventSchemas()
    producer = Producer(
        {
            "bootstrap.servers": args.bootstrap,
            "transactional.id": f"bench-ceiling-{uuid.uuid4().hex[:8]}",
            "linger.ms": 5,
        }
    )
    producer.init_transactions(30)
    sequences = dict.fromkeys(backlog, 0)
    producer.begin_transaction()
    opened = time.monotonic()
    produced = 0
    for tenant, page in pages(backlog, args.page):
        key = f"{POLLER}/{tenant}".encode()
        source = ("ce_source", f"watukuy/{POLLER}/{tenant}".encode())
        stamp: tuple[str, bytes] | None = None  # a runner's page shares one time: formatted once
        for item in page:
            sequences[tenant] += 1
            event = Event(
                id=event_id(POLLER, tenant, item["id"], item["etag"]),
                poller=POLLER,
                partition=tenant,
                subject=item["id"],
                type="created",
                version=item["etag"],
                sequence=sequences[tenant],
                time=utc(time.time()),
                lane="live",
                schema_version=1,
                data=item,
            )
            value = encode_event(event, schemas)
            if args.headers:
                if stamp is None:
                    stamp = ("ce_time", ce_time(event.time))
                headers: list[tuple[str, str | bytes | None]] = [
                    ("ce_specversion", b"1.0"),
                    ("ce_id", event.id.encode()),
                    ("ce_type", b"watukuy.created"),
                    source,
                    ("ce_subject", event.subject.encode()),
                    stamp,
                    ("content-type", b"application/avro"),
                ]
                # By position, as the runner's produce loop calls it (transactions.py).
                producer.produce(args.topic, value, key, -1, None, None, 0, headers)
            else:
                producer.produce(args.topic, value, key)
        produced += len(page)
        producer.poll(0)
        if time.monotonic() - opened >= args.commit_interval:
            producer.commit_transaction(30)
            producer.begin_transaction()
            opened = time.monotonic()
    producer.commit_transaction(30)
    print(f"ceiling: {produced} events committed", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m integration.bench.ceiling", description=__doc__
    )
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--items", required=True, help="JSON file {tenant: [items]}")
    parser.add_argument("--page", type=int, default=500, help="items per page (500)")
    parser.add_argument("--commit-interval", type=float, default=0.1, help="seconds (0.1)")
    parser.add_argument(
        "--headers", action="store_true", help="the seven CloudEvents headers of a runner's events"
    )
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
