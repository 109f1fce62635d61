"""``KafkaStore``: the Store on Kafka, as seen from the event loop.

The store keeps, for the keys this instance owns, the committed picture it restored (state,
snapshot, parked) and applies each commit to it once Kafka has accepted the transaction. The
Kafka thread (:mod:`.io`) owns the clients; this side builds records, checks ownership and
epochs before anything is sent, and turns the thread's notifications into ownership changes
and commands for the engine.

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
from dataclasses import replace
from functools import partial

from watukuy.core.commands import Command
from watukuy.core.errors import ConfigError, Fenced, NewerRelease, Retriable, StateCorrupted
from watukuy.core.events import Event
from watukuy.core.keys import key_text
from watukuy.core.observe import Observer, fanout, outcome_kind
from watukuy.core.poller import Poller
from watukuy.core.state import ParkedItem, PartitionState, SnapshotEntry
from watukuy.serde import state as state_schemas
from watukuy.serde.consumer import Decoder, SchemaTopicResolver, event_decoder
from watukuy.serde.data import DataSchema
from watukuy.serde.events import EventSchemas, WriterSchema, dlq_schema, encode_event
from watukuy.serde.registry import ConfluentEventEncoder, registry_client
from watukuy.store import apply as commit_rule
from watukuy.store.base import KeyCommit, StoredKey
from watukuy.store.kafka import clients, records
from watukuy.store.kafka.factory import ClientFactory, Clock
from watukuy.store.kafka.feed import KafkaEventFeed, handlers_config
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
from watukuy.store.kafka.outgoing import Outgoing
from watukuy.store.kafka.partitioner import partition_for
from watukuy.store.kafka.restore import RestoredKeys
from watukuy.store.kafka.settings import KafkaSettings
from watukuy.store.kafka.topics import BrokerUnavailable, TopicInfo, ensure_topics

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
    ) -> None:
        """``clients`` and ``clock``: what the Kafka thread builds its clients with and reads
        the time from (confluent-kafka's and the system's by default; see :mod:`.factory`)."""
        self.settings = settings
        self._clients = clients
        self._clock = clock
        # Transactions, leases, restores and DLQ copies are told to them, on the event loop.
        self.observer: Observer = fanout(observers, on_error=_observer_failed)
        self.layout = settings.layout
        self._pollers: dict[str, Poller] = {}
        self._owned: dict[int, int] = {}  # Kafka partition -> lease generation
        # The committed picture of owned keys: states decoded at restore, snapshot and parked
        # items once the key is loaded (until then they stay raw in ``_raw``, see .restore).
        self._states: dict[str, PartitionState] = {}
        self._snapshots: dict[str, dict[str, SnapshotEntry]] = {}
        self._parked: dict[str, dict[str, ParkedItem]] = {}
        self._raw: dict[int, RestoredKeys] = {}  # Kafka partition -> what it restored
        self._newer: dict[str, str] = {}  # key -> why it waits for a newer release
        # key -> snapshot entries rolled forward at restore whose write failed: the key's next
        # commit carries them (see _catch_up).
        self._rolled: dict[str, dict[str, SnapshotEntry]] = {}
        self._commands: list[Command] = []
        # command id -> (Kafka partition, record key), from receipt until a commit applies it
        # or the partition goes: the engine knows commands by id, their records are ours.
        self._command_records: dict[str, tuple[int, bytes]] = {}
        self._watchers: list[Callable[[], None]] = []
        self._feeds: list[KafkaEventFeed] = []  # handlers' and subscribers' (see .feed)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._io: KafkaIO | None = None
        self._outgoing: Outgoing | None = None
        self.topics: dict[str, TopicInfo] = {}
        self.crashed: BaseException | None = None
        # What each poller's events need, filled per poller (at start, or when one is added).
        self._event_topics: dict[str, str] = {}
        self._max_bytes: dict[str, int] = {}  # topic -> max.message.bytes
        self._schemas = EventSchemas()
        self._registry_encoders: dict[str, ConfluentEventEncoder] = {}

    # -- lifecycle ----------------------------------------------------------------------------

    def bind(self, pollers: Mapping[str, Poller]) -> None:
        self._pollers = dict(pollers)

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        pollers = list(self._pollers.values())
        await self._ensure_topics(pollers)
        for poller in pollers:
            self._declare(poller)
        await asyncio.to_thread(self._register, pollers)
        self._outgoing = Outgoing(
            self.layout, self._event_topics, self._max_bytes, "watukuy", self._encode
        )
        io = KafkaIO(
            self.settings,
            self._from_thread,
            clients=self._clients,
            clock=self._clock,
            events_of=self._events_of,
        )
        io.start()
        await asyncio.to_thread(io.ready.wait)
        if io.startup_error is not None:
            raise Retriable(f"cannot start the Kafka clients: {io.startup_error}") from (
                io.startup_error
            )
        self._io = io
        texts = {**self._schemas.published(), dlq_schema().fingerprint_hex: dlq_schema().text}
        texts |= {s.fingerprint_hex: s.canonical for s in state_schemas.SCHEMAS.current.values()}
        await self._publish_schemas(texts)
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
        writer = self._declare(poller)
        await asyncio.to_thread(self._register, [poller])
        await self._publish_schemas({writer.fingerprint_hex: writer.text})

    async def _ensure_topics(self, pollers: Sequence[Poller]) -> None:
        """The internal topics and those of ``pollers``: created if missing, then checked."""
        kafka, timeout = self.settings.kafka, self.settings.startup_timeout
        admin = clients.admin_client(kafka)
        try:
            infos = await asyncio.to_thread(
                ensure_topics,
                admin,
                self.layout,
                [(p.name, p.topic) for p in pollers],
                bootstrap=clients.bootstrap_of(kafka),
                timeout=timeout,
            )
        except BrokerUnavailable as exc:
            raise clients.unreachable(kafka, timeout) from exc
        finally:
            clients.drain_logs(admin)  # why it could not connect, if it could not
        self.topics.update(infos)
        self._max_bytes.update({name: info.max_message_bytes for name, info in infos.items()})

    def _declare(self, poller: Poller) -> WriterSchema:
        """Where ``poller``'s events go and with which envelope; returns that envelope."""
        name = poller.name
        self._event_topics[name] = self.layout.events(name, poller.topic)
        data = None if poller.schema is None else DataSchema.load(poller.schema, f"poller '{name}'")
        return self._schemas.add(name, data)

    def _register(self, pollers: Sequence[Poller]) -> None:
        """Registry mode: register each envelope now, so a bad registry fails here, not at the
        first commit (blocking I/O: called in a thread)."""
        url = self.settings.registry_url
        if url is None:
            return
        client = registry_client(url, self.settings.registry_auth)
        for poller in pollers:
            encoder = ConfluentEventEncoder(client, self._event_topics[poller.name])
            encoder.schema_id(self._schemas.writer(poller.name))
            self._registry_encoders[poller.name] = encoder

    def _encode(self, event: Event) -> bytes:
        """Items were checked against their data schema when polled, hence ``validated``."""
        encoder = self._registry_encoders.get(event.poller)
        if encoder is not None:
            return encoder.encode(event, self._schemas, validated=True)
        return encode_event(event, self._schemas, validated=True)

    async def _publish_schemas(self, texts: dict[str, str]) -> None:
        """Writer schemas, keyed by fingerprint: consumers without a registry resolve here.

        Compacted and keyed by content, so publishing again (each start) is idempotent.
        """
        done: list[asyncio.Future[None]] = []
        for fingerprint_hex, text in sorted(texts.items()):
            future = self._new_future()
            record = Record(self.layout.schemas, fingerprint_hex.encode(), text.encode())
            self._running().send_plain(record, self._hop(partial(_settle, future)))
            done.append(future)
        await asyncio.gather(*done)

    async def close(self) -> None:
        for feed in self._feeds:  # before the clients: a dead letter may still be on its way
            await feed.aclose()
        io, self._io = self._io, None
        if io is not None:
            await asyncio.to_thread(io.stop)

    async def acquire(self, partitions: Sequence[int]) -> None:
        """Without a group (the CLI): own ``partitions`` once restored. Bound it by a timeout."""
        wanted = set(partitions)
        restored = asyncio.Event()

        def check() -> None:
            if wanted <= set(self._owned):
                restored.set()

        self.watch(check)
        self._running().acquire(sorted(wanted))
        check()
        await restored.wait()

    # -- ownership ----------------------------------------------------------------------------

    def kafka_partition_of(self, poller: str, partition: str) -> int:
        """The Kafka partition of ``<prefix>.state`` (and its co-partitioned topics) that holds
        the key ``(poller, partition)``."""
        return partition_for(key_text(poller, partition), self.layout.partitions)

    def owns(self, poller: str, partition: str) -> bool:
        return self.kafka_partition_of(poller, partition) in self._owned

    def owned_kafka_partitions(self) -> list[int]:
        return sorted(self._owned)

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
            self.observer.leases_gained(notification.partitions)
        elif isinstance(notification, Restored):
            self._restored(notification)
        elif isinstance(notification, Revoked):
            self._revoked(notification)
        elif isinstance(notification, CommandReceived):
            if notification.kafka_partition in self._owned:
                command = notification.command
                where = (notification.kafka_partition, notification.record_key)
                self._command_records[command.id] = where
                self._commands.append(command)
        elif isinstance(notification, Crashed):
            self.crashed = notification.error
        for changed in self._watchers:
            changed()

    def _restored(self, restored: Restored) -> None:
        """Take a restored partition in: each key's state is decoded now (one per key), its
        snapshot and parked items when the key is loaded."""
        partition = restored.lease.partition
        keys = restored.keys
        self._forget({partition})  # whatever an earlier lease of it left: this is the picture
        for key in keys.names():
            try:
                state = keys.state(key)
            except NewerRelease as exc:
                # Told by the engine when it loads the key (rate-limited): it waits there.
                self._newer[key] = str(exc)
                continue
            except StateCorrupted as exc:
                self.crashed = exc  # as when the thread could not read it: the store stops
                return
            # A takeover: whatever still holds the previous epoch can no longer commit.
            self._states[key] = replace(state, epoch=state.epoch + 1)
        self._raw[partition] = keys
        self._owned[partition] = restored.lease.generation
        self._catch_up(keys, partition, restored.lease.generation)
        self._command_records.update({c.id: (partition, k) for k, c in keys.commands.items()})
        self._commands.extend(keys.pending_commands())
        self.observer.restore_done(partition, len(keys.states), restored.records, restored.seconds)

    def _catch_up(self, keys: RestoredKeys, partition: int, generation: int) -> None:
        """Write at once the picture of each key whose restored state was rolled forward over
        events it had published (see :mod:`.catchup_rule`): ahead of anything the engine
        commits on the partition, so the events stay accounted for after the next restore."""
        io = self._io
        for key in keys.names():
            missed = keys.missed(key)
            state = self._states.get(key)
            if not missed or state is None or io is None:  # None: closing; the next owner will
                continue
            try:
                snapshot, _ = self._taken(key)  # rolled forward as it is taken
            except (NewerRelease, StateCorrupted) as exc:
                log.warning("%s: cannot roll its snapshot forward: %s", key, exc)
                continue
            log.warning(
                "%s: its stored state missed %d event(s) it had published (sequence %d to %d):"
                " a transaction's state records were lost while its events were committed (as"
                " when a hanging transaction is aborted); its sequence and snapshot are rolled"
                " forward over them, so they are not published again",
                key,
                len(missed),
                missed[0].sequence,
                missed[-1].sequence,
            )
            self.observer.state_caught_up(state.poller, state.partition, len(missed))
            upserts = {event.subject: snapshot[event.subject] for event in missed}
            out = self._require_outgoing().of(KeyCommit(state=state, upserts=upserts), partition)
            done = partial(self._caught_up, key, upserts)
            io.submit(CommitRequest(out, {partition: generation}, self._hop(done)))

    def _caught_up(
        self, key: str, upserts: dict[str, SnapshotEntry], error: BaseException | None
    ) -> None:
        if error is not None and key in self._states:
            log.warning(
                "%s: writing its rolled-forward snapshot failed (%s); its next commit carries it",
                key,
                error,
            )
            self._rolled[key] = upserts

    def _revoked(self, revoked: Revoked) -> None:
        self.observer.leases_lost(revoked.partitions, revoked.lost)
        gone = set(revoked.partitions)
        for partition in gone:
            self._owned.pop(partition, None)
        self._forget(gone)

    def _forget(self, partitions: set[int]) -> None:
        """Drop the picture of every key of ``partitions``, decoded or still raw."""
        for partition in partitions:
            self._raw.pop(partition, None)
        gone = [i for i, (p, _) in self._command_records.items() if p in partitions]
        for command_id in gone:
            del self._command_records[command_id]
        held = self._states.keys() | self._snapshots.keys() | self._newer.keys()
        for key in [k for k in held if self._partition_of_key(k) in partitions]:
            self._states.pop(key, None)
            self._snapshots.pop(key, None)
            self._parked.pop(key, None)
            self._newer.pop(key, None)
            self._rolled.pop(key, None)

    def _transacted(self, done: Transacted) -> None:
        kind = None if done.error is None else outcome_kind(done.error)
        self.observer.transaction_done(done.error is None, done.seconds, done.records, kind)

    def _partition_of_key(self, key: str) -> int:
        return partition_for(key, self.layout.partitions)

    def _events_of(self, poller: str) -> tuple[str, int] | None:
        """(Called on the Kafka thread.) ``poller``'s events topic and its partition count."""
        topic = self._event_topics.get(poller)
        info = None if topic is None else self.topics.get(topic)
        return None if info is None else (info.name, info.partitions)

    # -- the Store protocol -------------------------------------------------------------------

    async def load(self, poller: str, partition: str) -> StoredKey | None:
        key = key_text(poller, partition)
        if not self.owns(poller, partition):
            raise Fenced(f"{key}: owned by another instance")
        state = self._states.get(key)
        if state is None:
            self._refuse_newer(key)
            return None
        snapshot, parked = self._taken(key)
        return StoredKey(state=state, snapshot=dict(snapshot), parked=dict(parked))

    def _taken(self, key: str) -> tuple[dict[str, SnapshotEntry], dict[str, ParkedItem]]:
        """The key's snapshot and parked items, decoded from the restore on first use.

        ``NewerRelease`` if one of them comes from a newer release: the key then waits like
        one whose state does (it is no longer loaded, polled or written here).
        """
        loaded = self._snapshots.get(key)
        if loaded is not None:
            return loaded, self._parked.get(key, {})
        self._refuse_newer(key)
        raw = self._raw.get(self._partition_of_key(key))
        try:
            snapshot, parked = ({}, {}) if raw is None else raw.take(key)
        except NewerRelease as exc:
            self._newer[key] = str(exc)
            self._states.pop(key, None)
            raise
        self._snapshots[key] = snapshot
        self._parked[key] = parked
        return snapshot, parked

    def _refuse_newer(self, key: str) -> None:
        reason = self._newer.get(key)
        if reason is not None:
            raise NewerRelease(reason)

    async def commit(self, batch: Sequence[KeyCommit]) -> None:
        outgoing = self._require_outgoing()
        leases: dict[int, int] = {}
        out: list[Record] = []
        for entry in batch:
            partition = self._partition_of_key(entry.key)
            generation = self._owned.get(partition)
            if generation is None:
                raise Fenced(f"{entry.key}: owned by another instance")
            self._taken(entry.key)  # NewerRelease: its newer value must survive this instance
            commit_rule.check_epoch(entry, self._states.get(entry.key))
            leases[partition] = generation
            rolled = self._rolled.get(entry.key)
            written = entry if rolled is None else replace(entry, upserts=rolled | entry.upserts)
            out.extend(outgoing.of(written, partition, self._command_keys(entry)))
        future = self._new_future()

        def done(error: BaseException | None) -> None:
            if error is None:
                for entry in batch:
                    for command_id in entry.commands:
                        self._command_records.pop(command_id, None)
                    self._rolled.pop(entry.key, None)
                    self._apply(entry)
                    if entry.parked:
                        state = entry.state
                        self.observer.dlq_written(state.poller, state.partition, len(entry.parked))
            _settle(future, error)

        await self._send(CommitRequest(out, leases, self._hop(done)), future)

    def unpublishable(self, event: Event) -> str | None:
        outgoing = self._outgoing
        return None if outgoing is None else outgoing.unpublishable(event)

    def _command_keys(self, entry: KeyCommit) -> list[bytes]:
        """The record keys of the commands ``entry`` applies: as received, or (one received
        before this instance started) where every sender writes it."""
        state = entry.state
        return [self._command_key(state.poller, state.partition, i) for i in entry.commands]

    def _command_key(self, poller: str, partition: str, command_id: str) -> bytes:
        where = self._command_records.get(command_id)
        return records.command_key(poller, partition, command_id) if where is None else where[1]

    async def remove(self, poller: str, partition: str, command: str | None = None) -> None:
        key = key_text(poller, partition)
        kafka_partition = self._partition_of_key(key)
        generation = self._owned.get(kafka_partition)
        if generation is None:
            raise Fenced(f"{key}: owned by another instance")
        identities, parked_ids = self._record_ids(key)
        out = self._require_outgoing().removal(
            poller, partition, kafka_partition, identities, parked_ids
        )
        if command is not None:
            record_key = self._command_key(poller, partition, command)
            out.append(Record(self.layout.state, record_key, None, kafka_partition))
        future = self._new_future()

        def done(error: BaseException | None) -> None:
            if error is None:
                if command is not None:
                    self._command_records.pop(command, None)
                self._states.pop(key, None)
                self._snapshots.pop(key, None)
                self._parked.pop(key, None)
                self._newer.pop(key, None)
                raw = self._raw.get(kafka_partition)
                if raw is not None:
                    raw.forget(key)
            _settle(future, error)

        await self._send(CommitRequest(out, {kafka_partition: generation}, self._hop(done)), future)

    def _record_ids(self, key: str) -> tuple[list[str], list[str]]:
        """Identities and parked ids of every record the key has (loaded or still raw)."""
        if key in self._snapshots:
            return list(self._snapshots[key]), list(self._parked.get(key, {}))
        raw = self._raw.get(self._partition_of_key(key))
        return ([], []) if raw is None else raw.record_ids(key)

    async def partitions(self, poller: str) -> list[str]:
        return [s.partition for s in self._states.values() if s.poller == poller]

    def written_topics(self) -> list[str]:
        """Every topic the runners write in transactions: the internal ones, and each bound
        poller's events and DLQ topics (where :mod:`.hanging` looks for hanging ones)."""
        pollers = sorted(self._event_topics)
        return [
            *self.layout.internal(),
            *(self._event_topics[p] for p in pollers),
            *(self.layout.dlq(p) for p in pollers),
        ]

    def states_of(self, poller: str) -> list[PartitionState]:
        """Restored and committed since: only keys of partitions this instance owns."""
        return [s for s in self._states.values() if s.poller == poller]

    def events(self, poller: str) -> KafkaEventFeed:
        """The poller's events as the whole group published them, read from its topic in the
        handlers' consumer group once someone listens (:mod:`watukuy.store.kafka.feed`)."""
        settings = self.settings

        def topic() -> str:
            known = self._pollers.get(poller)
            return self.layout.events(poller, None if known is None else known.topic)

        def config() -> dict[str, object]:
            group = settings.handlers_group_of(poller)
            return handlers_config(
                settings.kafka, group=group, session_timeout=settings.session_timeout
            )

        feed = KafkaEventFeed(
            poller, topic=topic, config=config, decoder=self._decoder, dead_letter=self._dead_letter
        )
        self._feeds.append(feed)
        if self._io is not None and self._loop is not None:
            feed.start(self._loop)
        return feed

    def _decoder(self) -> tuple[Decoder, Callable[[], None]]:
        """A decoder of events as this store writes them, and how to close it (in a thread)."""
        settings = self.settings
        resolver = SchemaTopicResolver(settings.kafka, self.layout.schemas)
        registry = None
        if settings.registry_url is not None:
            registry = registry_client(settings.registry_url, settings.registry_auth)
        return event_decoder(resolver, registry), resolver.close

    async def _dead_letter(self, item: ParkedItem) -> None:
        """A poison event whose key another instance holds: its DLQ copy, outside the key's
        transaction (the parked record belongs to the owner, so only the DLQ has it)."""
        record = self._require_outgoing().dlq(item, cursor="null")
        future = self._new_future()
        self._running().send_plain(record, self._hop(partial(_settle, future)))
        await future
        self.observer.dlq_written(item.poller, item.partition, 1)

    async def send_command(self, command: Command) -> None:
        kafka_partition = self.kafka_partition_of(command.poller, command.partition)
        record = Record(
            self.layout.state,
            records.command_key(command.poller, command.partition, command.id),
            records.encode_command(command),
            kafka_partition,
        )
        future = self._new_future()
        self._running().send_plain(record, self._hop(lambda error: _settle(future, error)))
        await future

    # -- commit plumbing ----------------------------------------------------------------------

    async def _send(self, request: CommitRequest, future: asyncio.Future[None]) -> None:
        self._running().submit(request)
        # Shielded: once submitted, the outcome is applied to the cache whatever the caller does.
        await asyncio.shield(future)

    def _apply(self, entry: KeyCommit) -> None:
        key = entry.key
        if self._partition_of_key(key) not in self._owned:
            return
        snapshot, parked = self._taken(key)
        self._states[key] = commit_rule.apply(entry, snapshot, parked)

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


def _observer_failed(observer: Observer, hook: str, error: Exception) -> None:
    log.error("observer %s failed in %s: %r", type(observer).__name__, hook, error)


def _settle(future: asyncio.Future[None], error: BaseException | None) -> None:
    if future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)
