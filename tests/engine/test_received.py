"""Commands applied off ``run()``'s loop (:class:`watukuy.engine.received.Received`) still
apply in the order they came for each key, and one key's wait holds no other key's."""

from __future__ import annotations

import asyncio

import pytest

from watukuy.core.commands import Command
from watukuy.engine.received import COMMAND_RETRY, Received
from watukuy.engine.roster import KeyNotActive

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


async def test_a_command_tried_again_keeps_its_key_s_later_commands_behind_it() -> None:
    """A command whose key is not held yet is tried again a second later; the key's later
    commands, of the same pass or of passes after, wait behind it and apply after it, in
    the order they came, none lost and none first (a ``resume`` overtaken by the ``pause``
    before it would leave the key paused)."""
    applied: list[str] = []
    held = False  # the key comes to this instance a moment after its first command

    async def apply(given: Command) -> None:
        if given.partition == "early" and not held:
            raise KeyNotActive(f"{given.partition} is not held here yet")
        applied.append(f"{given.op} {given.partition}")

    received = Received(apply)
    due = received.due([command("pause", "early"), command("trigger", "early")], 1.0)
    await received.apply(due, 1.0)
    assert applied == []
    due = received.due([command("resume", "early"), command("trigger", "other")], 1.5)
    assert [c.op for _, c in due] == ["trigger"]  # the key's resume waits behind its pause
    await received.apply(due, 1.5)
    held = True
    due = received.due([], 1.0 + COMMAND_RETRY)
    await received.apply(due, 1.0 + COMMAND_RETRY)
    assert applied == ["trigger other", "pause early", "trigger early", "resume early"]
    assert received.due([], 10.0) == []


async def test_a_command_held_back_while_its_key_s_command_applies_stays_behind_its_retry() -> None:
    """A ``resume`` held back while the key's ``pause`` applies, and that ``pause`` then tried
    again (the key not held yet): the ``pause`` applies first, then the ``resume``."""
    applied: list[str] = []
    answered = asyncio.Event()
    held = False

    async def apply(given: Command) -> None:
        if given.op == "pause":
            await answered.wait()
            if not held:
                raise KeyNotActive(f"{given.partition} is not held here yet")
        applied.append(given.op)

    received = Received(apply)
    first = asyncio.create_task(received.apply(received.due([command("pause", "k")], 1.0), 1.0))
    await asyncio.sleep(0)
    assert received.due([command("resume", "k")], 1.2) == []
    answered.set()
    await first
    held = True
    for now in (1.0 + COMMAND_RETRY, 1.0 + 2 * COMMAND_RETRY):
        await received.apply(received.due([], now), now)
    assert applied == ["pause", "resume"]
