"""``<prefix>.configs``: connector configs and target states written through REST.

Like Kafka Connect's config topic, it holds two records per connector (a declarative poller):

- ``connector/<name>``: the config as the user wrote it, secrets kept as their ``${...}``
  placeholders (the caller passes the unresolved mapping; nothing here resolves anything);
- ``target/<name>``: the state it should be in, RUNNING, PAUSED or STOPPED.

It also holds ``logger/<name>``, a log level set with KIP-495's ``?scope=cluster``: every
instance applies each one it reads, in order, one that starts later included.

A put writes both in one Kafka transaction and a delete writes a tombstone for both, so a
``read_committed`` reader never sees one without the other. Every record goes to partition 0:
Connect requires a one-partition config topic for the same reason, a total order of changes
(the topic has ``topics.partitions`` like every internal topic; the others stay empty).

Every instance reads the whole topic (:class:`~watukuy.control.reader.TopicReader`) and keeps
the latest view. After :meth:`ConfigTopic.start` it calls its listeners once per change, in
the order written: on each ``target/<name>`` record, the last of a put's or delete's pair.

Each put numbers the connector's version (previous + 1, written in both records), so an
optimistic writer can pass the version it read and get :class:`Conflict` if it moved. The check
is against this instance's latest view: best effort, as in Connect, since two instances can
still race between reading and writing.

Values are JSON (UTF-8, sorted keys) with a ``format_version``: a config is arbitrary JSON
anyway, and an operator can read the topic with any console consumer, as Connect's is.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka import Message as KafkaMessage

from watukuy.control.configrecords import (
    CONNECTOR_PREFIX,
    FORMAT_VERSION,
    LOGGER_PREFIX,
    TARGET_PREFIX,
    Record,
    check_name,
    check_target,
    decode_record,
    encode_connector,
    encode_logger,
    encode_target,
)
from watukuy.control.reader import Message, TopicReader
from watukuy.core.errors import Conflict as CoreConflict
from watukuy.core.errors import Retriable, StateCorrupted, WatukuyError
from watukuy.core.lifecycle import Target
from watukuy.store.kafka import clients
from watukuy.store.kafka.topics import TopicLayout

__all__ = [
    "FORMAT_VERSION",
    "ConfigTopic",
    "Conflict",
    "Connector",
    "Listener",
    "LoggerListener",
    "UnknownConnector",
    "decode_record",
    "encode_connector",
    "encode_logger",
    "encode_target",
]

log = logging.getLogger("watukuy.control")

PARTITION = 0  # every record: one total order of changes

Listener = Callable[[str, Mapping[str, Any] | None, Target | None], None]
"""``on_change(name, config, target)``; ``config`` and ``target`` are ``None`` once deleted."""
LoggerListener = Callable[[str, str], None]
"""``on_level(logger, level)``: a cluster-scoped log level, Connect's level name."""


class Conflict(CoreConflict):
    """The connector changed since the version the caller read: read it again, then retry."""


class UnknownConnector(WatukuyError, LookupError):
    """No connector of that name in the configs topic."""


@dataclass(frozen=True, slots=True)
class Connector:
    name: str
    config: Mapping[str, Any] | None  # None: a target record without its config
    target: Target
    version: int


class ConfigTopic:
    """Reads and writes ``<prefix>.configs``; see the module's text.

    Writes use a transactional producer of their own, its ``transactional.id``
    ``<group>.<runner_id>.configs.<random>``, new after any transaction that did not commit
    (why: :func:`watukuy.store.kafka.clients.fresh_transactional_id`).
    ``timeout`` bounds reaching the cluster and each transaction.
    """

    def __init__(
        self,
        kafka: Mapping[str, Any],
        layout: TopicLayout,
        *,
        runner_id: str,
        group: str | None = None,
        timeout: float = 15.0,
        transaction_timeout: float = 10.0,
        on_change: Listener | None = None,
    ) -> None:
        self.topic = layout.configs
        self._kafka = kafka
        self._timeout = timeout
        self._transaction_timeout = transaction_timeout
        group = group or f"{layout.prefix}.runners"
        self._transactional_prefix = f"{group}.{runner_id}.configs"
        self._reader = TopicReader(
            kafka,
            self.topic,
            group=f"{group}.configs.{runner_id}",
            apply=self._apply,
            timeout=timeout,
        )
        self._listeners: list[Listener] = [] if on_change is None else [on_change]
        self._logger_listeners: list[LoggerListener] = []
        self._loggers: dict[str, str] = {}  # in the order last written: the order to apply
        self._view: dict[str, Connector] = {}
        self._configs: dict[str, tuple[dict[str, Any], int]] = {}
        self._versions: dict[str, int] = {}  # highest seen, deleted connectors included
        self._live = False
        self._producer: Producer | None = None
        self._write = asyncio.Lock()

    async def start(self) -> None:
        """Read the topic to its end as of now (the view is then current), then keep tailing."""
        await self._reader.start(on_caught_up=self._go_live)

    async def stop(self) -> None:
        await self._reader.stop()
        self._producer = None

    def listen(self, listener: Listener) -> None:
        """Call ``listener(name, config, target)`` on the loop for each change after start, in
        order. It must not block (start a task for slow work); what it raises is logged."""
        self._listeners.append(listener)

    def listen_loggers(self, listener: LoggerListener) -> None:
        """Call ``listener(logger, level)`` on the loop for each cluster-scoped level read
        after start, in order; :meth:`loggers` has the ones read before."""
        self._logger_listeners.append(listener)

    # -- reading ----------------------------------------------------------------------------

    def view(self) -> dict[str, tuple[Mapping[str, Any] | None, Target]]:
        """``{name: (config, target)}`` of every connector, as last read."""
        return {n: (copy.deepcopy(c.config), c.target) for n, c in sorted(self._view.items())}

    def get(self, name: str) -> Connector | None:
        found = self._view.get(name)
        if found is None:
            return None
        return Connector(found.name, copy.deepcopy(found.config), found.target, found.version)

    def loggers(self) -> list[tuple[str, str]]:
        """``(logger, level)`` of every cluster-scoped level, in the order last written: applied
        in this order, they leave each logger as applying every record would."""
        return list(self._loggers.items())

    def version(self, name: str) -> int:
        """The connector's current version; 0 when there is none."""
        found = self._view.get(name)
        return 0 if found is None else found.version

    # -- writing ----------------------------------------------------------------------------

    async def put(
        self,
        name: str,
        config: Mapping[str, Any],
        target: str,
        *,
        expected_version: int | None = None,
    ) -> int:
        """Write ``config`` (unresolved: ``${...}`` placeholders as written) and ``target`` in
        one transaction; return the new version once this instance has read it back.

        ``expected_version``: the version the caller read (0: the connector must not exist);
        :class:`Conflict` if it moved.
        """
        check_name(name)
        target = check_target(target)
        async with self._write:
            self._check_version(name, expected_version)
            version = max(self.version(name), self._versions.get(name, 0)) + 1
            records = [
                (f"{CONNECTOR_PREFIX}{name}".encode(), encode_connector(name, config, version)),
                (f"{TARGET_PREFIX}{name}".encode(), encode_target(name, target, version)),
            ]
            end = await asyncio.to_thread(self._transact, records, f"writing connector '{name}'")
            await self._read_back(end, f"connector '{name}'")
        return version

    async def set_target(
        self, name: str, target: str, *, expected_version: int | None = None
    ) -> int:
        """Pause, resume or stop: the current config again, with ``target``."""
        found = self.get(name)
        if found is None or found.config is None:
            raise UnknownConnector(f"no connector '{name}'")
        if expected_version is None:
            expected_version = found.version
        return await self.put(name, found.config, target, expected_version=expected_version)

    async def put_target(self, name: str, target: str) -> int:
        """A target alone, for a poller from a runner's config file: its config is not here
        (nor writable over REST), but pausing or stopping it must reach every instance."""
        check_name(name)
        target = check_target(target)
        async with self._write:
            version = max(self.version(name), self._versions.get(name, 0)) + 1
            records = [(f"{TARGET_PREFIX}{name}".encode(), encode_target(name, target, version))]
            end = await asyncio.to_thread(self._transact, records, f"writing target of '{name}'")
            await self._read_back(end, f"connector '{name}'")
        return version

    async def put_logger(self, name: str, level: str) -> None:
        """A cluster-scoped log level, for every instance; returns once this one applied it."""
        records = [(f"{LOGGER_PREFIX}{name}".encode(), encode_logger(name, level))]
        async with self._write:
            end = await asyncio.to_thread(self._transact, records, f"writing logger '{name}'")
            await self._read_back(end, f"logger '{name}'")

    async def delete(self, name: str, *, expected_version: int | None = None) -> bool:
        """Tombstone both records in one transaction; ``False`` when there was nothing."""
        check_name(name)
        async with self._write:
            self._check_version(name, expected_version)
            if name not in self._view and name not in self._configs:
                return False
            records = [
                (f"{CONNECTOR_PREFIX}{name}".encode(), None),
                (f"{TARGET_PREFIX}{name}".encode(), None),
            ]
            end = await asyncio.to_thread(self._transact, records, f"deleting connector '{name}'")
            await self._read_back(end, f"connector '{name}'")
        return True

    def _check_version(self, name: str, expected: int | None) -> None:
        current = self.version(name)
        if expected is None or expected == current:
            return
        if expected == 0:
            raise Conflict(f"connector '{name}' already exists")
        if current == 0:
            raise Conflict(f"connector '{name}' was deleted meanwhile")
        raise Conflict(
            f"connector '{name}' changed meanwhile (version {current}, not {expected}); "
            "read it again and retry"
        )

    def _transact(self, records: Sequence[tuple[bytes, bytes | None]], doing: str) -> int:
        """On a worker thread: one transaction holding ``records``, all on :data:`PARTITION`;
        return the offset just past them."""
        producer = self._producer or self._new_producer(doing)
        offsets: list[int] = []
        failures: list[str] = []

        def delivered(error: KafkaError | None, message: KafkaMessage) -> None:
            if error is not None:
                failures.append(error.str())
            elif (offset := message.offset()) is not None:
                offsets.append(offset)

        try:
            producer.begin_transaction()
            for key, value in records:
                producer.produce(
                    self.topic, key=key, value=value, partition=PARTITION, on_delivery=delivered
                )
            producer.flush(self._timeout)  # serves the delivery reports: the offsets
            if failures or len(offsets) < len(records):
                self._abort(producer)
                why = failures[0] if failures else "not delivered in time"
                raise Retriable(f"Kafka failed {doing}: {why}")
            producer.commit_transaction(self._timeout)
        except KafkaException as exc:
            if not exc.args[0].fatal():
                self._abort(producer)
            self._producer = None  # never used again after a transaction that did not commit
            raise Retriable(f"Kafka failed {doing}: {exc.args[0].str()}") from exc
        return max(offsets) + 1

    def _abort(self, producer: Producer) -> None:
        """End the transaction now (else it ends at its timeout) and drop the producer."""
        self._producer = None
        with contextlib.suppress(KafkaException):  # librdkafka #4849: the abort can fail too
            producer.abort_transaction(self._timeout)

    async def _read_back(self, end: int, what: str) -> None:
        """Wait until this instance's view holds the write: callers read their writes."""
        try:
            async with asyncio.timeout(self._timeout):
                await self._reader.caught_up_to({PARTITION: end})
        except TimeoutError:
            raise Retriable(
                f"{what} was written but cannot be read back yet: an open "
                f"transaction on {self.topic} holds readers back; it shows once that one ends"
            ) from None

    def _new_producer(self, doing: str) -> Producer:
        producer = Producer(
            clients.producer_config(
                self._kafka,
                transactional_id=clients.fresh_transactional_id(self._transactional_prefix),
                transaction_timeout=self._transaction_timeout,
            )
        )
        try:
            producer.init_transactions(self._timeout)
        except KafkaException as exc:
            raise clients.translated(exc, self._kafka, self._timeout, doing) from exc
        self._producer = producer
        return producer

    # -- applying what was read (on the loop) -----------------------------------------------

    def _go_live(self) -> None:
        self._live = True

    def _apply(self, batch: list[Message]) -> None:
        for message in batch:
            try:
                record = decode_record(message.key, message.value)
            except StateCorrupted as exc:
                log.warning(
                    "%s[%d]@%d skipped: %s", self.topic, message.partition, message.offset, exc
                )
                continue
            if record is not None:
                self._apply_record(record)

    def _apply_record(self, record: Record) -> None:
        name, value = record.name, record.value
        if record.kind == "logger":
            self._apply_logger(name, value)
            return
        if value is not None:
            self._versions[name] = max(self._versions.get(name, 0), value["version"])
        if record.kind == "connector":
            # The target record of the same transaction follows: the change shows with it.
            if value is None:
                self._configs.pop(name, None)
            else:
                self._configs[name] = (value["config"], value["version"])
            return
        before = self._view.get(name)
        after: Connector | None = None
        if value is None:
            self._view.pop(name, None)
            if before is None:
                return
        else:
            stored = self._configs.get(name)
            after = Connector(
                name,
                None if stored is None else stored[0],
                Target(value["target"]),
                value["version"],
            )
            self._view[name] = after
            if after == before:
                return
        if self._live:
            self._notify(name, after)

    def _apply_logger(self, name: str, value: dict[str, Any] | None) -> None:
        self._loggers.pop(name, None)  # re-inserted last: the order is the order written
        if value is None:  # never written by watukuy; an operator's tombstone forgets it
            return
        self._loggers[name] = value["level"]
        for listener in list(self._logger_listeners) if self._live else []:
            try:
                listener(name, value["level"])
            except Exception:
                log.exception("a configs listener failed on logger '%s'", name)

    def _notify(self, name: str, after: Connector | None) -> None:
        for listener in list(self._listeners):
            config = None if after is None else copy.deepcopy(after.config)
            try:
                listener(name, config, None if after is None else after.target)
            except Exception:
                log.exception("a configs listener failed on connector '%s'", name)
