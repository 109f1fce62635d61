"""Broker outages: the broker SIGKILLed or shut down cleanly, down 5-30 s, then started again
on the same ports and data; the runners must recover by themselves (no restart, no operator)
and commit again within 60 s of the broker's return.

After a SIGKILL, Kafka 4.4's single node restarts through a window of about ten seconds in
which its controller refuses the broker's registration (DUPLICATE_BROKER_REGISTRATION) while
its transaction coordinator already completes transactions; when the old registration is
fenced, the coordinator skips the markers of the partitions that lost their leader ("likely
deleted already") and records the transaction as done. Those partitions keep a hanging
transaction that nothing in a client can end, so the scenario does what the runbook tells an
operator (``integration/faults/hanging.py``): it aborts a transaction idle far longer than any
may stay open, and lists each abort in the result's notes. If the coordinator was committing,
the abort drops that partition's share of a committed transaction: on the state and items
partitions, the keys' restore rolls them forward over the events they had published
(``watukuy.store.kafka.catchup_rule``), and the verifier checks that none is published twice.

The scenario runs its own broker (a directory and ports of its own, ``PrivateBroker``), never
the shared one in ``.watukuy/broker`` that other tests use. Full profile: 10 outages,
alternating SIGKILL and clean shutdown, down 5 to 30 s. Short (CI): one clean shutdown, 5 s
down: a SIGKILL there would make CI fail, now and then, on the broker's defect above.
"""

from __future__ import annotations

import time

from integration.faults.hanging import Hanging, abort_hanging
from integration.faults.harness import FaultContext, RunnerPool, result
from integration.faults.report import Result
from integration.faults.vendor import Mutator
from integration.faults.verify import settle_transactions

NAME = "broker-outage"
RECOVERY_LIMIT = 60.0
FULL_DOWNTIMES = (5, 12, 20, 5, 30, 8, 5, 15, 10, 25)
SKIPPED_MARKERS = "Couldn't find leader endpoint for partitions"
ROLLED_FORWARD = "its stored state missed"  # the runner's warning (see KafkaStore._catch_up)
HANGING_AFTER = 30.0  # seconds a transaction's producer is idle before it is called hanging


def run(ctx: FaultContext, profile: str) -> Result:
    downtimes = FULL_DOWNTIMES if profile == "full" else (5,)
    broker = ctx.private_broker()
    sim = ctx.simulator(3, 30)
    pool = ctx.pool("broker", sim, bootstrap=broker.bootstrap)
    runners = pool.start(2)
    watch = ctx.watch(pool)
    problems: list[str] = []
    recoveries: list[float] = []
    aborted: list[Hanging] = []
    with Mutator(sim, every=0.03):
        for index, down in enumerate(downtimes):
            aborted += abort_hanging(pool.bootstrap, topics_of(pool), HANGING_AFTER)
            ctx.wait_event(watch, time.monotonic())  # running normally before the outage
            how = "SIGKILL" if profile == "full" and index % 2 == 0 else "clean shutdown"
            if how == "SIGKILL":
                broker.kill()
            else:
                broker.stop()
            time.sleep(down)
            broker.restart()
            back_at = time.monotonic()
            try:
                at = ctx.wait_event(watch, back_at, timeout=RECOVERY_LIMIT)
                recoveries.append(at - back_at)
                pool.wait_sharing(len(runners), timeout=RECOVERY_LIMIT)
            except TimeoutError as exc:
                problems.append(f"outage {index + 1} ({how}, {down} s): {exc}")
                ctx.dump_stacks()
                hanging = settle_transactions(pool.bootstrap, topics_of(pool), 0)
                (ctx.workdir / f"hanging-{index + 1}.txt").write_text(f"{hanging}\n")
                break  # the next outage would only pile onto this one
            exited = [r.name for r in runners if not r.running]
            if exited:
                problems.append(f"outage {index + 1} ({how}, {down} s): {exited} exited")
                break
    for _ in range(3):  # each pass may meet a transaction that was not idle long enough yet
        try:
            ctx.caught_up(pool, watch, timeout=HANGING_AFTER + 30)
            break
        except TimeoutError:
            found = abort_hanging(pool.bootstrap, topics_of(pool), HANGING_AFTER)
            if not found:
                raise
            aborted += found
    else:
        ctx.caught_up(pool, watch)
    codes = pool.stop_all()
    problems += [f"{n} exited with {c} at the end" for n, c in codes.items() if c != 0]
    verdict = ctx.verify(pool)
    done = result(
        NAME,
        verdict,
        rounds=len(downtimes),
        recovery_s=max(recoveries) if recoveries else None,
        problems=problems,
    )
    done.notes += [
        f"aborted a hanging transaction as the runbook says (Kafka left it after a restart): {t}"
        for t in aborted
    ]
    rolled = [
        line.split(" watukuy.kafka: ", 1)[-1]
        for runner in pool.runners.values()
        for line in runner.output().splitlines()
        if ROLLED_FORWARD in line
    ]
    done.notes += [f"a restore rolled a key forward: {line}" for line in rolled]
    skipped = broker.log_lines(SKIPPED_MARKERS)
    if aborted or skipped:
        done.notes.append(
            f"the broker's log has {len(skipped)} line(s) '{SKIPPED_MARKERS} ...', the coordinator"
            " completing a transaction without the markers of partitions it had no leader for"
        )
    return done


def topics_of(pool: RunnerPool) -> list[str]:
    """The topics the runners write in transactions."""
    return [f"{pool.prefix}.{t}" for t in ("state", "items", "parked", "events.invoices")]
