"""One runner holding a million ``parent.poll: on_change`` child partitions (issue 44): memory,
start-up, restore, idle CPU beside the same runner without them, and parents changing.

    PYTHONPATH=connector:. .venv/bin/python -m integration.bench.onchange_children \
        --state-dir DIR [--children 1000000] [--tenants 100] [--partitions 8] \
        [--settle 30] [--window 60] [--changes 10000] [--change-window 120]

Two topic prefixes are written before any runner starts, as a runner would have committed them
(a plain producer, each record on its key's Kafka partition): for ``--tenants`` tenants of a
ticketing connector (:mod:`.onchange_runner`), each tenant's ``desk.tickets`` state (its cursor
at the vendor's present) and one snapshot entry per ticket (``--children`` tickets in all);
prefix ``with`` also holds one ``desk.comments`` child partition per ticket (its state, waiting
for its parent's next change, and one snapshot entry). Then two runner processes start at the
same time, one per prefix, each with a local state store under DIR (empty: a cold restore) and
the same in-process vendor, and are measured side by side (this VM's speed varies by up to
twice between minutes, so only figures taken together compare):

- ``ready``: from the process start (imports included) until it owns every Kafka partition;
  RSS then, and after ``--settle`` seconds;
- idle: over ``--window`` seconds, each runner's CPU (user + system, % of a core) and RSS at
  the end; nothing changes at the vendor, the parents poll every 30 s and find nothing;
- changes: the runner with children changes ``--changes`` tickets a minute for
  ``--change-window`` seconds; a read_committed consumer of its ``desk.comments`` events topic
  measures the latency from each change (the vendor stamps it) to the child's event (p50, p99,
  max) and counts the events (one new comment per change, never twice); the runner's CPU and
  RSS over that window, beside the runner without children (idle);
- restart: the runner with children stopped and started again on its disk: ``ready`` and RSS
  (the restore reads only what the topics gained).

No figure is asserted: it prints them. The broker is ``$WATUKUY_BOOTSTRAP``, else the one in
``.watukuy/broker``. Topics and stores are deleted at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from integration.bench.cpu import MachineSpeed
from integration.bench.onchange_runner import CHILD, PARENT, Desk, tenant_name, ticket_name
from integration.bench.restore import produce_records
from integration.demo import ROOT, delete_topics, kafka_broker, signals_interrupt
from watukuy.core.keys import key_text
from watukuy.core.onchange import after_success
from watukuy.core.poll import fresh_state
from watukuy.core.state import LaneState, SnapshotEntry
from watukuy.serde.consumer import SchemaTopicResolver, event_decoder
from watukuy.serde.state import encode_item, encode_state
from watukuy.store.kafka.partitioner import partition_for
from watukuy.store.kafka.records import item_key, state_key
from watukuy.store.kafka.topics import TopicLayout

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_of(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def records(
    layout: TopicLayout, tenants: int, per_tenant: int, children: bool, now: float
) -> Iterator[tuple[str, int, bytes, bytes]]:
    """What a runner would have committed: parents at the vendor's present, every ticket in
    their snapshots; with ``children``, each ticket's child waiting, with one comment seen."""
    pollers = {p.name: p for p in Desk(1, 1).pollers("30s")}
    parent, child = pollers[PARENT], pollers[CHILD]
    seen = SnapshotEntry(version="1", seen=now)
    for t in range(tenants):
        tenant = tenant_name(t)
        where = partition_for(key_text(PARENT, tenant), layout.partitions)
        state = replace(fresh_state(parent, tenant, now), live=LaneState(cursor=0), sequence=1)
        yield layout.state, where, state_key(PARENT, tenant), encode_state(state)
        for i in range(per_tenant):
            ticket = ticket_name(i)
            yield (
                layout.items,
                where,
                item_key(PARENT, tenant, ticket),
                encode_item(PARENT, tenant, ticket, seen),
            )
        if not children:
            continue
        for i in range(per_tenant):
            ticket = ticket_name(i)
            key = f"{tenant}/{ticket}"
            at = partition_for(key_text(CHILD, key), layout.partitions)
            state = fresh_state(child, key, now)
            state = replace(
                state, schedule=after_success(child, state.schedule), sequence=1, last_success=now
            )
            yield layout.state, at, state_key(CHILD, key), encode_state(state)
            comment = f"{ticket}-c1"
            entry = SnapshotEntry(version=comment, seen=now)
            yield (
                layout.items,
                at,
                item_key(CHILD, key, comment),
                encode_item(CHILD, key, comment, entry),
            )


class Runner:
    def __init__(self, args: argparse.Namespace, bootstrap: str, prefix: str, name: str) -> None:
        command = [
            sys.executable, "-m", "integration.bench.onchange_runner",
            "--bootstrap", bootstrap, "--prefix", prefix, "--runner", name,
            "--state-dir", str(args.state_dir / prefix), "--tenants", str(args.tenants),
            "--tickets", str(args.children // args.tenants), "--partitions", str(args.partitions),
            "--parent-every", args.parent_every,
        ]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": f"{ROOT / 'connector'}:{ROOT}"}
        log = open(args.state_dir / f"{name}.log", "a")  # noqa: SIM115 - closed with the process
        self.process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=log, text=True,
        )  # fmt: skip
        self.pid = self.process.pid

    def said(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"runner {self.pid} ended: see its log")
        return dict(json.loads(line))

    def tell(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.tell("stop")
        try:
            self.process.wait(120)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class Latencies(threading.Thread):
    """Reads the child events topic (read_committed) and keeps each new comment's latency."""

    def __init__(self, bootstrap: str, prefix: str) -> None:
        super().__init__(daemon=True)
        topic = f"{prefix}.events.{CHILD}"
        self.resolver = SchemaTopicResolver(bootstrap, f"{prefix}.schemas")
        self.decode = event_decoder(resolve=self.resolver)
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed", "enable.auto.commit": False,
        })  # fmt: skip
        parts = self.consumer.list_topics(topic, timeout=30).topics[topic].partitions
        self.consumer.assign([TopicPartition(topic, p, -1) for p in parts])  # from the end
        self.latencies: list[float] = []
        self.subjects: dict[tuple[Any, str], int] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            message = self.consumer.poll(0.2)
            if message is None or message.error() is not None:
                continue
            value, key = message.value(), message.key()
            if value is None:
                continue
            event = self.decode(value).to_dict()
            seen = (key, event["subject"])  # comment ids repeat across tenants, not keys
            self.subjects[seen] = self.subjects.get(seen, 0) + 1
            changed = (event.get("data") or {}).get("changed_at") or 0.0
            if changed > 0:
                self.latencies.append(time.time() - changed)
        self.consumer.close()
        self.resolver.close()


def window(runners: list[Runner], seconds: float) -> tuple[list[float], str]:
    before = [cpu_seconds(r.pid) for r in runners]
    start = time.monotonic()
    with MachineSpeed() as speed:
        time.sleep(seconds)
    took = time.monotonic() - start
    cpu = [100 * (cpu_seconds(r.pid) - b) / took for r, b in zip(runners, before, strict=True)]
    return cpu, speed.summary()


def quantile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) > 1 else float("nan")


def run(args: argparse.Namespace, bootstrap: str, prefixes: dict[str, str]) -> list[str]:
    per = args.children // args.tenants
    out = [
        f"on_change children: {per * args.tenants} over {args.tenants} tenants, "
        f"{args.partitions} partitions, local state store, standbys 0, parents polled every "
        f"{args.parent_every}"
    ]
    for label, prefix in prefixes.items():
        layout = TopicLayout(prefix=prefix, partitions=args.partitions, replication_factor=1)
        started = time.monotonic()
        made = records(layout, args.tenants, per, label == "with", time.time())
        written = produce_records(bootstrap, layout, made, [(PARENT, None), (CHILD, None)])
        out.append(f"preload {label}: {written} records in {time.monotonic() - started:.0f} s")
    runners = {
        label: Runner(args, bootstrap, p, f"onchange-{label}") for label, p in prefixes.items()
    }
    try:
        ready = {label: r.said() for label, r in runners.items()}
        for label, said in ready.items():
            out.append(
                f"start-up ({label} children, cold restore): ready {said['ready']:.1f} s after "
                f"the process started, RSS {said['rss_mb']:.0f} MB"
            )
        time.sleep(args.settle)
        both = [runners["with"], runners["without"]]
        cpu, speed = window(both, args.window)
        rss = [rss_of(r.pid) for r in both]
        out.append(
            f"idle {args.window:.0f} s, side by side: with children CPU {cpu[0]:.2f}% RSS "
            f"{rss[0]:.0f} MB; without CPU {cpu[1]:.2f}% RSS {rss[1]:.0f} MB; speed {speed}"
        )
        latencies = Latencies(bootstrap, prefixes["with"])
        latencies.start()
        runners["with"].tell(f"change {args.changes} {args.change_window}")
        cpu, speed = window(both, args.change_window)
        changed = runners["with"].said()["changed"]
        time.sleep(60)  # the last changes' parents poll, then their children
        latencies.done.set()
        latencies.join(30)
        seen = latencies.latencies
        twice = sum(1 for n in latencies.subjects.values() if n > 1)
        out.append(
            f"{args.changes} parent changes a minute for {args.change_window:.0f} s: {changed} "
            f"changes, {len(seen)} child events (published twice: {twice}); latency change -> "
            f"child event p50 {quantile(seen, 50):.2f} s, p99 {quantile(seen, 99):.2f} s, max "
            f"{max(seen, default=float('nan')):.2f} s; CPU with {cpu[0]:.1f}%, without (idle) "
            f"{cpu[1]:.1f}%; RSS {rss_of(both[0].pid):.0f} MB; speed {speed}"
        )
        runners["with"].stop()
        again = Runner(args, bootstrap, prefixes["with"], "onchange-with")
        runners["with"] = again
        said = again.said()
        out.append(
            f"restart on its disk (with children): ready {said['ready']:.1f} s, RSS "
            f"{said['rss_mb']:.0f} MB; after {args.settle:.0f} s: {rss_of(again.pid):.0f} MB"
        )
        time.sleep(args.settle)
    finally:
        for r in runners.values():
            r.stop()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m integration.bench.onchange_children",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--state-dir", type=Path, required=True, metavar="DIR")
    parser.add_argument("--children", type=int, default=1_000_000)
    parser.add_argument("--tenants", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--settle", type=float, default=30.0)
    parser.add_argument("--window", type=float, default=60.0)
    parser.add_argument("--changes", type=float, default=10_000, help="tickets changed a minute")
    parser.add_argument("--change-window", type=float, default=120.0)
    parser.add_argument("--parent-every", default="30s", help="the parents' schedule (30s)")
    args = parser.parse_args(argv)
    args.state_dir.mkdir(parents=True, exist_ok=True)
    signals_interrupt()
    run_id = uuid.uuid4().hex[:6]
    prefixes = {"with": f"bench-oc-{run_id}-with", "without": f"bench-oc-{run_id}-without"}
    load = os.getloadavg()[0]
    lines: list[str] = []
    with kafka_broker("onchange_children") as bootstrap:
        try:
            lines = run(args, bootstrap, prefixes)
        except (TimeoutError, RuntimeError, KeyboardInterrupt) as exc:
            print(f"onchange_children: stopped: {exc!r}", file=sys.stderr)
        finally:
            for prefix in prefixes.values():
                with contextlib.suppress(Exception):
                    delete_topics(bootstrap, prefix)
                shutil.rmtree(args.state_dir / prefix, ignore_errors=True)
    print("\n".join([*lines, f"load {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"]))
    return 0 if lines else 1


if __name__ == "__main__":
    sys.exit(main())
