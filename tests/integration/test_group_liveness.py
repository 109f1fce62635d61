"""The liveness guard's remedies on the real broker: a partition the group assigns to no member.

A static member holding everything dies between the two phases of the cooperative rebalance a
joining runner starts (told to give a partition up, it never rejoins) and comes back within its
session: the coordinator hands it its old assignment without a rebalance, and the partition it
gave up is assigned to no member of a stable group, for good. The runner's guard rejoins as a
dynamic member, which starts the rebalance that assigns it (``watukuy.core.ownership.remedy``).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from confluent_kafka.admin import AdminClient

from tests.integration.kafka_support import delete_prefix, unique_prefix, wait_owned
from tests.integration.test_kafka_faults import PARTITIONS, POLLER, Store
from watukuy.core.ownership import GroupView
from watukuy.store.kafka.topics import TopicLayout, ensure_topics

REPO = Path(__file__).resolve().parents[2]


def _static_member(bootstrap: str, layout: TopicLayout, mode: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "tests.integration.static_member", bootstrap]
    command += [f"{layout.prefix}.runners", layout.state, "other-runner", "6", mode]
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=REPO)


async def test_a_partition_withheld_for_a_crashed_static_members_second_round_is_assigned(
    kafka_bootstrap: str,
) -> None:
    # A static member holding everything dies between the two phases of the rebalance a
    # joining runner starts (it was told to give partition 0 up, and never rejoined), and
    # comes back within its session: the coordinator hands it its old assignment without a
    # rebalance, and partition 0 is assigned to no member, in a stable group, for good. A
    # static runner's new consumer gets its old (empty) assignment back too; joining as a
    # dynamic member starts the rebalance that assigns it.
    prefix = unique_prefix()
    layout = TopicLayout(prefix, PARTITIONS, 1)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    await asyncio.to_thread(ensure_topics, admin, layout, [(POLLER.name, None)])
    first = _static_member(kafka_bootstrap, layout, "die")
    members = [first]
    runner = Store(kafka_bootstrap, prefix, [], runner_id="r2")
    try:
        assert first.stdout is not None
        line = await asyncio.to_thread(first.stdout.readline)
        assert line.strip() == "assigned [0, 1]"
        await runner.store.start()
        await asyncio.wait_for(asyncio.to_thread(first.wait), 30)  # it died revoking
        members.append(_static_member(kafka_bootstrap, layout, "live"))
        member = runner.store.member

        async def view() -> GroupView:
            while True:
                seen = await asyncio.to_thread(member.view)
                if seen is not None and seen.stable and seen.given == {1}:
                    return seen
                await asyncio.sleep(0.5)

        # 60 s: under CI's load the second member's start and the group's two rounds once took
        # all of 30 s, the stuck view arriving just as the wait ended.
        async with asyncio.timeout(60):
            stuck = await view()
        await asyncio.sleep(7.0)  # longer than a session: nothing moves by itself
        assert (await view()).mine == stuck.mine == frozenset()
        assert runner.store.owned_kafka_partitions() == []
        member.rejoin()  # as a static member: its old, empty, assignment back at once
        await asyncio.sleep(4.0)
        assert runner.store.owned_kafka_partitions() == []
        member.rejoin(rebalance=True)
        await wait_owned(runner.store, 1)
        assert runner.store.owned_kafka_partitions() == [0]
    finally:
        for made in members:
            made.kill()
            made.wait(10)
        await runner.store.close()
        await asyncio.to_thread(delete_prefix, kafka_bootstrap, prefix)
