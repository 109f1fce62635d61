"""Rolling upgrade: an instance of the previous release beside one of the current.

The "current" release is this code writing its state values with ``format_version`` one
above the shipped one (``python -m integration.faults.scenarios.s11_upgrade --config F``
runs the runner so); the "previous" release is the runner as shipped. The current instance
runs alone first, so every key's state is one the previous release cannot read. Then a
previous-release instance joins the group, as during a rolling upgrade: the keys it is
assigned must wait (not polled, not written, one log line saying why), it must not crash
with ``StateCorrupted``, and once it leaves (it is being upgraded) those keys go on at the
current instance from exactly where they were. Items change all along; the verifier then
checks every served version has exactly one event, in gap-free sequence. Recovery: from
the previous-release instance's stop to the first event of a key it held.

Short profile: 1 round on 4 tenants; full: 3 rounds on 6 tenants with more items.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from integration.faults.harness import POLLER_NAME, FaultContext, result
from integration.faults.report import Result
from integration.faults.vendor import Mutator
from integration.runners import RunnerProcess, wait_for
from watukuy.store.kafka.partitioner import partition_for

NAME = "rolling-upgrade"
IN_CI = False  # CI runs tests/integration/test_rolling_upgrade.py instead (CI time)
WAITS = "waits for a newer release"


def run(ctx: FaultContext, profile: str) -> Result:
    full = profile == "full"
    tenants, items, rounds, beside = (6, 200, 3, 5.0) if full else (4, 30, 1, 2.0)
    sim = ctx.simulator(tenants, items)
    pool = ctx.pool("upgrade", sim, partitions=4)
    current = pool.add("current")
    current.command = newer_release(current.command)
    current.start()
    current.wait_started()
    pool.wait_sharing(1)
    watch = ctx.watch(pool)
    ctx.caught_up(pool, watch)  # every key now holds state the previous release cannot read
    keys = [f"{POLLER_NAME}/{t}" for t in sim.tenants()]
    problems: list[str] = []
    recoveries: list[float] = []
    with Mutator(sim, every=0.05):
        for round_ in range(rounds):
            previous = pool.runners.get("previous") or pool.add("previous")
            previous.start()
            previous.wait_started()
            held = pool.wait_sharing(2).get(previous.runner_id, set())
            joined = time.monotonic()
            waiting = {k for k in keys if partition_for(k, pool.partitions) in held}
            if waiting:
                wait_for(_says(previous, WAITS), 60, "the keys to wait")
            time.sleep(beside)  # items of the waiting keys change meanwhile
            stopped = time.monotonic()
            problems += _looked_at(previous, waiting, round_)
            # Events of a waiting key while the previous release held it: only from a
            # transaction of the current instance that was already committing (1 s grace).
            early = watch.first_after(joined + 1.0, waiting)
            if early is not None and early < stopped:
                problems.append(f"round {round_ + 1}: a waiting key got an event while held")
            code = previous.stop()
            if code != 0:
                problems.append(f"round {round_ + 1}: the previous release exited with {code}")
            pool.wait_sharing(1)
            if waiting:
                at = ctx.wait_event(watch, stopped, waiting)
                recoveries.append(at - stopped)
    ctx.caught_up(pool, watch)
    codes = pool.stop_all()
    problems += [f"{n} exited with {c} at the end" for n, c in codes.items() if c not in (0, None)]
    with reading_as_newer_release():  # the verifier reads what the current release wrote
        verdict = ctx.verify(pool)
    return result(
        NAME,
        verdict,
        rounds=rounds,
        recovery_s=max(recoveries) if recoveries else None,
        problems=problems,
    )


def _says(runner: RunnerProcess, text: str) -> Callable[[], bool]:
    return lambda: text in runner.since_start()


def _looked_at(previous: RunnerProcess, waiting: set[str], round_: int) -> list[str]:
    """What the previous release's log of this round must and must not say."""
    log = previous.since_start()
    found = []
    if "StateCorrupted" in log or "Traceback" in log:
        found.append(f"round {round_ + 1}: the previous release failed on a newer value")
    if waiting and log.count("not polled here") != 1:
        found.append(f"round {round_ + 1}: not one rate-limited line about the waiting keys")
    if not waiting:
        found.append(f"round {round_ + 1}: the previous release was assigned no key")
    return found


@contextmanager
def reading_as_newer_release() -> Iterator[None]:
    """This process decodes (and encodes) state values as the next release for a while."""
    from watukuy.serde import state

    state.FORMAT_VERSION += 1
    try:
        yield
    finally:
        state.FORMAT_VERSION -= 1


def newer_release(command: list[str]) -> list[str]:
    """The runner ``command`` run as the next release: through this module's ``__main__``."""
    config = command[command.index("--config") :]
    return [sys.executable, "-m", "integration.faults.scenarios.s11_upgrade", *config]


def main() -> int:
    """``watukuy.cli`` as a release whose state values carry the next ``format_version``."""
    from watukuy import cli
    from watukuy.serde import state

    state.FORMAT_VERSION += 1
    return cli.main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
