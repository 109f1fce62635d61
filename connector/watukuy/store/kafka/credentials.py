"""Rotated grants and refresh claims in the compacted ``<prefix>.credentials`` topic.

Records of one tenant (``connector/tenant``) all go to the partition
``murmur2("connector/tenant") % P``, so grants and claims of a tenant are totally ordered:

- ``grant/<connector>/<tenant>``: the grant, AES-256-GCM under the record key
  (:mod:`watukuy.store.credentials.cipher`), its key's id in the ``key-id`` header;
- ``claim/<connector>/<tenant>/<serial>``: a :class:`~watukuy.core.grants.Claim`, plain JSON
  (it names no token).

A tail thread reads every partition from the beginning into memory, for as long as the store
runs; ``load`` and ``claimed`` answer from that view. The first claim for a serial is the first
in its partition's log, so ``claim`` produces, waits for the broker's offset, waits until the
tail has read past it, and answers the first claim the tail saw: every runner on the topic gets
the same answer. The view is changed on the event loop only (the thread hands batches over), so
it needs no lock. It lives in :mod:`watukuy.store.kafka` because the store's generic modules know
nothing of Kafka (the import contracts).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from watukuy.core.errors import ConfigError, Retriable, StateCorrupted
from watukuy.core.grants import Claim, Grant, GrantRef
from watukuy.store.credentials.cipher import Cipher, Undecryptable
from watukuy.store.kafka import clients
from watukuy.store.kafka.credential_records import (
    CLAIM,
    GRANT,
    KEY_ID_HEADER,
    Read,
    settle,
    tail,
)
from watukuy.store.kafka.factory import SYSTEM_CLOCK, ClientFactory, ConfluentClients
from watukuy.store.kafka.offsets import end_offset
from watukuy.store.kafka.partitioner import partition_for
from watukuy.store.kafka.topics import BrokerUnavailable, TopicLayout, ensure_credentials_topic

__all__ = ["KEY_ID_HEADER", "KafkaCredentials"]

_log = logging.getLogger("watukuy.credentials")


@dataclass(frozen=True, slots=True)
class _Unreadable:
    why: str  # names a key id at most, never a key or a token


class KafkaCredentials:
    """The credential store on ``layout.credentials``. ``kafka``: the runner's librdkafka
    properties; ``cipher``: its keys, ``None`` for a claim log alone (the HTTP store's: grant
    records are then neither read nor written); ``timeout``: how long start, a write and a claim's
    read-back may take before they fail (``Retriable``, or ``BrokerUnavailable`` at start)."""

    def __init__(
        self,
        kafka: Mapping[str, Any],
        layout: TopicLayout,
        cipher: Cipher | None,
        *,
        clients: ClientFactory | None = None,
        timeout: float = 30.0,
    ) -> None:
        self._kafka = kafka
        self._layout = layout
        self._topic = layout.credentials
        self._cipher = cipher
        self._clients = clients or ConfluentClients()
        self._timeout = timeout
        self._grants: dict[GrantRef, tuple[int, Grant | _Unreadable]] = {}
        self._claims: dict[tuple[GrantRef, int], Claim] = {}
        self._read: dict[int, int] = {}  # partition -> next offset the tail will read
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._partitions = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._consumer: Consumer | None = None
        self._producer: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"KafkaCredentials(topic={self._topic!r}, cipher={self._cipher!r})"

    # -- the protocol -------------------------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        try:
            await self._open()
        except BaseException:
            await self.close()
            raise
        unreadable = next(
            ((ref, e) for ref, (_, e) in self._grants.items() if isinstance(e, _Unreadable)),
            None,
        )
        if unreadable is not None:
            await self.close()
            raise self._keys_error(*unreadable)

    async def load(self, ref: GrantRef) -> Grant | None:
        entry = self._grants.get(ref)
        if entry is None:
            return None
        if isinstance(entry[1], _Unreadable):
            raise self._keys_error(ref, entry[1])
        return entry[1]

    async def save(self, ref: GrantRef, grant: Grant) -> None:
        if self._cipher is None:
            raise ConfigError("is required to keep grants in Kafka", "credentials.key")
        key = f"{GRANT}{ref.key}".encode()
        kid, value = self._cipher.encrypt(json.dumps(grant.to_json()).encode(), key)
        _, offset = await self._produce(ref, key, value, kid)
        # The tail may have read a newer record of this ref already (another runner's).
        if offset > self._grants.get(ref, (-1, None))[0]:
            self._grants[ref] = (offset, grant)

    async def claim(self, claim: Claim) -> Claim:
        key = f"{CLAIM}{claim.ref.key}/{claim.serial}".encode()
        partition, offset = await self._produce(
            claim.ref, key, json.dumps(claim.to_json()).encode()
        )
        await self._read_past({partition: offset})
        return self._claims.get((claim.ref, claim.serial), claim)

    async def claimed(self, ref: GrantRef, serial: int) -> Claim | None:
        return self._claims.get((ref, serial))

    async def close(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            await asyncio.to_thread(thread.join, 10)
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            await asyncio.to_thread(consumer.close)
        producer, self._producer = self._producer, None
        if producer is not None:
            await asyncio.to_thread(producer.flush, 5)
        for _, _, waiter in self._waiters:
            if not waiter.done():
                waiter.set_exception(Retriable(f"the credential store on {self._topic} closed"))
        self._waiters = []

    # -- start --------------------------------------------------------------------------------

    async def _open(self) -> None:
        info = await asyncio.to_thread(self._ensure_topic)
        self._partitions = info.partitions
        self._producer = self._clients.producer(
            clients.idempotent_config(self._kafka) | {"acks": "all"}
        )
        # Assigned, never joining: the group id is required by librdkafka and never used.
        group = f"{self._layout.prefix}.credentials.tail.{uuid.uuid4().hex[:12]}"
        consumer = self._clients.consumer(clients.tail_config(self._kafka, group=group))
        self._consumer = consumer
        ends = await asyncio.to_thread(self._ends, consumer)
        consumer.assign(
            [TopicPartition(self._topic, p, OFFSET_BEGINNING) for p in range(self._partitions)]
        )
        loop = asyncio.get_running_loop()

        def hand_over(batch: list[Read]) -> None:  # the view changes on the loop only
            loop.call_soon_threadsafe(self._apply, batch)

        self._thread = threading.Thread(
            target=tail,
            args=(consumer, self._topic, self._stop, hand_over),
            name="watukuy-credentials",
            daemon=True,
        )
        self._thread.start()
        # Read to the ends fixed now: every grant saved before this start is in the view.
        try:
            await self._read_past({p: end - 1 for p, end in ends.items() if end > 0})
        except Retriable as exc:
            raise BrokerUnavailable(f"{exc} (at start)") from None

    def _ensure_topic(self) -> Any:
        admin = clients.admin_client(self._kafka)
        try:
            return ensure_credentials_topic(
                admin,
                self._layout,
                timeout=self._timeout,
                bootstrap=clients.bootstrap_of(self._kafka),
            )
        except BrokerUnavailable as exc:
            raise clients.unreachable(self._kafka, self._timeout) from exc
        finally:
            clients.drain_logs(admin)

    def _ends(self, consumer: Consumer) -> dict[int, int]:
        # end_offset waits for the leaders of a topic created a moment ago.
        return {
            p: end_offset(consumer, TopicPartition(self._topic, p), SYSTEM_CLOCK, self._timeout)
            for p in range(self._partitions)
        }

    def _keys_error(self, ref: GrantRef, entry: _Unreadable) -> ConfigError:
        return ConfigError(
            f"the stored grant of {ref.key!r} in {self._topic} cannot be read: {entry.why}; "
            "give the key it was written with (keys: [new, old] reads both)",
            "credentials.keys",
        )

    # -- writes -------------------------------------------------------------------------------

    async def _produce(
        self, ref: GrantRef, key: bytes, value: bytes, kid: str | None = None
    ) -> tuple[int, int]:
        """``(partition, offset)`` of the record, once the broker acknowledged it (acks=all)."""
        if self._producer is None or self._loop is None:
            raise Retriable("the credential store is not started")
        loop, future = self._loop, self._loop.create_future()
        partition = partition_for(ref.key, self._partitions)

        def delivered(error: KafkaError | None, message: Any) -> None:
            offset = None if error is not None else message.offset()
            loop.call_soon_threadsafe(settle, future, error, offset, self._topic)

        headers = [(KEY_ID_HEADER, kid.encode())] if kid is not None else None
        self._producer.produce(
            self._topic, value, key, partition=partition, headers=headers, on_delivery=delivered
        )
        remaining = await asyncio.to_thread(self._producer.flush, self._timeout)
        if remaining and not future.done():
            raise Retriable(
                f"a write to {self._topic} was not acknowledged within {self._timeout:g}s"
            )
        return partition, await asyncio.wait_for(future, self._timeout)

    async def _read_past(self, offsets: Mapping[int, int]) -> None:
        """Until the tail has read past ``offsets`` (partition -> offset)."""
        waiting = []
        for partition, offset in offsets.items():
            if self._read.get(partition, 0) > offset:
                continue
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append((partition, offset, future))
            waiting.append(future)
        if not waiting:
            return
        try:
            await asyncio.wait_for(asyncio.gather(*waiting), self._timeout)
        except TimeoutError:
            raise Retriable(f"{self._topic} was not read back within {self._timeout:g}s") from None

    # -- the tail -----------------------------------------------------------------------------

    def _apply(self, batch: list[Read]) -> None:
        for read in batch:
            if read.key is not None:
                self._apply_record(read)
            self._read[read.partition] = max(self._read.get(read.partition, 0), read.next_offset)
        kept = []
        for partition, offset, future in self._waiters:
            if future.done():
                continue
            if self._read.get(partition, 0) > offset:
                future.set_result(None)
            else:
                kept.append((partition, offset, future))
        self._waiters = kept

    def _apply_record(self, read: Read) -> None:
        assert read.key is not None
        key = read.key.decode("utf-8", "replace")
        offset = read.next_offset - 1
        if key.startswith(GRANT) and self._cipher is not None:
            ref = GrantRef.parse(key.removeprefix(GRANT))
            if offset <= self._grants.get(ref, (-1, None))[0]:
                return
            if read.value is None:  # a tombstone: the grant was deleted
                self._grants.pop(ref, None)
                return
            self._grants[ref] = (offset, self._grant_of(read))
        elif key.startswith(CLAIM) and read.value is not None:
            try:
                claim = Claim.from_json(json.loads(read.value))
            except (ValueError, StateCorrupted):
                _log.warning("skipped a claim record of %s that is not one (%s)", self._topic, key)
                return
            self._claims.setdefault((claim.ref, claim.serial), claim)

    def _grant_of(self, read: Read) -> Grant | _Unreadable:
        assert read.key is not None and read.value is not None and self._cipher is not None
        try:
            plain = self._cipher.decrypt(read.key_id, read.value, read.key)
        except Undecryptable as exc:
            return _Unreadable(str(exc))
        try:
            return Grant.from_json(json.loads(plain))
        except (ValueError, StateCorrupted) as exc:  # names fields, never values
            return _Unreadable(f"decrypted but not a grant: {exc}")
