"""What waits in ``run()`` holds up nothing else: a poll waiting for a budget's token gives
its turn of ``runner.max.concurrency`` to other keys, ends when its key moves away, and is a
``rate_limited`` outcome if its fetch times out meanwhile or an operation wants its key; a
command for a key whose poll is under way leaves the other keys' polls going.

Per-tenant budgets exist so that one tenant's quota does not slow the others; a poll that
waited for its tenant's token while holding its turn let a throttled tenant with more keys
than the instance has turns stop every other tenant's polls until its tokens came. The
engine runs on the real clock: the waits are real.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.engine.support import Env, running_in_background, wait_for
from tests.engine.test_budget_sharing import SharedStore, only
from tests.engine.test_wake import Inbox
from watukuy import SystemClock
from watukuy.core.commands import Command
from watukuy.core.observe import Observer
from watukuy.core.poller import Partition
from watukuy.engine.turns import Turn, Turns

pytestmark = pytest.mark.unit


class Polled(Observer):
    def __init__(self) -> None:
        self.keys: list[str] = []
        self.kinds: list[str] = []

    def poll_decided(
        self, poller: str, partition: str, lane: str, kind: object, seconds: float
    ) -> None:
        self.keys.append(f"{poller}/{partition}")
        self.kinds.append(str(kind))


async def test_a_tenant_waiting_for_its_bucket_leaves_the_turns_to_the_others(env: Env) -> None:
    slow, fast = env.tenants[0].id, env.tenants[1].id

    def rate(partition: Partition) -> str:
        return "1/h" if partition.key == slow else "100/s"

    # Three pollers over both tenants, two turns: the slow tenant's first key spends its one
    # token, its other two wait an hour for the next.
    pollers = [
        env.make_poller(name=name, partitions=only(env, 0, 1), budget="vendor", limit=50)
        for name in ("a", "b", "c")
    ]
    polled = Polled()
    engine = env.make_engine(
        *pollers,
        budgets={"vendor": {"rate": rate, "burst": 1, "per": "tenant"}},
        clock=SystemClock(),
        max_concurrency=2,
        stop_grace=0.2,
        observers=[polled],
    )
    async with engine, running_in_background(engine):
        await wait_for(lambda: sum(key.endswith(fast) for key in polled.keys) == 3, 10.0)
    assert sorted(key for key in polled.keys if key.endswith(fast)) == [
        f"{name}/{fast}" for name in ("a", "b", "c")
    ]
    assert sum(key.endswith(slow) for key in polled.keys) == 1  # the bucket held: one token


# -- the turn itself ---------------------------------------------------------------------------


async def aside_until(turn: Turn, token: asyncio.Event) -> None:
    """A request of ``turn``'s poll waiting for ``token`` (a budget's), its turn set aside."""
    async with turn.set_aside():
        await token.wait()


async def test_a_turn_set_aside_goes_to_another_poll_and_comes_back_after_the_wait() -> None:
    turns = Turns(1)
    first, second = turns.turn(), turns.turn()
    await first.take()
    token = asyncio.Event()
    waiting = asyncio.create_task(aside_until(first, token))
    await asyncio.wait_for(second.take(), 1.0)  # the only turn, set aside by the wait
    assert not first.held
    token.set()
    await asyncio.sleep(0.01)
    assert not waiting.done()  # the token came: it waits for a turn again
    second.give_back()
    await asyncio.wait_for(waiting, 1.0)
    assert first.held


async def test_a_polls_waits_at_once_set_one_turn_aside_and_take_one_back() -> None:
    turns = Turns(2)
    poll, other = turns.turn(), turns.turn()
    await poll.take()
    tokens = [asyncio.Event(), asyncio.Event()]
    waits = [asyncio.create_task(aside_until(poll, token)) for token in tokens]
    await asyncio.sleep(0)
    tokens[0].set()
    await asyncio.wait_for(waits[0], 1.0)
    assert not poll.held  # another request of the poll still waits
    tokens[1].set()
    await asyncio.wait_for(waits[1], 1.0)
    assert poll.held
    await asyncio.wait_for(other.take(), 1.0)  # the second turn was never taken twice
    assert await turns_free(turns) == 0


async def test_a_wait_cut_off_or_outlived_by_its_poll_takes_no_turn_back() -> None:
    turns = Turns(1)
    poll = turns.turn()
    await poll.take()

    cut_off = asyncio.create_task(aside_until(poll, asyncio.Event()))
    await asyncio.sleep(0)
    cut_off.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cut_off
    assert not poll.held and await turns_free(turns) == 1

    await poll.take()
    token = asyncio.Event()
    outlived = asyncio.create_task(aside_until(poll, token))
    await asyncio.sleep(0)
    poll.give_back()  # the lane's last page was sent meanwhile: the poll is done with it
    token.set()
    await asyncio.wait_for(outlived, 1.0)
    assert not poll.held and await turns_free(turns) == 1


async def turns_free(turns: Turns) -> int:
    """Turns nobody holds: taken one by one until one does not come at once, then given
    back."""
    taken: list[Turn] = []
    while True:
        turn = turns.turn()
        try:
            await asyncio.wait_for(turn.take(), 0.05)
        except TimeoutError:
            break
        taken.append(turn)
    for turn in taken:
        turn.give_back()
    return len(taken)


# -- a key let go while its poll waits for a token ---------------------------------------------


async def test_a_poll_of_a_key_let_go_while_it_waits_for_a_token_ends_then(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    # Two pollers over one tenant, one token an hour: the second key's poll waits. The tenant
    # moves to another instance: this one's share of its bucket is 0, a rate at which no
    # token ever comes, and the poll waited on for a key no longer held. Its runner's stop
    # then waited for it (a SIGTERM just after a rebalance hung until the grace's cancel),
    # and the key, given back, was not polled while the old poll waited.
    store = SharedStore({env.tid(0)})
    polled = Polled()
    pollers = [
        env.make_poller(name=name, partitions=only(env, 0), budget="vendor", limit=50)
        for name in ("a", "b")
    ]
    engine = env.make_engine(
        *pollers,
        store=store,
        budgets={"vendor": {"rate": "1/h", "burst": 1, "per": "tenant"}},
        clock=SystemClock(),
        stop_grace=30.0,
        observers=[polled],
    )
    loop = asyncio.get_running_loop()
    async with engine:
        running = asyncio.create_task(engine.run())
        await wait_for(lambda: len(polled.keys) == 1, 5.0)
        await asyncio.sleep(0.2)  # the other key's poll waits for the next token
        store.hand_over(())
        await asyncio.sleep(0.5)
        asked = loop.time()
        await engine.stop()
        await asyncio.wait_for(running, timeout=35)
        took = loop.time() - asked
    assert took < 1.0, took
    assert "still waiting" not in caplog.text


# -- a fetch timed out while it waited for a token -----------------------------------------


async def test_a_fetch_timed_out_waiting_for_a_budgets_token_is_pacing_not_a_vendor_timeout(
    env: Env,
) -> None:
    # One token an hour and a fetch timeout of 0.2 s: every poll after the first runs out of
    # time before its request is sent. That is this runner's own pacing: it was reported as
    # the vendor timing out ("fetch timed out after ..."), counted against the key's circuit,
    # which opened after five and backed the key off, for a vendor that never saw a request.
    polled = Polled()
    poller = env.make_poller(
        partitions=only(env, 0), budget="vendor", limit=50, fetch_timeout="200ms",
        schedule={"min": "100ms", "max": "100ms"},
    )  # fmt: skip
    engine = env.make_engine(
        poller,
        budgets={"vendor": {"rate": "1/h", "burst": 1}},
        clock=SystemClock(),
        stop_grace=0.3,
        observers=[polled],
    )
    async with engine:
        async with running_in_background(engine):
            await wait_for(lambda: len(polled.keys) >= 6, 10.0)
        (shown,) = engine.inspect()  # once stopped
    assert shown.circuit == "closed"
    assert shown.last_error is not None and "budget" in shown.last_error
    assert "rate_limited" in polled.kinds and "timeout" not in polled.kinds


# -- a command for a key whose poll waits --------------------------------------------------------


async def test_a_command_waiting_for_a_keys_poll_does_not_stop_the_other_keys_polls(
    env: Env,
) -> None:
    # A pause sent (over REST, to the key's owner) for a key whose poll waits for its token:
    # the command waits for the poll to end (up to its fetch timeout, 30 s here). run()
    # applied it in its own loop, so no other key's poll started meanwhile.
    polled, store = Polled(), Inbox()
    throttled = env.make_poller(
        name="a", partitions=only(env, 0, 1), budget="vendor", limit=50, fetch_timeout="30s"
    )
    free = env.make_poller(
        name="b", partitions=only(env, 2), limit=50, schedule={"min": "200ms", "max": "200ms"}
    )
    engine = env.make_engine(
        throttled,
        free,
        store=store,
        budgets={"vendor": {"rate": "1/h", "burst": 1}},
        clock=SystemClock(),
        stop_grace=0.3,
        observers=[polled],
    )
    async with engine, running_in_background(engine):
        await wait_for(lambda: any(key.startswith("a/") for key in polled.keys), 5.0)
        await asyncio.sleep(0.5)  # the other key of "a" waits for the next token
        first = next(key for key in polled.keys if key.startswith("a/"))
        waiting = env.tid(1) if first.endswith(env.tid(0)) else env.tid(0)
        await store.send_command(Command.issue("pause", "a", waiting, {}, time.time()))
        before = polled.keys.count(f"b/{env.tid(2)}")
        await asyncio.sleep(2.0)
        after = polled.keys.count(f"b/{env.tid(2)}")
    assert after - before >= 5  # every 200 ms, as if no command had come


async def test_an_operation_on_a_key_waiting_for_its_token_applies_at_once(env: Env) -> None:
    # A pause for a key whose poll waits for its tenant's token (an hour away) waited for that
    # fetch to time out (60 s by default) before it applied. The wait gives way: the poll
    # ends as paced (rate_limited, no circuit count) and the operation takes the key.
    polled = Polled()
    poller = env.make_poller(
        partitions=only(env, 0, 1), budget="vendor", limit=50, fetch_timeout="60s"
    )
    engine = env.make_engine(
        poller,
        budgets={"vendor": {"rate": "1/h", "burst": 1}},
        clock=SystemClock(),
        stop_grace=0.3,
        observers=[polled],
    )
    loop = asyncio.get_running_loop()
    async with engine, running_in_background(engine):
        await wait_for(lambda: len(polled.keys) == 1, 5.0)
        await asyncio.sleep(0.3)  # the other key's poll waits for the next token
        waiting = env.tid(1) if polled.keys[0].endswith(env.tid(0)) else env.tid(0)
        asked = loop.time()
        await asyncio.wait_for(engine.pause("invoices", partition=waiting), 5.0)
        took = loop.time() - asked
        shown = {i.partition: i for i in engine.inspect()}[waiting]
    assert took < 1.0, took
    assert shown.paused and shown.circuit == "closed"
    assert polled.kinds[1:] == ["rate_limited"]  # the poll that gave way: paced, not failed
