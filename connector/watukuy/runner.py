"""One runner instance: the engine on the Kafka store, from a loaded config, until a signal.

SIGTERM and SIGINT ask the engine to stop: polls end after their current page, the open
transaction is committed, the Kafka clients close and the group learns we left (a static
member keeps its partitions until its session times out, so a quick restart reshuffles
nothing). A Kafka thread that dies ends the run with an error.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import time
from collections.abc import Awaitable, Callable, Coroutine, Hashable, Iterable
from contextlib import AbstractAsyncContextManager, suppress
from dataclasses import dataclass
from functools import partial
from importlib import import_module
from typing import TYPE_CHECKING, Any

from watukuy.config import RunnerConfig
from watukuy.config.budgets import engine_budgets
from watukuy.config.credentials import credential_store
from watukuy.control.activetopics import Published
from watukuy.control.applier import ConfigApplier
from watukuy.control.configs import ConfigTopic
from watukuy.control.loggers import LoggerLevels, follow_cluster_levels
from watukuy.control.ownership import OwnershipGuard
from watukuy.control.service import RunnerControl
from watukuy.control.status import StatusTopic, key_statuses
from watukuy.control.transformrecords import fingerprint_of
from watukuy.core.errors import WatukuyError
from watukuy.core.lifecycle import Target
from watukuy.core.observe import Observer, StateFigures
from watukuy.engine.changes import KeyChanges
from watukuy.engine.credentials import Vault
from watukuy.engine.engine import Engine
from watukuy.observe import startup
from watukuy.observe.metrics import PrometheusObserver
from watukuy.rest.port import Metrics
from watukuy.store.credentials import CredentialStore
from watukuy.store.kafka.factory import ClientFactory
from watukuy.store.kafka.hanging import HangingTransactions
from watukuy.store.kafka.store import KafkaSettings, KafkaStore
from watukuy.store.kafka.topiccheck import TopicCheck
from watukuy.store.kafka.topics import TopicLayout

if TYPE_CHECKING:  # loaded on a thread while the store starts: see run()
    from watukuy.rest.server import RestServer

log = logging.getLogger("watukuy.runner")


def kafka_store(
    config: RunnerConfig,
    *,
    use_group: bool = True,
    observers: Observer | Iterable[Observer] | None = None,
    clients: ClientFactory | None = None,
    topic_check: TopicCheck | None = None,
) -> KafkaStore:
    """The Kafka store of ``config``; ``clients`` builds its Kafka clients (confluent-kafka's by
    default; the fault suite passes one that injects errors); ``topic_check``, its topics'
    check if it was started already (:mod:`watukuy.store.kafka.topiccheck`)."""
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
            # Without a group it is a CLI command beside the running runners: their stores
            # are theirs (one process at a time may open one).
            state_dir=runner.state_dir if use_group else None,
            standby_replicas=runner.standby_replicas,
        ),
        observers=observers,
        clients=clients,
        topic_check=topic_check,
    )


def state_figures(engine: Engine, store: KafkaStore) -> StateFigures:
    """Where the runner's state lives, for the metrics."""
    snapshots = engine.snapshots
    disk_bytes, (standbys, standby_lag), from_disk = store.local_figures()
    return StateFigures(
        snapshot_keys=snapshots.keys,
        snapshot_entries=snapshots.entries,
        snapshot_hits=snapshots.hits,
        snapshot_loads=snapshots.loads,
        snapshot_entry_reads=snapshots.point_reads,
        disk_bytes=disk_bytes,
        standby_partitions=standbys,
        standby_lag=standby_lag,
        restored_from_disk=from_disk,
    )


class StoreFailed(Exception):
    """The Kafka thread stopped; the instance cannot go on."""


STATUS_EVERY = 1.0
"""Seconds between looks at this instance's keys for statuses to publish (only changes are
written, and everything at least every 30 s)."""

BACKLOG_STATUS_EVERY = 30.0
"""Seconds between those looks while the engine takes in its keys and polls them for the first
time, or more keys are due than it polls at once (``KeyChanges.backlogged``): at a start or a
takeover every key changes, and writing each one's status twice (held, then polled) was 11% of
the CPU of 10,000 keys' first polls, which the statuses then delayed (issue 42). The changes
are kept meanwhile; the next look writes them."""


async def run(
    config: RunnerConfig,
    *,
    clients: ClientFactory | None = None,
    topic_check: TopicCheck | None = None,
) -> None:
    metrics = PrometheusObserver(partition_label=config.metrics.partition_label)
    observers = [metrics, startup.StartupObserver()]
    store = kafka_store(config, observers=observers, clients=clients, topic_check=topic_check)
    grants = _credentials(config, store, clients)
    engine = Engine(
        config.pollers,
        store=store,
        budgets=engine_budgets(config.budgets, config.secrets),
        max_concurrency=config.runner.max_concurrency,
        pages_in_flight=config.runner.max_pages_in_flight_per_key,
        pages_in_flight_total=config.runner.max_pages_in_flight,
        snapshot_cache=config.runner.snapshot_cache_entries,
        owner=config.runner.id,
        observers=observers,
        credentials=_vault(config, grants, metrics),
    )
    metrics.watch(engine.figures.table, lambda: engine.pollers)
    metrics.watch_state(partial(state_figures, engine, store))
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    store.watch(lambda: stop.set() if store.crashed is not None else None)
    # REST's modules (aiohttp's server among them) load on a thread while the store waits for
    # Kafka: no poll needs them, and they cost the main thread 35-150 ms of CPU.
    rest_loaded = asyncio.ensure_future(asyncio.to_thread(import_module, "watukuy.rest.server"))
    try:
        async with engine:
            if grants is not None:  # a wrong key is a ConfigError here, before any poll
                await grants.start()
                startup.mark("credentials read")
            await _serve(config, engine, store, stop, metrics, rest_loaded)
    finally:
        if grants is not None:
            await grants.close()
        for signum in (signal.SIGTERM, signal.SIGINT):
            with suppress(Exception):
                loop.remove_signal_handler(signum)
        with suppress(Exception):  # awaited, so it never outlives the run
            await rest_loaded
    if store.crashed is not None:
        raise StoreFailed(f"the Kafka store failed: {store.crashed}") from store.crashed


def _credentials(
    config: RunnerConfig, store: KafkaStore, clients: ClientFactory | None
) -> CredentialStore | None:
    """The credential store of ``credentials:`` (rotated grants, claims), not started."""
    if config.credentials is None:
        return None
    return credential_store(config.credentials, config.kafka, store.layout, clients)


def _vault(
    config: RunnerConfig, grants: CredentialStore | None, metrics: PrometheusObserver
) -> Vault:
    """The tenants' grants over ``grants``; without a credential store, in memory (a runner
    whose pollers use ``grant: refresh_token`` is refused at load without one)."""
    lost_after = 60.0 if config.credentials is None else config.credentials.lost_after
    return Vault(
        grants, runner=config.runner.id, lost_after=lost_after, on_refresh=metrics.grant_refreshed
    )


async def _serve(
    config: RunnerConfig,
    engine: Engine,
    store: KafkaStore,
    stop: asyncio.Event,
    metrics: PrometheusObserver,
    rest_loaded: Awaitable[object],
) -> None:
    """With the store started (its topics exist): the configs topic applied, then the engine,
    the status topic and the REST API (once ``rest_loaded``), until ``stop``."""
    runner = config.runner
    file_pollers = config.file_pollers()
    configs, status = _control_topics(config, store)
    applier = ConfigApplier(engine, list(file_pollers), config.base_dir)
    hanging, guard = _watches(config, store, status, metrics)
    await configs.start()
    startup.mark("configs topic read")
    try:
        configs.listen(applier.changed)
        loggers = LoggerLevels()
        follow_cluster_levels(configs, loggers)
        await applier.apply_view(configs.view())
        polling = asyncio.Event()  # set while the engine polls: /health says healthy
        control = RunnerControl(
            engine=engine,
            configs=configs,
            status=status,
            file_pollers=file_pollers,
            kafka=config.kafka,
            layout=store.layout,
            runner_id=runner.id,
            base_dir=config.base_dir,
            started=polling.is_set,
            broken=lambda: store.crashed,
            adrift=lambda: guard.adrift,
            metrics=partial(_scrape, metrics),
            loggers=loggers,
        )

        def helpers() -> list[Coroutine[Any, Any, None]]:
            changes = engine.watch_keys()
            publish = _publish_statuses(engine, changes, status, store.layout)
            collector = _tune_collector(lambda: changes.backlogged)
            return [applier.run(), publish, collector, hanging.run(), guard.run()]

        def rest() -> AbstractAsyncContextManager[RestServer]:
            from watukuy.rest.server import start_rest

            return start_rest(control, config.rest)

        serving = Serving(stop, engine, store, status, rest_loaded, rest, helpers, polling)
        await _poll_until(serving, runner.id)
    finally:
        await configs.stop()


def _started(runner_id: str, store: KafkaStore, engine: Engine, port: int) -> None:
    startup.mark("REST listening")
    group, pollers = store.settings.group, ", ".join(sorted(engine.pollers))
    log.info(
        "runner %s started: group %s, pollers %s, REST on port %d", runner_id, group, pollers, port
    )
    startup.mark("runner started")
    startup.show("runner started")


def _control_topics(config: RunnerConfig, store: KafkaStore) -> tuple[ConfigTopic, StatusTopic]:
    """``<prefix>.configs`` and ``<prefix>.status`` of this runner, not started."""
    runner = config.runner
    configs = ConfigTopic(
        config.kafka,
        store.layout,
        runner_id=runner.id,
        group=store.settings.group,
        timeout=runner.startup_timeout,
        transaction_timeout=runner.session_timeout,
    )
    status = StatusTopic(
        config.kafka,
        store.layout,
        runner_id=runner.id,
        session_timeout=runner.session_timeout,
        group=store.settings.group,
        timeout=runner.startup_timeout,
        owned=store.owned_kafka_partitions,
        restoring=store.restoring_kafka_partitions,
    )
    store.roster = status.owners  # the heartbeats say who owns what: standbys are chosen by it
    return configs, status


def _watches(
    config: RunnerConfig, store: KafkaStore, status: StatusTopic, observer: Observer
) -> tuple[HangingTransactions, OwnershipGuard]:
    """What watches the cluster from this runner: hanging transactions, and the liveness
    guard (:mod:`watukuy.control.ownership`)."""
    hanging = HangingTransactions(
        config.kafka,
        store.written_topics,
        observer,
        transaction_timeout=config.runner.session_timeout,
    )
    guard = OwnershipGuard(
        partitions=store.layout.partitions,
        session_timeout=config.runner.session_timeout,
        claimed=status.others_claim,
        held=lambda: (*store.owned_kafka_partitions(), *store.restoring_kafka_partitions()),
        member=store.member,
        observer=observer,
    )
    return hanging, guard


@dataclass(frozen=True)
class Serving:
    """What runs beside the engine once the configs are applied."""

    stop: asyncio.Event
    engine: Engine
    store: KafkaStore
    status: StatusTopic
    rest_loaded: Awaitable[object]
    rest: Callable[[], AbstractAsyncContextManager[RestServer]]
    helpers: Callable[[], list[Coroutine[Any, Any, None]]]
    polling: asyncio.Event


async def _poll_until(serving: Serving, runner_id: str) -> None:
    """Run the engine until ``stop``; meanwhile start the status topic, REST and the
    ``helpers`` (which the polls do not wait for: the first polls go out while they start);
    then cancel the helpers and stop the engine. ``polling`` is set in between."""
    engine, status = serving.engine, serving.status
    async with asyncio.TaskGroup() as group:
        running = group.create_task(engine.run())
        try:
            await status.start()
            startup.mark("status topic read")
            try:
                await serving.rest_loaded
                async with serving.rest() as server:
                    _started(runner_id, serving.store, engine, server.port)
                    tasks = [group.create_task(helper) for helper in serving.helpers()]
                    serving.polling.set()
                    await serving.stop.wait()
                    serving.polling.clear()
                    log.info("runner %s stopping", runner_id)
                    for task in tasks:
                        task.cancel()
                    await engine.stop()
                    await running
            finally:
                await status.stop(clean=True)
        finally:
            await engine.stop()  # the status topic or REST failed to start: run() ends too


async def _scrape(metrics: PrometheusObserver) -> Metrics:
    return Metrics(*metrics.render_pieces())


COLLECTOR_LOOK_EVERY = 0.25
"""Seconds between looks at whether the start's first polls are done (the collector waits)."""

FREEZE_AFTER = 30.0
"""Seconds after start when what exists then (pollers, restored keys, their first polls' state)
is moved out of the garbage collector's sight: it lives as long as the process."""


GC_THRESHOLDS = (20_000, 50, 100)
"""The collector's thresholds while the runner runs (Python's defaults: 700, 10, 10). Each page
allocates a few objects per item (its events, snapshot entries, a transformed item) that live
until the commit, so the defaults collect young objects every few dozen items and walk the
growing heap of snapshot entries often. Measured with the side-by-side benchmark (100,000
events, two pairs): the declarative stream's CPU per event 101/94 -> 78/80 µs all in, 79/81 ->
63/65 steady; the young generation holds at most 20,000 objects more."""


async def _tune_collector(backlogged: Callable[[], bool]) -> None:
    """The collector back on (``watukuy-source run`` starts with it off: see
    :func:`watukuy.cli.main`) once the start's first polls are done (no more keys due than
    the engine polls at once) or :data:`FREEZE_AFTER` has passed, at :data:`GC_THRESHOLDS`;
    ``gc.freeze()`` at :data:`FREEZE_AFTER`. Off during 10,000 keys' first polls, the runner
    spent 17% less CPU on them (issue 42): each collection of young objects walked thousands
    of the keys' new ones, which all live on. ``gc.freeze()``, measured with 10,000 idle
    tenants (integration/bench/idle_tenants.py --gc-freeze): 11.8% of a core without it, 7.6%
    with it; the collector had been walking the same long-lived objects on every full pass."""
    started = time.monotonic()
    for _ in range(int(FREEZE_AFTER / COLLECTOR_LOOK_EVERY)):  # a look now and then: no event
        if not backlogged():
            break
        await asyncio.sleep(COLLECTOR_LOOK_EVERY)
    gc.set_threshold(*GC_THRESHOLDS)
    gc.enable()
    await asyncio.sleep(max(0.0, FREEZE_AFTER - (time.monotonic() - started)))
    gc.freeze()


async def _publish_statuses(
    engine: Engine, changes: KeyChanges, status: StatusTopic, layout: TopicLayout
) -> None:
    """Publish what changed of this instance's keys, and the topics they newly published to
    (KIP-558), every :data:`STATUS_EVERY` seconds.

    A round looks only at the keys touched since the last one (:meth:`Engine.watch_keys`) and
    at those whose status is due to be written again, so it costs what changes, not what is
    held: marking every one of 10,000 idle keys each second was 7% of a core by itself."""

    def topic_of(found: Published) -> str:
        if found.kind == "dlq":
            return layout.dlq(found.poller)
        poller = engine.pollers.get(found.poller)
        return layout.events(found.poller, None if poller is None else poller.topic)

    looked: dict[str, Hashable] = {}  # key -> its status mark when its status was last published
    published = time.monotonic()
    while True:
        if changes.backlogged and time.monotonic() - published < BACKLOG_STATUS_EVERY:
            await asyncio.sleep(STATUS_EVERY)  # the keys' changes wait in ``changes``
            continue
        published = time.monotonic()
        now = time.time()
        targets = {name: Target(engine.target(name)) for name in engine.pollers}
        keys = changes.take()
        keys.update(status.due_again(now))
        marks = changes.marks(keys)
        released = [key for key in keys if key not in marks]
        wanted = [k for k, m in marks.items() if looked.get(k) != m or status.stale(k, now)]
        inspections = engine.inspect(wanted)
        statuses = key_statuses(inspections, now=now, targets=targets)
        try:
            await status.publish(statuses, owns=engine.store.owns, released=released)
            looked.update(marks)
            for key in released:
                looked.pop(key, None)
            fingerprints = {name: fingerprint_of(p) for name, p in engine.pollers.items()}
            await status.list_topics(inspections, topic_of, fingerprints)
        except WatukuyError as exc:  # Kafka busy: the next round looks at them again
            changes.again(keys)
            log.warning("publishing key statuses failed: %s", exc)
        await asyncio.sleep(STATUS_EVERY)
