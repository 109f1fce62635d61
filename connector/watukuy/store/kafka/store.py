"""``KafkaStore``: the Store on Kafka, as seen from the event loop.

A thin facade over three parts: the Kafka thread (:mod:`.io`) owns the clients; the view of
the owned keys (:mod:`.view`) holds the committed picture restored and applies each commit to
it once Kafka has accepted the transaction; the event codec (:mod:`.codec`) knows each
poller's topics and envelopes. This side turns engine calls into records (:mod:`.outgoing`)
and commit requests, and the thread's notifications into ownership changes and commands.

Fencing has three layers: a key whose partition is not owned is refused here; a request made
under a lease generation that has since been revoked is refused by the thread; and every
transaction carries the group's metadata, so a zombie's commit is refused by the coordinator.
The per-key epoch is bumped on every restore, so a runtime left over from an earlier lease of
the same partition cannot commit either.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial

from watukuy.core.commands import Command
from watukuy.core.errors import ConfigError, Fenced, Retriable, StateCorrupted
from watukuy.core.events import Event
from watukuy.core.keys import key_text
from watukuy.core.observe import Observer, fanout, outcome_kind
from watukuy.core.poller import Poller
from watukuy.core.state import ParkedItem, PartitionState, SnapshotEntry
from watukuy.observe import startup
from watukuy.store.apply import PageRuns
from watukuy.store.base import KeyCommit, PageRun, StoredKey
from watukuy.store.kafka import records
from watukuy.store.kafka.codec import EventCodec
from watukuy.store.kafka.command_writer import CommandWriter
from watukuy.store.kafka.disk import open_disk
from watukuy.store.kafka.factory import ClientFactory, Clock
from watukuy.store.kafka.feed import KafkaEventFeed, handlers_feed
from watukuy.store.kafka.idle import IdlePolls
from watukuy.store.kafka.io import (
    Assigned,
    CommandReceived,
    CommitRequest,
    Crashed,
    KafkaIO,
    Notification,
    Record,
    Restored,
    Revoked,
    Transacted,
)
from watukuy.store.kafka.member import GroupMember
from watukuy.store.kafka.outgoing import Outgoing
from watukuy.store.kafka.rolled import Done, write_rolled
from watukuy.store.kafka.schemas import publish_schemas
from watukuy.store.kafka.settings import KafkaSettings
from watukuy.store.kafka.standby import Roster
from watukuy.store.kafka.topiccheck import TopicCheck
from watukuy.store.kafka.topics import TopicInfo
from watukuy.store.kafka.view import OwnedKeys

__all__ = ["KafkaSettings", "KafkaStore"]

log = logging.getLogger("watukuy.kafka")


class KafkaStore:
    def __init__(
        self,
        settings: KafkaSettings,
        observers: Observer | Iterable[Observer] | None = None,
        *,
        clients: ClientFactory | None = None,
        clock: Clock | None = None,
        topic_check: TopicCheck | None = None,
    ) -> None:
        """``clients`` and ``clock``: what the Kafka thread builds its clients with and reads
        the time from (confluent-kafka's and the system's by default; see :mod:`.factory`).
        ``topic_check``: the check of its topics, started already (:mod:`.topiccheck`)."""
        self.settings = settings
        self._topic_check = topic_check
        self._clients = clients
        self._clock = clock
        self._commands_out = CommandWriter(settings.kafka, clients, settings.transaction_timeout)
        # Transactions, leases, restores and DLQ copies are told to them, on the event loop.
        self.observer: Observer = fanout(observers, on_error=_observer_failed)
        self.layout = settings.layout
        self._pollers: dict[str, Poller] = {}
        self._view = OwnedKeys(self.layout.partitions)
        self._runs = PageRuns()  # pages in flight refused before they reach the thread
        self._codec = EventCodec(settings)
        self._commands: list[Command] = []
        self._watchers: list[Callable[[], None]] = []
        self._feeds: list[KafkaEventFeed] = []  # handlers' and subscribers' (see .feed)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._io: KafkaIO | None = None
        self._outgoing: Outgoing | None = None
        self.crashed: BaseException | None = None
        self.restored_from_disk = 0  # records restores took from the local state store
        self._idle = IdlePolls(self._view, self._runs, self._say_served)
        self.roster: Roster | None = None
        """Who owns what in the group (the status topic's heartbeats), which the standby
        replicas are chosen from; none are kept while it is unset."""

    @property
    def topics(self) -> dict[str, TopicInfo]:
        """Every topic this store made sure of, by name."""
        return self._codec.topics

    # -- lifecycle ----------------------------------------------------------------------------

    def bind(self, pollers: Mapping[str, Poller]) -> None:
        self._pollers = dict(pollers)

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        pollers = list(self._pollers.values())
        await self._ensure_topics(pollers)
        codec = self._codec
        for poller in pollers:
            codec.declare(poller)
        await asyncio.to_thread(codec.register, pollers)
        self._outgoing = Outgoing(
            self.layout, codec.event_topics, codec.max_bytes, "watukuy", codec.encode
        )
        io = KafkaIO(
            self.settings,
            self._from_thread,
            clients=self._clients,
            clock=self._clock,
            events_of=codec.events_of,
            disk=await asyncio.to_thread(open_disk, self.settings, self.topics, self._clock),
            roster=lambda: {} if self.roster is None else self.roster(),
        )
        io.start()
        # The schemas go out while the Kafka thread starts its clients and joins the group.
        _, published, _ = await asyncio.gather(
            _started(io),
            self._publish_schemas(codec.schema_texts()),
            self._commands_out.warm(self.layout.state),
            return_exceptions=True,
        )
        if (failed := io.startup_error) is not None:
            raise Retriable(f"cannot start the Kafka clients: {failed}") from failed
        self._io = io
        if isinstance(published, BaseException):
            raise published
        for feed in self._feeds:
            feed.start(self._loop)

    async def add_poller(self, poller: Poller) -> None:
        """A poller added or redefined at run time: what ``start`` does for each poller, for
        this one: its events and DLQ topics made to exist, its envelope registered (registry
        mode) and published to the schemas topic. Before ``start``, it only joins the others.
        """
        self._pollers[poller.name] = poller
        if self._io is None:
            return
        await self._ensure_topics([poller])
        writer = self._codec.declare(poller)
        await asyncio.to_thread(self._codec.register, [poller])
        await self._publish_schemas({writer.fingerprint_hex: writer.text})

    async def _ensure_topics(self, pollers: Sequence[Poller]) -> None:
        """The internal topics and those of ``pollers``: created if missing, then checked (by
        the check started before the store, if it covers them: :mod:`.topiccheck`)."""
        wanted = [(p.name, p.topic) for p in pollers]
        check, self._topic_check = self._topic_check, None
        if check is None or not check.covers(self.layout, wanted):
            settings = self.settings
            check = TopicCheck(settings.kafka, self.layout, wanted, settings.startup_timeout)
        self._codec.learned(await check.result())

    async def _publish_schemas(self, texts: dict[str, str]) -> None:
        """Writer schemas, keyed by fingerprint: consumers without a registry resolve here
        (:mod:`.schemas`)."""
        settings = self.settings
        topic, timeout = self.layout.schemas, settings.startup_timeout
        await asyncio.to_thread(publish_schemas, settings.kafka, topic, texts, timeout)
        startup.mark("schemas published")

    async def close(self) -> None:
        for feed in self._feeds:  # before the clients: a dead letter may still be on its way
            await feed.aclose()
        io, self._io = self._io, None
        if io is not None:
            await asyncio.to_thread(io.stop)
        await self._commands_out.close()

    async def acquire(self, kafka_partitions: Sequence[int]) -> None:
        """Without a group (the CLI): own ``kafka_partitions`` once restored. Bound it by a
        timeout."""
        wanted = set(kafka_partitions)
        restored = asyncio.Event()

        def check() -> None:
            if wanted <= set(self._view.owned):
                restored.set()

        self.watch(check)
        self._running().acquire(sorted(wanted))
        check()
        await restored.wait()

    # -- ownership ----------------------------------------------------------------------------

    def kafka_partition_of(self, poller: str, partition: str) -> int:
        """The Kafka partition of ``<prefix>.state`` (and its co-partitioned topics) that holds
        the key ``(poller, partition)``."""
        return self._view.kafka_partition_of(key_text(poller, partition))

    def owns(self, poller: str, partition: str) -> bool:
        return self._view.owns(poller, partition)

    def owned_kafka_partitions(self) -> list[int]:
        return sorted(self._view.owned)

    def restoring_kafka_partitions(self) -> list[int]:
        """Assigned to this instance and still being restored."""
        return sorted(self._view.restoring)

    @property
    def member(self) -> GroupMember:
        """This instance in the runners' group (once started), for the liveness guard."""
        if self._io is None:
            raise Retriable("the Kafka store is not started")
        return GroupMember(self.settings, self._io)

    def watch(self, changed: Callable[[], None]) -> None:
        self._watchers.append(changed)

    def take_commands(self) -> list[Command]:
        taken, self._commands = self._commands, []
        return [c for c in taken if self.owns(c.poller, c.partition)]

    def _from_thread(self, notification: Notification) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._handle, notification)

    def _handle(self, notification: Notification) -> None:
        if isinstance(notification, Transacted):
            self._transacted(notification)
            return  # nothing moved: the engine need not look at ownership
        if isinstance(notification, Assigned):
            self._view.restoring.update(notification.kafka_partitions)
            self.observer.leases_gained(notification.kafka_partitions)
        elif isinstance(notification, Restored):
            self._view.restoring.discard(notification.lease.kafka_partition)
            self._restored(notification)
        elif isinstance(notification, Revoked):
            self.observer.leases_lost(notification.kafka_partitions, notification.lost)
            self._view.revoke(notification.kafka_partitions)
        elif isinstance(notification, CommandReceived):
            received = notification.command
            if self._view.received(notification.kafka_partition, received, notification.record_key):
                self._commands.append(received)
        elif isinstance(notification, Crashed):
            self.crashed = notification.error
        for changed in self._watchers:
            changed()

    def _restored(self, restored: Restored) -> None:
        """Take a restored partition in (see :meth:`OwnedKeys.take_in`), catch up the keys
        that need it, and hand over the commands waiting for its keys."""
        kafka_partition, generation = restored.lease.kafka_partition, restored.lease.generation
        keys = restored.keys
        try:
            self._view.take_in(kafka_partition, generation, keys, restored.served_until)
        except StateCorrupted as exc:
            self.crashed = exc  # as when the thread could not read it: the store stops
            return
        view, observer, write = self._view, self.observer, self._write_alone
        write_rolled(keys, kafka_partition, generation, view=view, observer=observer, write=write)
        self._commands.extend(keys.pending_commands())
        self.observer.restore_done(
            kafka_partition, len(keys.states), restored.records, restored.seconds
        )
        self.restored_from_disk += restored.from_disk

    def _write_alone(
        self, commit: KeyCommit, kafka_partition: int, generation: int, done: Done
    ) -> bool:
        io = self._io
        if io is None:  # closing: the next owner writes it
            return False
        out = self._require_outgoing().of(commit, kafka_partition)
        io.submit(CommitRequest(out, {kafka_partition: generation}, self._hop(done)))
        return True

    def _transacted(self, done: Transacted) -> None:
        kind = None if done.error is None else outcome_kind(done.error)
        self.observer.transaction_done(done.error is None, done.seconds, done.records, kind)

    # -- keys' state --------------------------------------------------------------------------

    async def load(self, poller: str, partition: str, *, snapshot: bool = True) -> StoredKey | None:
        if not self.owns(poller, partition):
            raise Fenced(f"{key_text(poller, partition)}: owned by another instance")
        return self._view.load(key_text(poller, partition), snapshot=snapshot)

    def entries(
        self, poller: str, partition: str, identities: Iterable[str]
    ) -> dict[str, SnapshotEntry]:
        if not self.owns(poller, partition):
            raise Fenced(f"{key_text(poller, partition)}: owned by another instance")
        return self._view.entries(key_text(poller, partition), identities)

    async def commit(self, batch: Sequence[KeyCommit]) -> None:
        if self._idle.held_back(batch):  # an idle poll's: not written (.idle)
            return
        runs = [(entry.key, entry.run) for entry in batch if entry.run is not None]
        try:
            request, future = self._commit_request(batch, runs)
            self._idle.written(batch)
        except BaseException:
            for key, run in runs:  # refused here: the thread never hears of these pages
                self._runs.refused(key, run)
            raise
        await self._send(request, future)

    def served_until(self, until: float) -> None:
        """Kept with the next transactions' offsets of the partitions owned now (their
        metadata, which the group's coordinator keeps with them and the next owner of each
        partition reads when it restores it): only a transaction of an owner of the
        partition, fenced as every one is, can say it (:mod:`.idle`)."""
        self._idle.served_until(until, self._pollers)

    def _commit_request(
        self, batch: Sequence[KeyCommit], runs: list[tuple[str, PageRun]]
    ) -> tuple[CommitRequest, asyncio.Future[None]]:
        """The request for ``batch``; what refuses it before it is sent raises."""
        outgoing = self._require_outgoing()
        for key, run in runs:
            if not self._runs.admits(key, run):
                raise Retriable(f"{key}: a page it builds on was not committed")
        leases: dict[int, int] = {}
        out: list[Record] = []
        for entry in batch:
            checked = self._view.check(entry)
            leases[checked.kafka_partition] = checked.generation
            out.extend(
                outgoing.of(checked.written, checked.kafka_partition, checked.command_records)
            )
            # In the same transaction: the child keys' owners see them only if it commits.
            out.extend(self._command_record(command) for command in entry.sends)
        future = self._new_future()

        def done(error: BaseException | None) -> None:
            if error is None:
                for entry in batch:
                    self._view.applied(entry)
                    if entry.parked:
                        state = entry.state
                        self.observer.dlq_written(state.poller, state.partition, len(entry.parked))
            else:
                for key, run in runs:
                    self._runs.refused(key, run)
            _settle(future, error)

        return CommitRequest(out, leases, self._hop(done), runs), future

    def unpublishable(self, event: Event) -> str | None:
        outgoing = self._outgoing
        return None if outgoing is None else outgoing.unpublishable(event)

    async def remove(self, poller: str, partition: str, command: str | None = None) -> None:
        key = key_text(poller, partition)
        view = self._view
        kafka_partition = view.kafka_partition_of(key)
        generation = view.owned.get(kafka_partition)
        if generation is None:
            raise Fenced(f"{key}: owned by another instance")
        identities, parked_ids = view.record_ids(key)
        out = self._require_outgoing().removal(
            poller, partition, kafka_partition, identities, parked_ids
        )
        if command is not None:
            record_key = view.command_key(poller, partition, command)
            out.append(Record(self.layout.state, record_key, None, kafka_partition))
        future = self._new_future()

        def done(error: BaseException | None) -> None:
            if error is None:
                view.removed(key, command)
            _settle(future, error)

        await self._send(CommitRequest(out, {kafka_partition: generation}, self._hop(done)), future)

    async def partitions(self, poller: str) -> list[str]:
        return [s.partition for s in self._view.states_of(poller)]

    def states_of(self, poller: str, *, waiting: bool = True) -> list[PartitionState]:
        """Restored and committed since: only keys of partitions this instance owns."""
        return self._view.states_of(poller, waiting=waiting)

    def local_figures(self) -> tuple[int | None, tuple[int, float], int]:
        """The local state store's bytes on disk (``None``: none is configured), the
        partitions it keeps warm as standbys and their lag, and what restores took from it."""
        io = self._io
        standbys = (0, 0.0) if io is None else io.standby_figures()
        return None if io is None else io.disk_bytes(), standbys, self.restored_from_disk

    def written_topics(self) -> list[str]:
        """Every topic the runners write in transactions: the internal ones, and each bound
        poller's events and DLQ topics (where :mod:`.hanging` looks for hanging ones)."""
        return self._codec.written_topics()

    # -- event feeds and commands -------------------------------------------------------------

    def events(self, poller: str) -> KafkaEventFeed:
        """The poller's events as the whole group published them, read from its topic in the
        handlers' consumer group once someone listens (:mod:`watukuy.store.kafka.feed`)."""
        feed = handlers_feed(
            poller, self.settings, self._pollers.get, self._codec.decoder, self._dead_letter
        )
        self._feeds.append(feed)
        if self._io is not None and self._loop is not None:
            feed.start(self._loop)
        return feed

    async def _dead_letter(self, item: ParkedItem) -> None:
        """A poison event whose key another instance holds: its DLQ copy, outside the key's
        transaction (the parked record belongs to the owner, so only the DLQ has it)."""
        record = self._require_outgoing().dlq(item, cursor="null")
        future = self._new_future()
        self._running().send_plain(record, self._hop(partial(_settle, future)))
        await future
        self.observer.dlq_written(item.poller, item.partition, 1)

    def _command_record(self, command: Command) -> Record:
        return Record(
            self.layout.state,
            records.command_key(command.poller, command.partition, command.id),
            records.encode_command(command),
            self.kafka_partition_of(command.poller, command.partition),
        )

    async def send_command(self, command: Command) -> None:
        self._running()  # refused as every write is, before start and once crashed
        await self._commands_out.send(self._command_record(command))

    # -- commit plumbing ----------------------------------------------------------------------

    async def _send(self, request: CommitRequest, future: asyncio.Future[None]) -> None:
        self._running().submit(request)
        # Shielded: once submitted, the outcome is applied to the cache whatever the caller does.
        await asyncio.shield(future)

    def _say_served(self, until: float, owned: dict[int, int]) -> None:
        if self._io is not None:
            self._io.served(until, owned)

    def _hop(
        self, done: Callable[[BaseException | None], None]
    ) -> Callable[[BaseException | None], None]:
        loop = self._loop
        if loop is None:
            raise Retriable("the Kafka store is not started")

        def from_thread(error: BaseException | None) -> None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(done, error)

        return from_thread

    def _new_future(self) -> asyncio.Future[None]:
        if self._loop is None:
            raise Retriable("the Kafka store is not started")
        return self._loop.create_future()

    def _running(self) -> KafkaIO:
        if self._io is None:
            raise Retriable("the Kafka store is not running")
        if self.crashed is not None:
            raise Retriable(f"the Kafka store failed: {self.crashed}")
        return self._io

    def _require_outgoing(self) -> Outgoing:
        if self._outgoing is None:
            raise ConfigError("start the Kafka store before using it")
        return self._outgoing


async def _started(io: KafkaIO) -> None:
    await asyncio.to_thread(io.ready.wait)
    startup.mark("Kafka clients ready")


def _observer_failed(observer: Observer, hook: str, error: Exception) -> None:
    log.error("observer %s failed in %s: %r", type(observer).__name__, hook, error)


def _settle(future: asyncio.Future[None], error: BaseException | None) -> None:
    if not future.done():
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)
