"""Nobody's partitions: a runner's producer fenced for real, and a partition the group assigns a
runner that the runner never holds. Every key must be polled again within a session timeout
(fenced producer) or a few (the liveness guard's detection, then its rejoin).

1. **A fatal producer error.** Another producer takes a runner's live ``transactional.id``
   (found with Kafka's own ``kafka-transactions.sh list``) and calls ``init_transactions``:
   the coordinator bumps the epoch, and the runner's next transaction fails with a fatal
   "fenced" error, as when a zombie's transaction times out. The runner gives up every lease
   and restores afresh what the group still assigns it. Each key's first event after the fence
   must come within the session timeout. Full profile: 4 rounds, alternating runners, every
   other one while a third runner joins (a revocation then flushes into the fenced producer).
2. **An assignment kept from the runner.** A runner started with ``--swallow-assignment``
   never hears of the first partition of its first assignment: the group and librdkafka say
   it holds it, the runner does not, and no one polls its keys. Its liveness guard must see
   it (``/health`` answers 500 in the meantime) and rejoin, and the keys of that partition
   must be polled again within three session timeouts.
"""

from __future__ import annotations

import re
import threading
import time
import urllib.error
import urllib.request

from confluent_kafka import Producer

from integration.faults.harness import POLLER_NAME, FaultContext, RunnerPool, result
from integration.faults.report import Result
from integration.faults.vendor import Mutator
from integration.faults.watch import EventWatch
from integration.kafka.tools import transactions
from integration.runners import RunnerProcess, wait_for
from watukuy.store.kafka.partitioner import partition_for

NAME = "unowned"
SESSION = 3.0  # runner.session.timeout
FATAL = "fatal producer error"  # what the runner logs when its producer is fenced
SWALLOWED = re.compile(r"injected fault: partition (\d+) assigned, not told")
GUARD = "rejoining the group with a new consumer"  # the guard's ERROR line


def run(ctx: FaultContext, profile: str) -> Result:
    full = profile == "full"
    sim = ctx.simulator(6, 20)
    pool = ctx.pool("unowned", sim, session_timeout=SESSION)
    runners = pool.start(2)
    watch = ctx.watch(pool)
    keys = {f"{POLLER_NAME}/{t}" for t in sim.tenants()}
    problems: list[str] = []
    recoveries: list[float] = []
    rounds = 4 if full else 1
    with Mutator(sim, every=0.02):
        ctx.wait_event(watch, time.monotonic(), keys)
        for round_ in range(rounds):
            victim = runners[round_ % 2]
            joining = pool.add(f"j{round_}") if round_ % 2 == 1 else None
            recovered, found = _fence_round(pool, watch, victim, keys, joining)
            recoveries.append(recovered)
            problems += [f"round {round_ + 1}: {p}" for p in found]
            if joining is not None:  # it leaves again, once it has started
                joining.wait_started()
                joining.stop()
        recovered, found = _swallow_round(pool, watch)
        recoveries.append(recovered)
        problems += found
    ctx.caught_up(pool, watch)
    codes = pool.stop_all()
    problems += [f"{n} exited with {c} at the end" for n, c in codes.items() if c not in (0, None)]
    verdict = ctx.verify(pool)
    done = result(NAME, verdict, rounds=rounds + 1, recovery_s=max(recoveries), problems=problems)
    fenced = ", ".join(f"{r:.1f}" for r in recoveries[:-1])
    done.notes.append(
        f"every key polled again {fenced} s after each fence; the kept partition's keys"
        f" {recoveries[-1]:.1f} s after it was kept (detection, then the rejoin)"
    )
    return done


def _fence_round(
    pool: RunnerPool,
    watch: EventWatch,
    victim: RunnerProcess,
    keys: set[str],
    joining: RunnerProcess | None,
) -> tuple[float, list[str]]:
    """Fence ``victim``'s producer (while ``joining`` starts, if given); how long until every
    key had an event again, and what went wrong."""
    before = victim.since_start().count(FATAL)
    transactional_id = _live_transactional_id(pool, victim.runner_id)
    if joining is not None:
        joining.start()
    fenced_at = time.monotonic()
    fencer = Producer({"bootstrap.servers": pool.bootstrap, "transactional.id": transactional_id})
    fencer.init_transactions(30)  # the coordinator bumps the epoch: the runner's is fenced
    problems = []
    try:
        wait_for(lambda: victim.since_start().count(FATAL) > before, 30, "the fenced commit")
    except TimeoutError:
        problems.append(f"{victim.name} never met its fenced producer")
    recovered = _every_key_again(watch, keys, fenced_at) - fenced_at
    if recovered > SESSION:
        problems.append(f"every key polled again {recovered:.1f}s after the fence (> {SESSION}s)")
    return recovered, problems


def _live_transactional_id(pool: RunnerPool, runner_id: str) -> str:
    """The newest ``transactional.id`` of ``runner_id``'s producers (``<group>.<id>.<random>``),
    as ``kafka-transactions.sh list`` shows them: producer ids only grow."""
    prefix = f"{pool.group}.{runner_id}."
    rows = [line.split() for line in transactions(pool.bootstrap, "list").splitlines()[1:]]
    live = [row for row in rows if len(row) >= 3 and row[0].startswith(prefix)]
    if not live:
        raise RuntimeError(f"no transactional id starts with {prefix}")
    return max(live, key=lambda row: int(row[2]))[0]


def _every_key_again(watch: EventWatch, keys: set[str], since: float, timeout: float = 60) -> float:
    """The monotonic time by which every key of ``keys`` had an event after ``since``."""

    def last_first() -> float | None:
        firsts = [watch.first_after(since, {key}) for key in keys]
        return None if any(t is None for t in firsts) else max(t for t in firsts if t)

    return wait_for(last_first, timeout, "an event of every key", step=0.05)


def _swallow_round(pool: RunnerPool, watch: EventWatch) -> tuple[float, list[str]]:
    """Start a runner that never hears of one partition it is assigned; see the module."""
    keeper = pool.add("keeper", faults=["--swallow-assignment"]).start()
    problems = []
    try:
        kept = wait_for(lambda: SWALLOWED.search(keeper.since_start()), 60, "the swallow")
    except TimeoutError:
        return 0.0, ["the keeper never had a partition to keep from itself"]
    swallowed_at = time.monotonic()
    kafka_partition = int(kept.group(1))
    held = {
        f"{POLLER_NAME}/{t}"
        for t in pool.simulator.tenants()
        if partition_for(f"{POLLER_NAME}/{t}", pool.partitions) == kafka_partition
    }
    health = _HealthWatch(keeper)
    try:
        wait_for(lambda: GUARD in keeper.since_start(), 6 * SESSION, "the guard's rejoin")
        recovered = _every_key_again(watch, held, swallowed_at) if held else time.monotonic()
        wait_for(lambda: health.healthy_again, 3 * SESSION, "/health to say 500, then 200")
    except TimeoutError as exc:
        problems.append(f"partition {kafka_partition} kept from the keeper: {exc}")
        recovered = time.monotonic()
    finally:
        health.stop()
    recovered -= swallowed_at
    if recovered > 3 * SESSION:
        problems.append(f"partition {kafka_partition}'s keys polled again after {recovered:.1f}s")
    return recovered, problems


class _HealthWatch:
    """Asks a runner's ``GET /health`` every 0.2 s; the statuses it answered."""

    def __init__(self, runner: RunnerProcess) -> None:
        self.statuses: set[int] = set()
        self.healthy_again = False  # 200 after a 500
        self._runner = runner
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="health-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        port = None
        while not self._stop.wait(0.2):
            if port is None:
                found = re.search(r"REST on port (\d+)", self._runner.since_start())
                port = None if found is None else int(found.group(1))
                continue
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as got:
                    self._saw(got.status)
            except urllib.error.HTTPError as refused:
                self._saw(refused.code)
            except OSError:
                continue

    def _saw(self, status: int) -> None:
        self.statuses.add(status)
        if status == 200 and 500 in self.statuses:
            self.healthy_again = True

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
