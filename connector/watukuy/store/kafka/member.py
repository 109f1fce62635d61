"""This runner as a member of the runners' group, as the liveness guard sees it
(:mod:`watukuy.control.ownership`): what the group coordinator assigns it, and the remedy when
that is not what it holds.

The coordinator's view is asked for with an admin DescribeGroups request, not read from the
group consumer: the guard exists for the case where the consumer and the runner disagree, so
the consumer's own ``assignment()`` is not the witness to ask.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from confluent_kafka import KafkaException

from watukuy.store.kafka import clients
from watukuy.store.kafka.settings import KafkaSettings

__all__ = ["GroupMember"]

log = logging.getLogger("watukuy.kafka")


class _Joined(Protocol):
    def member_id(self) -> str | None: ...

    def replace_member(self) -> None: ...


class GroupMember:
    """``joined``: the store's Kafka thread, which knows this instance's member id and joins
    again on request."""

    def __init__(self, settings: KafkaSettings, joined: _Joined, *, timeout: float = 10.0):
        self._settings = settings
        self._joined = joined
        self._timeout = timeout
        self._admin: Any = None  # made on first use: most runners never need it
        self._told = ""

    def assigned(self) -> set[int] | None:
        """Blocking: the Kafka partitions of ``<prefix>.state`` that the group coordinator
        assigns this instance now (empty: it does not know this instance as a member);
        ``None`` when the cluster did not answer."""
        settings = self._settings
        if self._admin is None:
            self._admin = clients.admin_client(settings.kafka)
        try:
            futures = self._admin.describe_consumer_groups(
                [settings.group], request_timeout=self._timeout
            )
            described = futures[settings.group].result()
        except KafkaException as exc:
            log.info("describing group %s: %s", settings.group, exc.args[0])
            return None
        finally:
            clients.drain_logs(self._admin)
        member_id = self._joined.member_id()
        static_id = settings.runner_id if settings.static_membership else None
        mine: set[int] = set()
        view = []
        for member in described.members:
            assignment = member.assignment
            held = sorted(
                tp.partition
                for tp in (assignment.topic_partitions if assignment is not None else ())
                if tp.topic == settings.layout.state
            )
            ours = member.member_id == member_id or (
                static_id is not None and member.group_instance_id == static_id
            )
            if ours:
                mine = set(held)
            view.append(
                f"{member.client_id}@{member.host}{' (this runner)' if ours else ''}: {held}"
            )
        self._tell(
            f"group {settings.group} ({described.state}): " + "; ".join(view or ["no members"])
        )
        return mine

    def _tell(self, view: str) -> None:
        """The coordinator's view, logged when it changes: who it says holds what, beside
        the runners' own claims, is what an operator needs when partitions are unowned."""
        if view != self._told:
            self._told = view
            log.info("the coordinator says: %s", view)

    def rejoin(self) -> None:
        """Join the group again with a new consumer: every partition the coordinator gives
        back is assigned and restored afresh."""
        self._joined.replace_member()
