"""Webhooks wake tenants (issue 46): from a vendor's webhook to its event on Kafka, on a
schedule that would not poll for 15 minutes.

    PYTHONPATH=connector:. .venv/bin/python -m integration.bench.webhooks \
        [--tenants 1000] [--rate 10] [--seconds 120] [--answer-delay 20ms] [--quick]

What it starts, each a process of its own: the vendor simulator (``--tenants`` tenants of
``--items`` invoices, every tenant answering its API after ``--answer-delay``, as
``backlog.slow_down`` makes it) and two runners of ``config/invoices.yaml`` on a fresh topics
prefix, schedule ``{min: 15m, max: 15m}``, no budget, and a ``webhook:`` block (GitHub's
``X-Hub-Signature-256``, the tenant from ``X-Tenant``) at ``/webhooks/invoices``. Once every
tenant's first poll is readable on Kafka (the initial sync, not measured), the bench changes
``--rate`` invoices a second for ``--seconds`` (tenants drawn uniformly from a seeded generator,
one admin ``PATCH`` each), and subscribes each changed tenant's webhooks to the runners in
turn (change *n* to runner *n mod 2*: two sets of subscriptions, switched before the change),
so the runners receive webhooks alternately and either may hold the key it wakes.

A read_committed consumer of the events topic (the way a bench times readability, see
``committed_reader(timing=True)``) matches each change's (tenant, invoice, etag) to its event,
and the simulator's deliveries (``GET /_admin/webhooks``: ``sent_at``, ``answered_at``) give,
per change:

- **202 -> readable**: from the webhook's 202 at the sender to the event read on Kafka (target
  p99 <= 1 s);
- **route**: the webhook route's answer time, ``answered_at - sent_at`` at the sender (target
  p99 <= 20 ms): verify, tenant, the ``wake`` command record acked by Kafka;
- **vendor calls per change**: the tenants' API requests during the window (the simulator's
  ``/_admin/stats``; the runners' tenant listings, ``GET /tenants``, are counted apart) over
  the changes.

Beside them it prints, from the runners' ``/metrics``, ``watukuy_webhooks_total`` by result
and the ``watukuy_webhook_wake_seconds`` histogram (the runner's own wake -> commit, p50/p99
interpolated in its buckets), and the 1-minute load average at the start and the end: the
machine is shared, so read the figures with it. ``--quick`` runs 200 tenants for 10 s (about
30 s in all).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from integration.bench.backlog import slow_down
from integration.demo_pieces import (
    ROOT,
    Simulator,
    committed_reader,
    delete_topics,
    example_config,
    kafka_broker,
    runner_config,
    runner_env,
    signals_interrupt,
    start_runner,
    start_simulator,
    stop_process,
    wait_for_topic,
    write_config,
)
from integration.processes import free_port
from watukuy.core.durations import parse_duration
from watukuy.serde.consumer import SchemaTopicResolver, event_decoder

POLLER = "invoices"
HOOK_PATH = "/webhooks/invoices"
SECRET = "bench-hook-secret"
RUNNERS = ("hooks-a", "hooks-b")
LOG_DIR = ROOT / ".watukuy" / "bench" / "webhooks"


@dataclass
class Change:
    """One invoice changed by the bench, and what became of its webhook and its event."""

    tenant: str
    item: str
    etag: str
    runner: int  # which runner its webhook went to
    made_at: float
    sent_at: float | None = None
    answered_at: float | None = None
    status: int | None = None
    readable_at: float | None = None


@dataclass
class Events:
    """What the reader has seen: (tenant, invoice, etag) -> when it was first readable."""

    seen: dict[tuple[str, str, str], float] = field(default_factory=dict)
    count: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class Reader(threading.Thread):
    """Reads the events topic read_committed from its beginning and notes when each
    (tenant, invoice, version) was first read."""

    def __init__(self, bootstrap: str, prefix: str, partitions: list[int]) -> None:
        super().__init__(daemon=True)
        self.consumer = committed_reader(
            bootstrap, f"{prefix}.events.{POLLER}", partitions, timing=True
        )
        self.resolver = SchemaTopicResolver(bootstrap, f"{prefix}.schemas")
        self.decode = event_decoder(resolve=self.resolver)
        self.events = Events()
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            message = self.consumer.poll(0.05)
            if message is None or message.error() is not None or message.value() is None:
                continue
            now = time.time()
            event = self.decode(message.value() or b"")
            with self.events.lock:
                self.events.seen.setdefault((event.partition, event.subject, event.version), now)
                self.events.count += 1
        self.consumer.close()
        self.resolver.close()

    def wait_count(self, count: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.events.count >= count:
                return True
            time.sleep(0.2)
        return False


class Admin:
    """The simulator's admin API on one kept-alive connection (the bench's own requests are
    not counted by the simulator)."""

    def __init__(self, base_url: str) -> None:
        parts = urlsplit(base_url)
        self.connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        self.connection.request(method, path, body=data, headers=headers)
        response = self.connection.getresponse()
        raw = response.read()
        if response.status >= 300:
            raise RuntimeError(f"{method} {path}: {response.status} {raw[:200]!r}")
        return json.loads(raw) if raw else None

    def close(self) -> None:
        self.connection.close()


def write_runner_config(args: argparse.Namespace, bootstrap: str, prefix: str) -> Path:
    example = example_config({"min": "15m", "max": "15m"})
    poller = example["pollers"][0]
    poller.pop("budget", None)  # the vendor's 20 ms answers are the limit, not a budget
    poller["partitions"]["refresh"] = "60s"
    poller["webhook"] = {
        "path": HOOK_PATH,
        "verify": {
            "hmac": {
                "secret": "${env:BENCH_HOOK_SECRET}",
                "header": "X-Hub-Signature-256",
                "encoding": "hex",
                "prefix": "sha256=",
            }
        },
        "tenant": {"header": "X-Tenant"},
    }
    example["budgets"] = {}
    config = runner_config(
        bootstrap,
        prefix,
        "${env:WATUKUY_RUNNER_ID}",
        partitions=args.partitions,
        example=example,
        **{"commit.interval": args.commit_interval},
    )
    config["rest"] = {"listen": "127.0.0.1:${env:WATUKUY_REST_PORT}", "auth": "none"}
    return write_config(
        args.dir / "runner.yaml",
        config,
        "Written by python -m integration.bench.webhooks: config/invoices.yaml on a 15-minute",
        "schedule with a webhook block; each runner sets its id and REST port in the environment",
    )


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return json.loads(answer.read())


def scrape(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            return str(answer.read().decode())
    except OSError:
        return ""


def wait_rest(ports: list[int], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(scrape(port) for port in ports):
            return True
        time.sleep(0.3)
    return False


def wait_shared(ports: list[int], keys: int, timeout: float) -> list[float] | None:
    """Each runner's ``watukuy_owned_keys`` once every runner holds some and together all
    ``keys`` (the group settled: one runner alone may finish the initial sync before the
    other's first assignment, and a rebalance moves keys in the middle of the measure)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        owned = [sum(v for _, v in samples(scrape(p), "watukuy_owned_keys")) for p in ports]
        if all(owned) and sum(owned) == keys:
            return owned
        time.sleep(0.3)
    return None


_SAMPLE = re.compile(r"^(\w+)(?:\{([^}]*)\})? (\S+)$")


def samples(text: str, name: str) -> Iterator[tuple[dict[str, str], float]]:
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match is None or match.group(1) != name:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ""))
        yield labels, float(match.group(3))


def bucket_quantile(buckets: dict[float, float], q: float) -> float:
    """Prometheus' ``histogram_quantile`` over cumulative ``le`` buckets."""
    bounds = sorted(buckets)
    total = buckets[bounds[-1]] if bounds else 0.0
    if total <= 0:
        return float("nan")
    rank, lower, below = q * total, 0.0, 0.0
    for bound in bounds:
        count = buckets[bound]
        if count >= rank:
            if bound == float("inf"):
                return lower
            return lower + (bound - lower) * (rank - below) / max(count - below, 1e-12)
        lower, below = bound, count
    return lower


def runner_figures(texts: list[str]) -> tuple[dict[str, float], dict[float, float], float, float]:
    """Webhooks by result, wake->commit buckets, their sum and count, over both runners."""
    results: dict[str, float] = defaultdict(float)
    buckets: dict[float, float] = defaultdict(float)
    total = count = 0.0
    for text in texts:
        for labels, value in samples(text, "watukuy_webhooks_total"):
            results[labels.get("result", "?")] += value
        for labels, value in samples(text, "watukuy_webhook_wake_seconds_bucket"):
            buckets[float(labels["le"])] += value
        total += sum(v for _, v in samples(text, "watukuy_webhook_wake_seconds_sum"))
        count += sum(v for _, v in samples(text, "watukuy_webhook_wake_seconds_count"))
    return dict(results), dict(buckets), total, count


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=1000, method="inclusive")[round(q * 1000) - 1]


def ms(value: float) -> str:
    return "n/a" if value != value else f"{value * 1000:.0f} ms"


def change_invoices(
    args: argparse.Namespace, sim: Simulator, urls: list[str], items: dict[str, list[str]]
) -> list[Change]:
    """``--rate`` changes a second for ``--seconds``, each tenant's webhooks switched to the
    next runner in turn just before its change."""
    admin = Admin(sim.base_url)
    rng = random.Random(46)
    tenants = sorted(items)
    subscribed: dict[str, int] = {}
    changes: list[Change] = []
    start = time.monotonic()
    try:
        while (n := len(changes)) < args.rate * args.seconds:
            time.sleep(max(0.0, start + n / args.rate - time.monotonic()))
            tenant = rng.choice(tenants)
            runner = n % len(urls)
            if subscribed.get(tenant) != runner:
                subscription = {"tenant": tenant, "url": urls[runner], "secret": SECRET}
                admin.call("POST", "/_admin/webhooks", subscription)
                subscribed[tenant] = runner
            item = rng.choice(items[tenant])
            amount = round(rng.uniform(1, 1000), 2)
            made_at = time.time()
            path = f"/_admin/tenants/{tenant}/items/{item}"
            record = admin.call("PATCH", path, {"amount": amount})
            changes.append(Change(tenant, item, str(record["etag"]), runner, made_at))
    finally:
        admin.close()
    return changes


def attach_deliveries(sim: Simulator, changes: list[Change]) -> None:
    """Each change's first delivery: a tenant's webhooks are sent in its changes' order."""
    listing = get_json(f"{sim.base_url}/_admin/webhooks")
    by_tenant: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for delivery in listing["deliveries"]:
        if delivery["attempt"] == 1:
            by_tenant[delivery["tenant"]].append(delivery)
    mine: dict[str, list[Change]] = defaultdict(list)
    for change in changes:
        mine[change.tenant].append(change)
    for tenant, made in mine.items():
        sent = sorted(by_tenant.get(tenant, []), key=lambda d: int(d["event"].split("_")[1]))
        for change, delivery in zip(made, sent, strict=False):
            change.sent_at, change.answered_at = delivery["sent_at"], delivery["answered_at"]
            change.status = delivery["status"]


def wait_deliveries(sim: Simulator, expected: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        listing = get_json(f"{sim.base_url}/_admin/webhooks")
        if sum(1 for d in listing["deliveries"] if d["answered_at"] or d["error"]) >= expected:
            return
        time.sleep(0.2)


def request_counts(sim: Simulator) -> tuple[int, int]:
    """The tenants' API requests, and every request (the tenant listings too)."""
    stats = get_json(f"{sim.base_url}/_admin/stats")
    return sum(stats["tenants"].values()), int(stats["total"])


def run(args: argparse.Namespace, bootstrap: str) -> int:
    prefix = f"hooks-{uuid.uuid4().hex[:6]}"
    args.dir.mkdir(parents=True, exist_ok=True)
    load_start = os.getloadavg()
    say(
        f"load average {load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f} "
        f"({os.cpu_count()} cores); topics {prefix}.*; logs in {args.dir}"
    )
    sim = start_simulator(
        "--tenants", str(args.tenants), "--items", str(args.items), "--mutate-every", "0",
        "--quota", str(10**9), "--projects", "0", "--users", "0",
        log=args.dir / "simulator.log",
    )  # fmt: skip
    runners: list[subprocess.Popen[bytes]] = []
    reader: Reader | None = None
    try:
        slow_down(sim, args.answer_delay)
        config = write_runner_config(args, bootstrap, prefix)
        ports = [free_port() for _ in RUNNERS]
        for name, port in zip(RUNNERS, ports, strict=True):
            env = runner_env(
                sim.base_url,
                WATUKUY_RUNNER_ID=name,
                WATUKUY_REST_PORT=str(port),
                BENCH_HOOK_SECRET=SECRET,
            )
            runners.append(start_runner(config, env, args.dir / f"{name}.log"))
        started = time.monotonic()
        topic = f"{prefix}.events.{POLLER}"
        partitions = wait_for_topic(bootstrap, topic, 120, alive=lambda: all_alive(runners))
        if partitions is None or not wait_rest(ports, 60):
            say(f"the runners did not start; see {args.dir}")
            return 1
        reader = Reader(bootstrap, prefix, partitions)
        reader.start()
        initial = args.tenants * args.items
        if not reader.wait_count(initial, args.sync_timeout):
            say(f"initial sync: {reader.events.count} of {initial} events; see {args.dir}")
            return 1
        say(
            f"initial sync: {initial} events of {args.tenants} tenants readable "
            f"{time.monotonic() - started:.1f}s after the runners started"
        )
        owned = wait_shared(ports, args.tenants, args.sync_timeout)
        if owned is None:
            say(f"the runners never shared the {args.tenants} keys; see {args.dir}")
            return 1
        time.sleep(args.settle)  # the moved keys' restores and first commits done
        say(f"keys held by the runners: {' + '.join(f'{n:.0f}' for n in owned)}")
        items = fetch_items(sim)
        before_tenants, before_total = request_counts(sim)
        urls = [f"http://127.0.0.1:{port}{HOOK_PATH}" for port in ports]
        say(
            f"changing {args.rate:g} invoices/s for {args.seconds:g}s over {args.tenants} "
            f"tenants; webhooks alternately to {', '.join(urls)}"
        )
        window_start = time.monotonic()
        changes = change_invoices(args, sim, urls, items)
        window = time.monotonic() - window_start
        wait_deliveries(sim, len(changes), 30)
        drain_deadline = time.monotonic() + args.drain
        while time.monotonic() < drain_deadline:
            with reader.events.lock:
                missing = [
                    c for c in changes if (c.tenant, c.item, c.etag) not in reader.events.seen
                ]
            if not missing:
                break
            time.sleep(0.2)
        after_tenants, after_total = request_counts(sim)
        attach_deliveries(sim, changes)
        with reader.events.lock:
            for change in changes:
                change.readable_at = reader.events.seen.get(
                    (change.tenant, change.item, change.etag)
                )
        texts = [scrape(port) for port in ports]
        load_end = os.getloadavg()
        report(
            args,
            changes,
            window,
            (after_tenants - before_tenants, after_total - before_total),
            runner_figures(texts),
            (load_start, load_end),
        )
        return 0
    finally:
        for runner in runners:
            stop_process(runner, signal.SIGTERM, 60)
        if reader is not None:
            reader.done.set()
            reader.join(10)
        sim.stop()
        if not args.keep_topics:
            delete_topics(bootstrap, prefix)


def fetch_items(sim: Simulator) -> dict[str, list[str]]:
    admin = Admin(sim.base_url)
    try:
        return {
            t["id"]: [
                i["id"] for i in admin.call("GET", f"/_admin/tenants/{t['id']}/items")["data"]
            ]
            for t in sim.tenants
        }
    finally:
        admin.close()


def report(
    args: argparse.Namespace,
    changes: list[Change],
    window: float,
    calls: tuple[int, int],
    figures: tuple[dict[str, float], dict[float, float], float, float],
    loads: tuple[tuple[float, float, float], tuple[float, float, float]],
) -> None:
    answered = [c for c in changes if c.status == 202 and c.answered_at and c.sent_at]
    route = [c.answered_at - c.sent_at for c in answered if c.answered_at and c.sent_at]
    latency = [c.readable_at - c.answered_at for c in answered if c.readable_at and c.answered_at]
    from_change = [c.readable_at - c.made_at for c in changes if c.readable_at]
    unread = sum(1 for c in changes if c.readable_at is None)
    statuses: dict[str, int] = defaultdict(int)
    for change in changes:
        statuses[str(change.status)] += 1
    results, buckets, wake_sum, wake_count = figures
    per_runner = [sum(1 for c in changes if c.runner == r) for r in range(len(RUNNERS))]
    tenant_calls, all_calls = calls
    p99_latency, p99_route = percentile(latency, 0.99), percentile(route, 0.99)
    lines = [
        f"{len(changes)} changes in {window:.1f}s ({len(changes) / window:.1f}/s) over "
        f"{args.tenants} tenants, schedule 15m, vendor answering in {ms(args.answer_delay)}, "
        f"commit.interval {args.commit_interval}; webhooks to the runners: "
        f"{'/'.join(map(str, per_runner))}; answers {dict(statuses)}",
        f"202 -> readable on Kafka: p50 {ms(percentile(latency, 0.5))}, p99 {ms(p99_latency)}, "
        f"max {ms(max(latency, default=float('nan')))} ({len(latency)} matched, {unread} "
        f"never read) -> target p99 <= 1 s {'met' if p99_latency <= 1.0 else 'MISSED'}",
        f"change -> readable (the webhook's own trip included): p50 "
        f"{ms(percentile(from_change, 0.5))}, p99 {ms(percentile(from_change, 0.99))}",
        f"webhook route's answer (sent_at -> answered_at): p50 {ms(percentile(route, 0.5))}, "
        f"p99 {ms(p99_route)}, max {ms(max(route, default=float('nan')))} -> target p99 <= 20 ms "
        f"{'met' if p99_route <= 0.020 else 'MISSED'}",
        f"vendor calls per change: {tenant_calls / max(len(changes), 1):.2f} "
        f"({tenant_calls} tenant requests; {all_calls - tenant_calls} tenant listings besides)",
        f"runners' watukuy_webhooks_total: {json.dumps(results, sort_keys=True)}; "
        f"watukuy_webhook_wake_seconds (wake -> commit, in buckets): p50 "
        f"{ms(bucket_quantile(buckets, 0.5))}, p99 {ms(bucket_quantile(buckets, 0.99))}, mean "
        f"{ms(wake_sum / wake_count if wake_count else float('nan'))} over {wake_count:.0f}",
        f"load average at the start {' '.join(f'{v:.2f}' for v in loads[0])}, at the end "
        f"{' '.join(f'{v:.2f}' for v in loads[1])}",
    ]
    for line in lines:
        print(line, flush=True)
    if args.json:
        dump = [c.__dict__ for c in changes]
        (args.dir / "changes.json").write_text(json.dumps(dump))
        say(f"every change's times in {args.dir / 'changes.json'}")


def all_alive(runners: list[subprocess.Popen[bytes]]) -> bool:
    return all(runner.poll() is None for runner in runners)


def say(text: str) -> None:
    print(f"webhooks: {text}", flush=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m integration.bench.webhooks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = parser.add_argument
    add("--tenants", type=int, default=1000, help="tenants (1000)")
    add("--items", type=int, default=3, help="invoices per tenant (3)")
    add("--rate", type=float, default=10.0, help="changes per second, over every tenant (10)")
    add("--seconds", type=float, default=120.0, help="how long the changes go on (120)")
    add(
        "--answer-delay",
        type=lambda text: parse_duration(text, "--answer-delay"),
        default=0.02,
        help="every tenant's API answers after this (20ms)",
    )
    add("--commit-interval", default="100ms", help="the runners' commit.interval (100ms)")
    add("--partitions", type=int, default=8, help="partitions of the topics (8)")
    add("--sync-timeout", type=float, default=180.0, help="seconds for the initial sync (180)")
    add("--settle", type=float, default=3.0, help="seconds between the sync and the changes (3)")
    add("--drain", type=float, default=15.0, help="seconds to wait for the last events (15)")
    add("--dir", type=Path, default=LOG_DIR, help="config and logs (.watukuy/bench/webhooks)")
    add("--keep-topics", action="store_true", help="keep the run's topics")
    add("--json", action="store_true", help="write every change's times to DIR/changes.json")
    add("--quick", action="store_true", help="200 tenants for 10 s: about 30 s in all")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.quick:
        args.tenants, args.seconds, args.settle, args.drain = 200, 10.0, 1.0, 8.0
    if args.tenants < 1 or args.rate <= 0 or args.seconds <= 0:
        _parser().error("--tenants, --rate and --seconds must be positive")
    if args.dir.exists() and args.dir.is_relative_to(ROOT / ".watukuy"):
        shutil.rmtree(args.dir)
    signals_interrupt()
    try:
        with kafka_broker("webhooks") as bootstrap:
            return run(args, bootstrap)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
