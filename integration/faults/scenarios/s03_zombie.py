"""Zombies: a runner frozen past its session and transaction timeouts, and two processes
started with one ``runner.id``.

1. SIGSTOP a runner while its transactions are held open (``--hold-transaction``); the other
   one takes its keys once the session ends, after the broker aborted the frozen transaction.
   SIGCONT it well past both timeouts: whatever it still tries to commit is fenced, none of its
   writes become visible (the verifier sees every version and sequence number once), and it
   rejoins the group and shares the keys again. Full profile: 10 times; short: once.
2. Start a second process with the first runner's ``runner.id``. The two fence each other's
   group consumer (static membership): the older one must say so in one log line and stop,
   the newer one go on holding every key, with no endless fencing loop.
"""

from __future__ import annotations

import time
from typing import Any

from integration.faults.harness import POLLER_NAME, FaultContext, RunnerPool, result
from integration.faults.report import Result
from integration.faults.vendor import Mutator
from integration.runners import wait_for
from watukuy.store.kafka.partitioner import partition_for

NAME = "zombie"
IN_CI = False  # CI runs tests/integration/test_failover.py's zombie test instead (CI time)
SESSION = 3.0  # runner.session.timeout, which is also the transaction timeout
HOLD = ["--hold-transaction", "0.3"]
DIAGNOSIS = "another instance is running with this runner.id"  # the runner's words
FENCING = ("fenced", "rejoining")  # what a fencing round writes to a runner's log


def run(ctx: FaultContext, profile: str) -> Result:
    full = profile == "full"
    rounds = 10 if full else 1
    sim = ctx.simulator(3, 30)
    pool = ctx.pool("zombie", sim, session_timeout=SESSION)
    runners = pool.start(2, faults=HOLD)
    watch = ctx.watch(pool)
    keys = [f"{POLLER_NAME}/{t}" for t in sim.tenants()]
    problems: list[str] = []
    recoveries: list[float] = []
    with Mutator(sim, every=0.03):
        for round_ in range(rounds):
            zombie, survivor = runners[round_ % 2], runners[(round_ + 1) % 2]
            held = pool.held().get(zombie.name, set())
            moved = {k for k in keys if partition_for(k, pool.partitions) in held}
            frozen_at = time.monotonic()
            zombie.pause()
            pool.wait_sharing(1)
            taken_at = time.monotonic()  # an event of a moved key after this is the survivor's
            recoveries.append(ctx.wait_event(watch, taken_at, moved or None) - frozen_at)
            # Past the session and the transaction timeout, with room for the broker's abort.
            time.sleep(max(0.0, frozen_at + 2 * SESSION + 1 - time.monotonic()))
            zombie.resume()
            pool.wait_sharing(2)
            if not zombie.running:
                problems.append(f"round {round_ + 1}: the zombie {zombie.name} exited")
                zombie.start().wait_started()
            del survivor
        found, stopped = twins(pool)
        problems += found
    ctx.caught_up(pool, watch)
    codes = pool.stop_all()
    problems += [
        f"{n} exited with {c} at the end" for n, c in codes.items() if c != 0 and n != stopped
    ]
    verdict = ctx.verify(pool)
    return result(
        NAME,
        verdict,
        rounds=rounds,
        recovery_s=max(recoveries) if recoveries else None,
        problems=problems,
    )


def twins(pool: RunnerPool) -> tuple[list[str], str | None]:
    """A second process as ``r1``: one of the two stops saying why, the other holds on.
    The problems, and which of the two stopped."""
    first = pool.runners["r1"]
    # On a host of its own (another state directory): on one host the local state store's lock
    # stops the second process at once, before it reaches the group.
    elsewhere: dict[str, Any] = {"state.dir": str(pool.workdir / "state-twin")}
    twin = pool.add("r1-twin", runner_id="r1", faults=HOLD, **elsewhere).start()
    try:
        wait_for(lambda: not (first.running and twin.running), 60, "one of the twins to stop")
    except TimeoutError:
        return ["two instances with one runner.id both kept running for 60 s"], None
    stopped, kept = (first, twin) if not first.running else (twin, first)
    problems = []
    code = stopped.wait(5)
    lines = [line for line in stopped.since_start().splitlines() if DIAGNOSIS in line]
    # A log record says it, and the exit line (``watukuy-source: ...``) repeats it for the
    # shell; one that died while starting has only the exit line.
    records = [line for line in lines if not line.startswith("watukuy-source:")]
    if not lines or len(records) > 1:
        problems.append(f"the stopped twin said {DIAGNOSIS!r} in {len(records)} log lines")
    if code in (0, None):
        problems.append(f"the stopped twin exited with {code}")
    kept.wait_started()
    pool.wait_sharing(2)  # r2 and the twin that went on
    time.sleep(SESSION)  # the fencing the other's last moments caused is over by now
    before = fencing(kept.since_start())
    time.sleep(2 * SESSION)
    if fencing(kept.since_start()) != before:
        problems.append(f"{kept.name} is still being fenced after the other stopped")
    if not kept.running:
        problems.append(f"{kept.name} stopped too")
    return problems, stopped.name


def fencing(log: str) -> int:
    return sum(1 for line in log.splitlines() if any(word in line for word in FENCING))
