"""``run()`` starts the keys that come due close together in one pass (``GATHER``): keys spread
evenly over their interval would otherwise each cost a pass of the loop and a request of their
own, at about twice the CPU per idle poll."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from watukuy import Engine, MemoryStore, define_poller
from watukuy.core.schedule import KeySchedule
from watukuy.core.state import LaneState, PartitionState
from watukuy.engine.engine import GATHER

KEYS = 20
INTERVAL = 1.0
RUN = 3.0


def _bursts(starts: list[float], apart: float = 0.02) -> list[list[float]]:
    """``starts`` in groups: a start more than ``apart`` after the one before begins a group."""
    groups: list[list[float]] = []
    for at in sorted(starts):
        if groups and at - groups[-1][-1] <= apart:
            groups[-1].append(at)
        else:
            groups.append([at])
    return groups


async def test_keys_due_within_a_gather_start_together_and_at_most_a_gather_late() -> None:
    started: list[tuple[float, float]] = []  # (when the poll began, when the key was due)
    due: dict[str, float] = {}

    async def fetch(ctx: Any) -> dict[str, Any]:
        key = ctx.partition.key
        now = time.time()
        started.append((now, due[key]))
        due[key] += INTERVAL
        # Answers trickle in across the gather, as a vendor's do: each ends a poll of its own.
        await asyncio.sleep(0.01 + 0.01 * (int(key[1:]) % 10))
        return {"items": [], "cursor": None}

    keys = [f"t{i:02d}" for i in range(KEYS)]
    poller = define_poller(
        name="spread",
        partitions=lambda: [{"key": key} for key in keys],
        identity=lambda item: item["id"],
        cursor={"strategy": "token", "initial": None},
        fetch=fetch,
        schedule={"min": f"{INTERVAL}s", "max": f"{INTERVAL}s"},
    )
    store = MemoryStore()
    first = time.time() + 0.3
    for index, key in enumerate(keys):  # due evenly across one interval, as keys settle
        due[key] = first + index * INTERVAL / KEYS
        schedule = KeySchedule(INTERVAL, due[key])
        store.states[f"spread/{key}"] = PartitionState("spread", key, LaneState(), schedule)

    engine = Engine([poller], store=store)
    async with engine:
        running = asyncio.create_task(engine.run())
        await asyncio.sleep(0.3 + RUN)
        await engine.stop()
        await asyncio.wait_for(running, timeout=5)

    polls = [at for at, _ in started]
    assert len(polls) >= KEYS * (RUN - 0.5) / INTERVAL  # every key polled on its schedule
    # One pass per GATHER at most (a pass per key due would be KEYS / INTERVAL a second).
    assert len(_bursts(polls)) <= (0.3 + RUN) / GATHER + 2
    assert max(at - was_due for at, was_due in started) < GATHER + 0.5
