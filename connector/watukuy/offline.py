"""``reset`` and ``replay`` from the command line, with runners alive or not.

With runners alive (the group has members, checked through the admin client), the operation
is written as a command record for the key's owner, as REST does: the owner applies it and
tombstones it in one transaction, wherever the key moves meanwhile. With no runner alive, the
CLI takes the key's partition without a group, restores it, applies the same operation a
runner would (read from :mod:`watukuy.core.operations`), and commits it in one transaction.
"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import ConsumerGroupState, KafkaException

from watukuy.config import RunnerConfig
from watukuy.control.streams import poller_named
from watukuy.core.clock import SystemClock
from watukuy.core.errors import ConfigError
from watukuy.core.keys import KeyId
from watukuy.core.operations import Effect, key_operation
from watukuy.core.poller import Partition
from watukuy.engine.keys import KeyRuntime
from watukuy.engine.operations import commit_of
from watukuy.runner import kafka_store
from watukuy.store.base import Command
from watukuy.store.kafka import clients


def live_members(config: RunnerConfig) -> list[str]:
    """Members of the runner group now; empty when no runner is alive."""
    timeout = config.runner.startup_timeout
    admin = clients.admin_client(config.kafka)
    group = config.runner.group_id
    try:
        described = admin.describe_consumer_groups([group], request_timeout=timeout)[group].result(
            timeout=timeout
        )
    except TimeoutError as exc:  # no answer at all: the usual sign of a wrong address
        raise clients.unreachable(config.kafka, timeout) from exc
    except KafkaException as exc:
        raise clients.translated(exc, config.kafka, timeout, f"describing group '{group}'") from exc
    finally:
        clients.drain_logs(admin)
    if described.state in (ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD):
        return []
    return sorted(m.group_instance_id or m.client_id for m in described.members) or [
        f"({described.state.name.lower()})"
    ]


async def apply(
    config: RunnerConfig, poller_name: str, partition: str | None, op: str, args: dict[str, Any]
) -> str:
    """Apply the state operation ``op`` with ``args`` in their JSON form (``{"from": ...}``);
    what was done, in words (``applied to invoices/t_42``, ``sent to the owner of ...``)."""
    operation = key_operation(op)
    if operation.effect is not Effect.STATE:
        raise ConfigError(f"{operation.name} needs a running owner; it cannot run offline", "op")
    values = operation.decode(args)
    pollers = {p.name: p for p in config.pollers}
    poller = poller_named(pollers, poller_name, "--poller")  # a stream: <connector>.<stream>
    if poller.partitioned and partition is None:
        raise ConfigError(f"poller '{poller_name}' is partitioned; pass --partition", "--partition")
    key = partition or ""
    named = KeyId(poller_name, key)  # how messages name the key
    members = live_members(config)
    store = kafka_store(config, use_group=False)
    store.bind(pollers)
    await store.start()
    try:
        if members:
            command = Command.issue(
                operation.name, poller_name, key, operation.encode(values), time.time()
            )
            await store.send_command(command)
            return (
                f"sent to the owner of {named} (runners alive: "
                f"{', '.join(members)}); it applies it once, wherever the key moves"
            )
        await store.acquire([store.kafka_partition_of(poller_name, key)])
        stored = await store.load(poller_name, key)
        if stored is None:
            raise ConfigError(f"no stored state for {named}", "--partition")
        runtime = KeyRuntime(poller, Partition(key, None), stored.state, stored.snapshot)
        commit = commit_of(operation, runtime, values, SystemClock().now())
        await store.commit([commit])
    finally:
        await store.close()
    return f"applied to {named}"
