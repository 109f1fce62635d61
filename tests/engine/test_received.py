"""Commands applied off ``run()``'s loop (:class:`watukuy.engine.received.Received`) still
apply in the order they came for each key, and one key's wait holds no other key's."""

from __future__ import annotations

import asyncio

import pytest

from watukuy.core.commands import Command
from watukuy.engine.received import Received

pytestmark = pytest.mark.unit


def command(op: str, partition: str) -> Command:
    return Command.issue(op, "invoices", partition, {}, 0.0)


async def test_a_keys_commands_apply_in_order_across_passes_while_others_go_on() -> None:
    applied: list[str] = []
    held = asyncio.Event()  # the key's poll, holding its lock

    async def apply(given: Command) -> None:
        if given.partition == "busy" and not held.is_set():
            await held.wait()
        applied.append(f"{given.op} {given.partition}")

    woken: list[bool] = []
    received = Received(apply, lambda: woken.append(True))
    first = asyncio.create_task(received.apply(received.due([command("pause", "busy")], 1.0), 1.0))
    await asyncio.sleep(0)
    # The next pass: the busy key's next command waits for the pass after its first is done;
    # another key's applies now.
    due = received.due([command("resume", "busy"), command("trigger", "idle")], 2.0)
    assert [c.op for _, c in due] == ["trigger"]
    await received.apply(due, 2.0)
    assert applied == ["trigger idle"]

    assert woken == []  # nothing the trigger's end lets through
    held.set()
    await first
    assert woken == [True]  # the held-back resume may apply: run() passes again at once
    due = received.due([], 3.0)
    assert [c.op for _, c in due] == ["resume"]
    await received.apply(due, 3.0)
    assert applied == ["trigger idle", "pause busy", "resume busy"]
