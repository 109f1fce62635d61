"""CPU per event of a transformed stream against the same stream without its transform, in
process (issue 23: transforms may cost at most 20% of a plain stream's CPU per event).

    python -m integration.bench.transforms [--items 20000] [--page 100] [--rounds 5]
        [--declarative] [--only plain|transformed]

Both rows run :mod:`integration.bench.micro_hotpath`'s round (change detection and the Kafka
records of each page, every item ``created``) with ``integration.pollers:invoices``; the
transformed row adds a typical transform: a filter that lets every item through (so both rows
publish as many events), a drop, an HMAC mask and a ``set`` template. No HTTP and no broker,
which both rows would pay alike: the share printed is an upper bound of the share of a real
poll (one that also fetches and parses pages and produces to Kafka).

``--declarative`` compares the side-by-side benchmark's two declarative pollers instead
(``config/invoices.yaml`` without and with ``integration/bench/transform_row.py``'s transform,
each with its data schema, as the runner compiles them). ``--only`` runs one of the two rows:
under callgrind, the instructions of ``--rounds 3`` less those of ``--rounds 0`` are that
row's rounds, a measure the machine's load does not move.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from dataclasses import replace
from pathlib import Path

from integration.bench import transform_row
from integration.bench.micro_hotpath import one_round, pages
from integration.demo import example_config, runner_config
from integration.pollers import invoices
from watukuy.config.loader import parse_config
from watukuy.core.poller import Poller
from watukuy.core.transforms import compile_transform
from watukuy.serde.data import DataSchema
from watukuy.serde.events import EventSchemas, encode_event
from watukuy.store.kafka.outgoing import Outgoing
from watukuy.store.kafka.topics import TopicLayout

TRANSFORM = {
    "filter": {"path": "status", "in": ["active", "archived", "deleted"]},
    "drop": ["created_at"],
    "mask": {"name": {"hmac": b"bench-key"}},
    "set": {"tenant": "{partition.key}", "source": "bench"},
}


def outgoing(data: DataSchema | None = None) -> Outgoing:
    schemas = EventSchemas({"invoices": data})
    return Outgoing(
        TopicLayout("bench", 8, 1),
        {"invoices": "bench.events.invoices"},
        {},
        "watukuy://bench",
        lambda event: encode_event(event, schemas, validated=True),
    )


def best_per_event(
    pollers: list[Poller], chunks: list[list[dict[str, object]]], rounds: int
) -> list[float]:
    """CPU µs per event of each poller, the best of ``rounds`` rounds. The rows take turns
    round by round, so a machine that gets busier or quieter weighs on both alike."""
    outs = [outgoing(None if p.schema is None else DataSchema.load(p.schema, "")) for p in pollers]
    for poller, out in zip(pollers, outs, strict=True):
        one_round(chunks, out, poller)  # warm caches
    best = [float("inf")] * len(pollers)
    for _ in range(rounds):
        for index, poller in enumerate(pollers):
            detect_s, records_s, events = one_round(chunks, outs[index], poller)
            best[index] = min(best[index], (detect_s + records_s) * 1e6 / events)
    return best


def declarative_pollers() -> list[Poller]:
    """The side-by-side benchmark's declarative poller, plain and transformed, compiled as
    the runner compiles them (data schema checked per item) but never run against a vendor."""
    os.environ.setdefault("WATUKUY_VENDOR_URL", "http://127.0.0.1:9")  # no request is made
    os.environ.update(transform_row.mask_key_env())
    out = []
    with tempfile.TemporaryDirectory() as schemas:
        for example in (
            example_config(),
            transform_row.transformed(example_config(), Path(schemas)),
        ):
            config = parse_config(runner_config("127.0.0.1:9", "bench", "bench", example=example))
            poller = config.pollers[0]
            out.append(replace(poller, validate=DataSchema.load(poller.schema, "").validate))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--page", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--declarative", action="store_true", help="the side-by-side declarative pollers"
    )
    parser.add_argument("--only", choices=["plain", "transformed"], help="run one row")
    args = parser.parse_args()
    chunks = pages(args.items, args.page)
    if args.declarative:
        pollers = declarative_pollers()
    else:
        pollers = [invoices, replace(invoices, transform=compile_transform(TRANSFORM, "bench"))]
    if args.only is not None:
        index = ["plain", "transformed"].index(args.only)
        (alone,) = best_per_event(pollers[index : index + 1], chunks, args.rounds)
        print(f"{args.only} stream  {alone:6.1f} µs/event")
        return
    plain, with_transform = best_per_event(pollers, chunks, args.rounds)
    share = (with_transform - plain) / plain * 100
    print(f"plain stream        {plain:6.1f} µs/event")
    print(f"transformed stream  {with_transform:6.1f} µs/event  (+{share:.0f}%; budget: +20%)")


if __name__ == "__main__":
    main()
