"""What a Kafka store is configured with: one frozen value shared by the store and its thread."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from watukuy.store.kafka.topics import TopicLayout


@dataclass(frozen=True, slots=True)
class KafkaSettings:
    kafka: Mapping[str, Any]
    layout: TopicLayout
    runner_id: str
    group_id: str | None = None
    commit_interval: float = 0.1
    session_timeout: float = 10.0
    transaction_timeout: float = 10.0
    startup_timeout: float = 15.0  # to reach the cluster and check the topics at start
    static_membership: bool = True
    use_group: bool = True  # False: the CLI, which holds partitions without a group
    registry_url: str | None = None  # Confluent wire format through this registry; else
    registry_auth: str | None = None  # single-object encoding and the schemas topic
    # Handlers and subscribers read each poller's events in the group
    # ``<handlers_group>.<poller>``; by default ``<group>.handlers.<poller>``.
    handlers_group: str | None = None
    # The local state store's root (``runner.state.dir``); ``None``: state in memory only.
    state_dir: str | None = None
    # Partitions of other runners kept warm in the local state store (see .standby_rule).
    standby_replicas: int = 1

    @property
    def group(self) -> str:
        return self.group_id or f"{self.layout.prefix}.runners"

    def handlers_group_of(self, poller: str) -> str:
        return f"{self.handlers_group or self.group + '.handlers'}.{poller}"
