"""Where the Kafka thread gets its clients and its time: passed in, never built inline.

- :class:`ClientFactory`: builds a producer or a consumer from a librdkafka config.
  :class:`ConfluentClients`, the default, builds confluent-kafka's; a test or the fault suite
  passes one that wraps them (``integration/faults/clients.py``), so an error at a chosen point
  of a transaction, or a lost assignment, happens deterministically and without any hook in
  this package.
- :class:`Clock`: ``monotonic()`` and ``sleep(seconds)``, :data:`SYSTEM_CLOCK` by default.
- :func:`new_producer`, :func:`group_consumer`, :func:`tail_consumer`: the store's clients
  from its settings (the configs themselves are :mod:`.clients`').
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any, Protocol

from confluent_kafka import Consumer, KafkaException, Producer

from watukuy.core.clock import SYSTEM_CLOCK, Clock, SystemClock
from watukuy.store.kafka import clients
from watukuy.store.kafka.settings import KafkaSettings

__all__ = [
    "SYSTEM_CLOCK",
    "ClientFactory",
    "Clock",
    "ConfluentClients",
    "SystemClock",
    "group_consumer",
    "init_transactions",
    "new_producer",
    "tail_consumer",
]


class ClientFactory(Protocol):
    """Builds the store's Kafka clients (a producer or consumer, or a subclass of one)."""

    def producer(self, config: dict[str, Any]) -> Producer: ...

    def consumer(self, config: dict[str, Any]) -> Consumer: ...


class ConfluentClients:
    """confluent-kafka's clients, as they are."""

    def producer(self, config: dict[str, Any]) -> Producer:
        return Producer(config)

    def consumer(self, config: dict[str, Any]) -> Consumer:
        return Consumer(config)


def new_producer(
    settings: KafkaSettings, factory: ClientFactory, *, initialised: bool = True
) -> Producer:
    """A transactional producer with a ``transactional.id`` of its own
    (:func:`.clients.fresh_transactional_id`), its transactions initialised unless
    ``initialised`` is false (then :func:`init_transactions` before its first use)."""
    s = settings
    suffix = s.runner_id if s.use_group else f"{s.runner_id}.cli"
    producer = factory.producer(
        clients.producer_config(
            s.kafka,
            transactional_id=clients.fresh_transactional_id(f"{s.group}.{suffix}"),
            transaction_timeout=s.transaction_timeout,
        )
    )
    if initialised:
        init_transactions(producer, settings)
    return producer


NUDGE = 1.0
"""Seconds the metadata request before ``init_transactions`` may take."""


def init_transactions(producer: Producer, settings: KafkaSettings) -> None:
    """Get the producer its id from the transaction coordinator (blocking).

    Two metadata requests first: librdkafka looks for the coordinator when it is asked to, and
    if no broker is connected yet then, again only 0.5 s later (a start in five here). The
    first request connects the bootstrap address, and its answer names the brokers, which the
    client then connects anew: the second goes to one of those, so one is up when the id is
    asked for (with one request, runners still waited at three starts of seven; with two, at
    none of 75 tries alone nor of six runner starts).
    Unanswered within :data:`NUDGE` (a broker down: the timer would have fired by then),
    ``init_transactions`` goes on and says why it fails."""
    with suppress(KafkaException):
        for _ in range(2):
            producer.list_topics(settings.layout.state, timeout=NUDGE)
    producer.init_transactions(max(30.0, settings.transaction_timeout * 3))


def group_consumer(
    settings: KafkaSettings, factory: ClientFactory, *, static: bool = True
) -> Consumer:
    """The member of the runners' group: it holds the leases and never reads. ``static``
    False: without ``group.instance.id`` even when the runner is a static member (its join
    then starts a rebalance, where a static member's would get its old assignment back)."""
    s = settings
    return factory.consumer(
        clients.group_config(
            s.kafka,
            group=s.group,
            session_timeout=s.session_timeout,
            instance_id=s.runner_id if s.static_membership and static else None,
        )
    )


def tail_consumer(
    settings: KafkaSettings, factory: ClientFactory, *, committed: bool = True
) -> Consumer:
    """An assigned (never joining) read_committed consumer; ``committed=False``: one that
    reads uncommitted records too, to see where the written end of a partition is."""
    s = settings
    config = clients.tail_config(s.kafka, group=f"{s.group}.tail.{s.runner_id}")
    if not committed:
        config["isolation.level"] = "read_uncommitted"
    return factory.consumer(config)
