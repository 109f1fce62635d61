"""A static member of a runners' group in a process of its own, for the liveness tests:
``python -m tests.integration.static_member BOOTSTRAP GROUP TOPIC INSTANCE SESSION die|live``.

It prints ``assigned [..]`` for each assignment. With ``die`` it ends the process at once when
asked to revoke anything (before the cooperative protocol's second round: a crash between a
rebalance's two phases); with ``live`` it stays in the group until killed.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from confluent_kafka import Consumer


def main(bootstrap: str, group: str, topic: str, instance: str, session: str, mode: str) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.instance.id": instance,
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": int(float(session) * 1000),
            "heartbeat.interval.ms": 500,
            "enable.auto.commit": False,
        }
    )

    def assigned(member: Any, partitions: list[Any]) -> None:
        member.incremental_assign(partitions)
        print("assigned", sorted(p.partition for p in partitions), flush=True)

    def revoked(member: Any, partitions: list[Any]) -> None:
        if mode == "die":
            os._exit(0)  # no unassign, no rejoin: as a SIGKILL between the two phases
        member.incremental_unassign(partitions)

    consumer.subscribe([topic], on_assign=assigned, on_revoke=revoked)
    while True:
        consumer.poll(0.1)


if __name__ == "__main__":
    main(*sys.argv[1:7])
