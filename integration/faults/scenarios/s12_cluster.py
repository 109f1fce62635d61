"""Cluster bounces: two runners publish on a three-node Kafka cluster of the scenario's own
(topics with watukuy's production defaults: three replicas, two in sync) while its nodes are
bounced one at a time, the shape of Kafka's own transactions system test.

Each round stops one node, in turn the leader of an events partition, the leader of a state
partition and the node coordinating a runner's transactions, by SIGKILL and by a controlled
shutdown alternately, for 5-12 s, then starts it again; the runners must go on by themselves
and every key commit again within 60 s. The full profile then SIGSTOPs a partition's leader, then a
follower, each for longer than ``replica.lag.time.max.ms`` (10 s on these nodes): a network
partition of one broker would need privileges this machine does not give, and a paused
broker is what can be had (it neither answers nor fetches nor heartbeats its controller).
Last, a runner is SIGKILLed and started again. The verifier then checks every item once, in
sequence, against the vendor's truth.

Transactions Kafka leaves hanging are aborted as the runbook says (``hanging.py``) and
counted in the result's notes. Full profile: 10 bounces, 2 pauses, the runner SIGKILL; short (CI):
one SIGKILL of the node coordinating a runner's transactions.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from integration.faults.cluster import PrivateCluster
from integration.faults.hanging import Hanging, abort_hanging
from integration.faults.harness import POLLER_NAME, FaultContext, RunnerPool, result
from integration.faults.report import Result
from integration.faults.scenarios.s04_broker import HANGING_AFTER, SKIPPED_MARKERS, topics_of
from integration.faults.vendor import Mutator
from integration.faults.watch import EventWatch
from integration.runners import RunnerProcess

NAME = "cluster-bounces"
RECOVERY_LIMIT = 60.0
FULL_DOWNTIMES = (5, 8, 12, 5, 10, 6, 5, 12, 8, 10)
PAUSE = 15.0  # seconds: past the nodes' replica.lag.time.max.ms (10 s)
SESSION = 10.0  # watukuy's default session: see docs/status.md on shorter ones here


def run(ctx: FaultContext, profile: str) -> Result:
    full = profile == "full"
    cluster = ctx.private_cluster(3)
    sim = ctx.simulator(6 if full else 4, 30)
    pool = ctx.pool(
        "cluster", sim, bootstrap=cluster.bootstrap, session_timeout=SESSION,
        replication_factor=None,
    )  # fmt: skip
    runners = pool.start(2)
    watch = ctx.watch(pool)
    fault = Faults(ctx, cluster, pool, watch, abort_first=full)
    with Mutator(sim, every=0.03):
        downtimes = FULL_DOWNTIMES if full else (5,)
        for index, down in enumerate(downtimes):
            target = TARGETS[index % len(TARGETS)] if full else "coordinator"
            hard = index % 2 == 0
            fault.bounce(f"bounce {index + 1}", target, hard=hard, down=down)
            if fault.problems:
                break
        if full and not fault.problems:
            fault.pause("events leader")
        if full and not fault.problems:
            fault.pause("a follower")
        if full and not fault.problems:
            fault.kill_runner(runners[-1])
    fault.catch_up()
    codes = pool.stop_all()
    fault.problems += [f"{n} exited with {c} at the end" for n, c in codes.items() if c != 0]
    verdict = ctx.verify(pool)
    done = result(
        NAME,
        verdict,
        rounds=len(fault.recoveries),
        recovery_s=max(fault.recoveries.values(), default=None),
        problems=fault.problems,
    )
    done.notes += fault.notes
    done.notes += [f"aborted a hanging transaction as the runbook says: {t}" for t in fault.aborted]
    skipped = cluster.log_lines(SKIPPED_MARKERS)
    done.notes.append(
        f"hanging transactions aborted: {len(fault.aborted)}; the nodes' logs have"
        f" {len(skipped)} line(s) '{SKIPPED_MARKERS} ...'"
    )
    return done


TARGETS = ("events leader", "state leader", "coordinator")


class Faults:
    """The scenario's faults, each followed by the wait for the runners to commit again."""

    def __init__(
        self,
        ctx: FaultContext,
        cluster: PrivateCluster,
        pool: RunnerPool,
        watch: EventWatch,
        *,
        abort_first: bool,
    ) -> None:
        self.ctx, self.cluster, self.pool, self.watch = ctx, cluster, pool, watch
        # Whether each fault starts by aborting what Kafka left hanging (several seconds
        # each; the short profile only does it at the end, if the runners cannot catch up).
        self.abort_first = abort_first
        self.problems: list[str] = []
        self.recoveries: dict[str, float] = {}
        self.aborted: list[Hanging] = []
        self.notes: list[str] = []
        self.keys = [f"{POLLER_NAME}/{t}" for t in pool.simulator.tenants()]

    def node(self, target: str) -> int:
        prefix = self.pool.prefix
        if target == "events leader":
            return self.cluster.leader_of(self.pool.events_topic, 0)
        if target == "state leader":
            return self.cluster.leader_of(f"{prefix}.state", 0)
        if target == "coordinator":
            return self.cluster.coordinator_of(f"{self.pool.group}.r1.")
        leader = self.cluster.leader_of(self.pool.events_topic, 0)
        return next(n for n in self.cluster.node_ids if n != leader)  # a follower

    def bounce(self, what: str, target: str, *, hard: bool, down: float) -> None:
        node = self.node(target)
        how = "SIGKILL" if hard else "controlled shutdown"
        label = f"{what}: {how} of node {node} ({target}), down {down:g}s"
        self._fault(label, lambda: self.cluster.bounce(node, hard=hard, down=down))

    def pause(self, target: str) -> None:
        node = self.node(target)

        label = f"SIGSTOP of node {node} ({target}) for {PAUSE:g}s"

        def paused() -> None:
            self.cluster.pause(node)
            try:
                time.sleep(PAUSE)
            finally:
                self.cluster.resume(node)

        self._fault(label, paused)

    def kill_runner(self, runner: RunnerProcess) -> None:
        def killed() -> None:
            runner.kill()
            runner.start()
            runner.wait_started()

        self._fault(f"SIGKILL of runner {runner.name}, started again", killed)

    def _fault(self, label: str, act: Callable[[], None]) -> None:
        if self.abort_first:
            self.aborted += abort_hanging(self.pool.bootstrap, topics_of(self.pool), HANGING_AFTER)
        self.ctx.wait_event(self.watch, time.monotonic())  # publishing before the fault
        began = time.monotonic()
        act()
        ended = time.monotonic()
        try:  # every key, not just one: a key whose restore stalls must show
            again = max(
                self.ctx.wait_event(self.watch, ended, {key}, timeout=RECOVERY_LIMIT)
                for key in self.keys
            )
            self.pool.wait_sharing(2, timeout=RECOVERY_LIMIT)
        except TimeoutError as exc:
            self.problems.append(f"{label}: {exc}")
            return
        # How well the cluster hid the fault: when every key had committed since it began.
        first = max(self.watch.first_after(began, {key}) or again for key in self.keys)
        self.recoveries[label] = again - ended
        self.notes.append(
            f"{label}: every key committed {first - began:.1f}s after it began (it lasted"
            f" {ended - began:.1f}s), and {again - ended:.1f}s after it ended"
        )
        exited = [r.name for r in self.pool.runners.values() if not r.running]
        if exited:
            self.problems.append(f"{label}: {exited} exited")

    def catch_up(self) -> None:
        for _ in range(3):  # each pass may meet a transaction not idle long enough yet
            try:
                self.ctx.caught_up(self.pool, self.watch, timeout=HANGING_AFTER + 30)
                return
            except TimeoutError:
                found = abort_hanging(self.pool.bootstrap, topics_of(self.pool), HANGING_AFTER)
                if not found:
                    raise
                self.aborted += found
        self.ctx.caught_up(self.pool, self.watch)
