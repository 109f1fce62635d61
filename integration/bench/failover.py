"""Failover time: SIGKILL one of two runners; until every moved key has committed again.

    PYTHONPATH=. .venv/bin/python -m integration.bench.failover \
        [--tenants 500] [--rounds 5] [--schedule 2s] [--partitions 8] [--keep-topics]

One vendor simulator (``python -m integration.simulator --tenants 500 --items 2``) and two
runner processes (``python -m watukuy.cli --config ...``, the Python poller
``integration.pollers:invoices``, schedule ``--schedule`` for min and max) in one group, with
the default ``runner.session.timeout`` (10s) and ``commit.interval`` 100ms. A read_committed
consumer in this process notes when each event of ``<prefix>.events.invoices`` becomes
visible.

Settled means: both runners hold partitions of ``<prefix>.state`` (the group as the broker
describes it), and after one item of every tenant was changed through the simulator's admin
API (``PATCH /_admin/tenants/{id}/items/{item}``), every tenant's change reached the events
topic. Then, per round, the runner holding the victim's partitions is SIGKILLed (the two take
turns); right after the kill one item of every *moved* tenant (a key hashing to a partition the
victim held) is changed; the round's figure is the time from the kill until the last moved key's
new event is visible to read_committed (the survivor noticed the dead member after the session
timeout, took the partitions over, restored them, polled and committed). ``survivor owns s``
is when the group showed the survivor holding every partition (polled every 0.2 s). The
victim is restarted and the pair settles again before the next round.

Reported: each round, then min / median / max. Target (issue 13): <= 15 s with defaults. The
broker is ``$WATUKUY_BOOTSTRAP``, else the one in ``.watukuy/broker`` (started if not running).
Configs and runner logs are in ``.watukuy/bench/failover/``; the topics are deleted at the end
unless ``--keep-topics``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import ConsumerGroupState, KafkaException
from confluent_kafka.admin import AdminClient

from integration.demo import (
    ROOT,
    Simulator,
    committed_reader,
    delete_topics,
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
from watukuy.store.kafka.partitioner import partition_for

BENCH_DIR = ROOT / ".watukuy" / "bench" / "failover"
POLLER = "invoices"


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, step: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")


def held(admin: AdminClient, group: str) -> dict[str, set[int]]:
    """Runner id (group.instance.id) -> partitions of ``<prefix>.state`` it holds now."""
    try:
        described = admin.describe_consumer_groups([group])[group].result(timeout=5)
    except (KafkaException, TimeoutError):  # the coordinator is still loading: no view yet
        return {}
    if described.state in (ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD):
        return {}
    out = {
        (m.group_instance_id or m.client_id): {tp.partition for tp in m.assignment.topic_partitions}
        for m in described.members
    }
    return {k: v for k, v in out.items() if v}


class Visible:
    """A read_committed consumer noting when each key's events became visible (wall time)."""

    def __init__(self, bootstrap: str, topic: str, partitions: list[int]) -> None:
        self._consumer = committed_reader(bootstrap, topic, partitions)
        self._lock = threading.Lock()
        self._latest: dict[str, float] = {}  # key -> when its last event was seen
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for message in self._consumer.consume(num_messages=1000, timeout=0.05):
                key = message.key()
                if message.error() is None and key is not None:
                    with self._lock:
                        self._latest[key.decode()] = time.time()
        self._consumer.close()

    def all_after(self, keys: set[str], since: float) -> float | None:
        """When the last of ``keys`` had an event after ``since``; None while one has not."""
        with self._lock:
            times = [self._latest.get(key, 0.0) for key in keys]
        return max(times) if times and min(times) > since else None

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)


@dataclass
class Vendor:
    """Changes one item of a tenant through the simulator's admin API."""

    base_url: str
    items: dict[str, str] = field(default_factory=dict)  # tenant id -> an item id
    pool: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(16))

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.base_url}{path}", data=data, method=method)
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"null")

    def learn(self, tenants: list[str]) -> None:
        def first(tenant: str) -> tuple[str, str]:
            return tenant, self._call("GET", f"/_admin/tenants/{tenant}/items")["data"][0]["id"]

        self.items = dict(self.pool.map(first, tenants))

    def touch(self, tenants: list[str]) -> None:
        note = uuid.uuid4().hex[:8]

        def patch(tenant: str) -> None:
            path = f"/_admin/tenants/{tenant}/items/{self.items[tenant]}"
            self._call("PATCH", path, {"note": note})

        list(self.pool.map(patch, tenants))


@dataclass
class Round:
    victim: str
    moved: int
    owns: float  # kill -> the survivor holds every partition
    committed: float  # kill -> the last moved key's new event visible


def key_of(tenant: str) -> str:
    return f"{POLLER}/{tenant}"


def run(args: argparse.Namespace, bootstrap: str, sim: Simulator, prefix: str) -> list[Round]:
    group = f"{prefix}.runners"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    env = runner_env(
        sim.base_url, WATUKUY_SCHEDULE_MIN=args.schedule, WATUKUY_SCHEDULE_MAX=args.schedule
    )
    names = ["fo-r1", "fo-r2"]
    configs = {
        name: write_config(
            BENCH_DIR / f"{name}.yaml",
            runner_config(bootstrap, prefix, name, partitions=args.partitions),
            "Written by python -m integration.bench.failover",
        )
        for name in names
    }
    logs = {name: BENCH_DIR / f"{name}.log" for name in names}
    for log in logs.values():
        log.write_text("")
    tenants = [t["id"] for t in sim.tenants]
    every = {key_of(t) for t in tenants}
    vendor = Vendor(sim.base_url)
    vendor.learn(tenants)
    runners = {name: start_runner(configs[name], env, logs[name]) for name in names}
    rounds: list[Round] = []
    visible: Visible | None = None
    try:
        topic = f"{prefix}.events.{POLLER}"
        partitions = wait_for_topic(bootstrap, topic, 120)
        if partitions is None:
            raise RuntimeError(f"{topic} never appeared; see {BENCH_DIR}/*.log")
        visible = Visible(bootstrap, topic, partitions)

        def settle() -> None:
            wait_until(lambda: len(held(admin, group)) == 2, 120, "two runners sharing")
            since = time.time()
            vendor.touch(tenants)
            wait_until(lambda: visible.all_after(every, since), 180, "every tenant's change")

        for n in range(args.rounds):
            settle()
            victim = names[n % 2]
            survivor = names[(n + 1) % 2]
            lost = held(admin, group).get(victim, set())
            moved = [t for t in tenants if partition_for(key_of(t), args.partitions) in lost]
            killed = time.time()
            runners[victim].kill()
            vendor.touch(moved)
            owns = float("nan")
            deadline = time.monotonic() + 120
            done = None
            while done is None:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"round {n + 1}: the moved keys never committed again")
                if owns != owns and held(admin, group).get(survivor) == set(range(args.partitions)):
                    owns = time.time() - killed
                done = visible.all_after({key_of(t) for t in moved}, killed)
                time.sleep(0.2)
            runners[victim].wait(10)
            rounds.append(Round(victim, len(moved), owns, done - killed))
            print(
                f"round {n + 1}: killed {victim}, {len(moved)} moved keys, survivor owns all "
                f"after {owns:.1f} s, all committed again after {done - killed:.1f} s",
                file=sys.stderr,
                flush=True,
            )
            runners[victim] = start_runner(configs[victim], env, logs[victim])
    finally:
        if visible is not None:
            visible.close()
        for runner in runners.values():
            stop_process(runner, signal.SIGTERM, 60)
        vendor.pool.shutdown()
    return rounds


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m integration.bench.failover",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--tenants", type=int, default=500, help="simulated tenants (500)")
    parser.add_argument("--rounds", type=int, default=5, help="kills to time (5)")
    parser.add_argument(
        "--schedule", default="2s", help="the poller's schedule, min = max (2s: 250 polls/s)"
    )
    parser.add_argument("--partitions", type=int, default=8, help="topics.partitions (8)")
    parser.add_argument("--keep-topics", action="store_true", help="keep the topics")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.tenants < 2 or args.rounds < 1 or args.partitions < 2:
        print("failover: --tenants >= 2, --rounds >= 1, --partitions >= 2", file=sys.stderr)
        return 2
    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    signals_interrupt()
    prefix = f"bench-fo-{uuid.uuid4().hex[:8]}"
    rounds: list[Round] = []
    load = os.getloadavg()[0]
    with kafka_broker("failover") as bootstrap:
        sim = start_simulator(
            "--tenants", str(args.tenants), "--items", "2", "--quota", str(10**9),
            log=BENCH_DIR / "simulator.log",
        )  # fmt: skip
        try:
            rounds = run(args, bootstrap, sim, prefix)
        except (TimeoutError, RuntimeError, KeyboardInterrupt) as exc:
            print(f"failover: stopped: {exc!r}", file=sys.stderr)
        finally:
            sim.stop()
            if not args.keep_topics:
                with contextlib.suppress(Exception):
                    delete_topics(bootstrap, prefix)
    print(
        f"failover: {args.tenants} tenants, 2 runners, session.timeout 10s (default), "
        f"schedule {args.schedule}, {args.partitions} partitions, load {load:.1f} at the start"
    )
    print(
        f"{'round':>5} {'victim':>6} {'moved keys':>10} {'survivor owns s':>15} {'committed s':>11}"
    )
    for n, r in enumerate(rounds, 1):
        print(f"{n:>5} {r.victim:>6} {r.moved:>10} {r.owns:>15.1f} {r.committed:>11.1f}")
    if not rounds:
        return 1
    times = [r.committed for r in rounds]
    print(
        f"kill -> every moved key committed again: min {min(times):.1f} s, "
        f"median {statistics.median(times):.1f} s, max {max(times):.1f} s "
        f"(target <= 15 s: {'ok' if max(times) <= 15 else 'MISSED'})"
    )
    return 0 if len(rounds) == args.rounds else 1


if __name__ == "__main__":
    sys.exit(main())
