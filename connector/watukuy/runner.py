"""One runner instance: the engine on the Kafka store, from a loaded config, until a signal.

SIGTERM and SIGINT ask the engine to stop: polls end after their current page, the open
transaction is committed, the Kafka clients close and the group learns we left (a static
member keeps its partitions until its session times out, so a quick restart reshuffles
nothing). A Kafka thread that dies ends the run with an error.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from contextlib import suppress

from watukuy.config import RunnerConfig
from watukuy.engine.engine import Engine
from watukuy.store.kafka.store import KafkaSettings, KafkaStore
from watukuy.store.kafka.topics import TopicLayout

log = logging.getLogger("watukuy.runner")


def kafka_store(config: RunnerConfig, *, use_group: bool = True) -> KafkaStore:
    topics = config.topics
    runner = config.runner
    return KafkaStore(
        KafkaSettings(
            kafka=config.kafka,  # keeps which properties are secrets, for messages
            layout=TopicLayout(topics.prefix, topics.partitions, topics.replication_factor),
            runner_id=runner.id,
            group_id=runner.group_id,
            commit_interval=runner.commit_interval,
            session_timeout=runner.session_timeout,
            transaction_timeout=runner.session_timeout,
            startup_timeout=runner.startup_timeout,
            static_membership=runner.static_membership,
            use_group=use_group,
            registry_url=config.schema_registry.url,
            registry_auth=config.schema_registry.basic_auth,
            # Fault tests set it so that a SIGKILL lands inside an open transaction.
            hold_open=float(os.environ.get("WATUKUY_FAULT_HOLD_TRANSACTION", "0") or 0),
        )
    )


class StoreFailed(Exception):
    """The Kafka thread stopped; the instance cannot go on."""


async def run(config: RunnerConfig) -> None:
    store = kafka_store(config)
    engine = Engine(
        config.pollers,
        store=store,
        budgets=config.budgets,
        max_concurrency=config.runner.max_concurrency,
        owner=config.runner.id,
    )
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    store.watch(lambda: stop.set() if store.crashed is not None else None)
    try:
        async with engine:
            log.info(
                "runner %s started: group %s, pollers %s",
                config.runner.id,
                store.settings.group,
                ", ".join(sorted(engine.pollers)),
            )
            async with asyncio.TaskGroup() as group:
                running = group.create_task(engine.run())
                await stop.wait()
                log.info("runner %s stopping", config.runner.id)
                await engine.stop()
                await running
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            with suppress(Exception):
                loop.remove_signal_handler(signum)
    if store.crashed is not None:
        raise StoreFailed(f"the Kafka store failed: {store.crashed}") from store.crashed
