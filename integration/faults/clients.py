"""Kafka clients that fail on purpose: the fault suite's :class:`ClientFactory`.

:class:`FaultyClients` builds confluent-kafka's real clients, wrapped so that the faults it is
given happen at a chosen point of a chosen transaction, the same way on every run. The store
gets it through its ``clients`` seam (``KafkaStore(..., clients=...)``, ``watukuy.runner.run
(config, clients=...)``); nothing of this lives in the connector.

A fault is ``ACTION@POINT[,after=N][,times=N|every][,seconds=S]`` (:func:`parse_fault`):

- ``POINT``: where in a transaction it strikes. ``begin`` (after ``begin_transaction``),
  ``produce`` (after the transaction's first record), ``send_offsets`` (after the group's
  offsets were added; only a runner in a group sends them), ``commit`` (the records sent,
  ``commit_transaction`` not called yet: "during commit"), ``committed``
  (``commit_transaction`` returned, the store not yet told: "after commit"), ``dlq`` (like
  ``commit``, but only in a transaction that carries a record of a ``<prefix>.dlq.*`` topic);
  ``grant`` is no transaction's: the credential store's produce of a grant record
  (``grant/<connector>/<tenant>`` on ``<prefix>.credentials``) that follows this runner's claim
  of the same tenant, i.e. the rotated grant a refresh saves once the provider has answered
  (or the refusal it saves instead). It strikes before the record is handed to librdkafka, so
  the claim is on Kafka, the provider has rotated the grant and the rotated one never reaches
  the store: the crash between the provider's answer and the store's write (issue 45).
- ``ACTION``: ``abortable`` raises a KafkaException whose error requires an abort;
  ``fatal`` raises a fatal one (``KafkaError(_FENCED, fatal=True)``), after which that
  producer refuses everything, as librdkafka's does; ``crash`` ends the process at once
  (``os._exit(137)``, as a SIGKILL would, with nothing flushed or closed); ``hold`` keeps the
  transaction open ``seconds`` before going on. Every action but at ``begin`` first flushes
  what was produced, so the open transaction really is on the broker when it strikes.
  ``lose-state`` (at ``begin`` only) drops the transaction's records of the state, items and
  parked topics, so its events commit and the keys' state does not: what an operator's abort
  of a transaction Kafka left half-marked leaves behind (a broker SIGKILL can do that).
- ``after=N``: the transactions to let through first (at ``grant``: the grant records after a
  claim to let through first). Only transactions that write to a topic
  other than ``<prefix>.schemas`` count (a runner writes its schemas outside transactions, with
  a producer of its own, but one older than issue 42 wrote them in transactions of their own),
  each once it ended; with ``dlq``, only those carrying a DLQ record. The fault strikes the
  first transaction begun after N counted ones ended.
- ``times``: how many transactions it strikes (1; ``every``: all from then on, the default
  for ``hold``).

Only ``crash`` and ``hold`` strike at ``grant``. ``abortable`` and ``fatal`` cannot be used at
``committed``: librdkafka reports nothing after
a commit that succeeded. A lost assignment is not a transaction fault: call
:meth:`FaultyClients.lose_assignment`; the group consumer then goes through its ``on_lost``
path on the Kafka thread, at its next poll, and joins the group again.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

__all__ = [
    "ACTIONS",
    "POINTS",
    "Fault",
    "FaultyClients",
    "parse_fault",
]

log = logging.getLogger("watukuy.faults")

POINTS = ("begin", "produce", "send_offsets", "commit", "committed", "dlq", "grant")
ACTIONS = ("abortable", "fatal", "crash", "hold", "lose-state")
WITH_EVENTS = " (with events)"
"""Ends the log line of a fault struck in a transaction that wrote events: a test that kills
a runner in a held transaction waits for one (most hold only state records: a poll that
moved a cursor, or an interval)."""
CRASH_EXIT = 137  # what a shell reports for a SIGKILLed process
FLUSH_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class Fault:
    action: str
    point: str
    after: int = 0
    times: int | None = 1  # None: every transaction from then on
    seconds: float = 0.0  # hold only

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"fault action {self.action!r}: must be one of {', '.join(ACTIONS)}")
        if self.point not in POINTS:
            raise ValueError(f"fault point {self.point!r}: must be one of {', '.join(POINTS)}")
        if self.after < 0:
            raise ValueError(f"fault after={self.after}: must be 0 or more")
        if self.times is not None and self.times < 1:
            raise ValueError(f"fault times={self.times}: must be 1 or more, or 'every'")
        if self.action == "hold" and self.seconds <= 0:
            raise ValueError("fault hold: needs seconds=S, more than 0")
        if self.action != "hold" and self.seconds:
            raise ValueError(f"fault {self.action}: seconds= is for hold only")
        if self.action == "lose-state" and self.point != "begin":
            raise ValueError("fault lose-state: strikes at begin only (lose-state@begin)")
        if self.point == "grant" and self.action not in ("crash", "hold"):
            raise ValueError(
                f"fault {self.action}@grant: a grant's write is no transaction's; use crash or hold"
            )
        if self.point == "committed" and self.action in ("abortable", "fatal"):
            raise ValueError(
                f"fault {self.action}@committed: librdkafka reports no error after a commit that "
                "succeeded; use crash or hold there"
            )

    def __str__(self) -> str:
        times = "every" if self.times is None else str(self.times)
        text = f"{self.action}@{self.point},after={self.after},times={times}"
        return text + (f",seconds={self.seconds:g}" if self.action == "hold" else "")


def parse_fault(spec: str) -> Fault:
    """``ACTION@POINT[,after=N][,times=N|every][,seconds=S]``; ValueError says what is wrong."""
    head, *options = [part.strip() for part in spec.split(",")]
    action, at, point = head.partition("@")
    if not at:
        raise ValueError(f"fault {spec!r}: must look like ACTION@POINT[,after=N][,times=N]")
    values: dict[str, str] = {}
    for option in options:
        name, eq, value = option.partition("=")
        if not eq or name not in ("after", "times", "seconds"):
            raise ValueError(f"fault {spec!r}: unknown option {option!r} (after, times, seconds)")
        values[name] = value
    try:
        after = int(values.get("after", "0"))
        seconds = float(values.get("seconds", "0"))
        times_text = values.get("times", "every" if action == "hold" else "1")
        times = None if times_text == "every" else int(times_text)
    except ValueError as exc:
        raise ValueError(f"fault {spec!r}: {exc}") from None
    return Fault(action, point, after=after, times=times, seconds=seconds)


@dataclass(slots=True)
class _Transaction:
    number: int  # 1 + counted transactions ended before it began
    dlq_number: int  # 1 + counted DLQ-carrying transactions ended before it began
    data: bool = False  # wrote to a topic other than the schemas topic
    dlq: bool = False  # wrote to a DLQ topic
    events: bool = False  # wrote to an events topic (a kill while it is held aborts events)
    struck: set[int] = field(default_factory=set)  # faults (by index) that struck it
    losing: bool = False  # lose-state struck: its state, items and parked records are dropped


class _Injector:
    """The faults and the transaction counts, shared by every producer of one factory."""

    def __init__(
        self, faults: Sequence[Fault], prefix: str, exit: Callable[[int], Any], sleep: Any
    ) -> None:
        self.faults = list(faults)
        self.prefix = prefix
        self.keyed_state = frozenset(f"{prefix}.{name}" for name in ("state", "items", "parked"))
        self._exit = exit
        self._sleep = sleep
        self._lock = threading.Lock()
        self._ended = 0
        self._dlq_ended = 0
        self._hits = [0] * len(self.faults)
        self._grants = 0  # grant records written after a claim of their tenant, so far
        self.credentials = f"{prefix}.credentials"
        self.struck: list[str] = []  # what was injected, in order (for tests and logs)

    def begin(self) -> _Transaction:
        with self._lock:
            return _Transaction(self._ended + 1, self._dlq_ended + 1)

    def noted(self, txn: _Transaction, topic: str) -> bool:
        """Note a record of ``topic``; True when it is the transaction's first counted one."""
        first = not txn.data and topic != f"{self.prefix}.schemas"
        if first:
            txn.data = True
        if topic.startswith(f"{self.prefix}.dlq."):
            txn.dlq = True
        if topic.startswith(f"{self.prefix}.events."):
            txn.events = True
        return first

    def ended(self, txn: _Transaction) -> None:
        with self._lock:
            self._ended += txn.data
            self._dlq_ended += txn.dlq

    def at(self, point: str, txn: _Transaction, producer: _FaultyProducer) -> None:
        for index, fault in enumerate(self.faults):
            if not self._due(index, fault, point, txn):
                continue
            txn.struck.add(index)
            self._hits[index] += 1
            what = f"{fault.action}@{fault.point} in transaction {txn.number}"
            self.struck.append(what)
            # A hold strikes every transaction: a line each would drown the log.
            log.log(
                logging.DEBUG if fault.action == "hold" else logging.WARNING,
                "injected fault: %s%s",
                what,
                WITH_EVENTS if txn.events else "",
            )
            if fault.action == "lose-state":
                txn.losing = True
            else:
                self._strike(fault, point, producer)

    def grant(self, tenant: str, producer: _FaultyProducer) -> None:
        """The store is about to write ``tenant``'s grant (``connector/tenant``) after this
        runner's claim of it: the ``grant`` faults due strike now, before the write."""
        with self._lock:
            self._grants += 1
            number = self._grants
        for index, fault in enumerate(self.faults):
            if fault.point != "grant" or number <= fault.after:
                continue
            if fault.times is not None and self._hits[index] >= fault.times:
                continue
            self._hits[index] += 1
            what = f"{fault.action}@grant of {tenant}, grant write {number} after a claim"
            self.struck.append(what)
            log.warning("injected fault: %s", what)
            self._strike(fault, "grant", producer)

    def _due(self, index: int, fault: Fault, point: str, txn: _Transaction) -> bool:
        if fault.times is not None and self._hits[index] >= fault.times:
            return False
        if index in txn.struck:
            return False
        if fault.point == "dlq":
            return point == "commit" and txn.dlq and txn.dlq_number > fault.after
        if fault.point != point:
            return False
        return txn.number > fault.after and (point == "begin" or txn.data)

    def _strike(self, fault: Fault, point: str, producer: _FaultyProducer) -> None:
        if point not in ("begin", "grant"):  # the open transaction's records on the broker first
            Producer.flush(producer, FLUSH_TIMEOUT)
        where = f"injected at {fault.point}"
        if fault.action == "hold":
            self._sleep(fault.seconds)
        elif fault.action == "crash":
            logging.shutdown()  # the log line above reaches the log before the process ends
            self._exit(CRASH_EXIT)
        elif fault.action == "abortable":
            raise KafkaException(
                # What librdkafka raises when records of the transaction failed delivery: not a
                # timeout, which the store meets with a new producer instead of an abort.
                KafkaError(
                    KafkaError._INCONSISTENT, f"{where} (abortable)", txn_requires_abort=True
                )
            )
        else:
            error = KafkaError(KafkaError._FENCED, f"{where} (fatal)", fatal=True)
            producer.fatal = error
            raise KafkaException(error)


class _FaultyProducer(Producer):
    """A real transactional producer that lets its injector strike, and, once it raised a
    fatal error, refuses everything after with that error (as librdkafka's does)."""

    def __init__(self, config: dict[str, Any], injector: _Injector) -> None:
        super().__init__(config)
        self._injector = injector
        self._txn: _Transaction | None = None
        self._claimed: set[str] = set()  # tenants (connector/tenant) claimed, grant not written
        self.fatal: KafkaError | None = None

    def _refuse_if_fatal(self) -> None:
        if self.fatal is not None:
            raise KafkaException(self.fatal)

    def begin_transaction(self, *args: Any) -> None:
        self._refuse_if_fatal()
        super().begin_transaction(*args)
        self._txn = self._injector.begin()
        self._injector.at("begin", self._txn, self)

    def produce(self, topic: str, *args: Any, **kwargs: Any) -> None:
        self._refuse_if_fatal()
        if topic == self._injector.credentials:
            self._credentials(kwargs["key"] if "key" in kwargs else args[1])
        txn = self._txn
        if txn is None or not txn.losing or topic not in self._injector.keyed_state:
            super().produce(topic, *args, **kwargs)
        if txn is not None and self._injector.noted(txn, topic):
            self._injector.at("produce", txn, self)

    def _credentials(self, key: bytes | str | None) -> None:
        """A record of the credential store: a claim notes its tenant; the grant record that
        follows it lets the ``grant`` faults strike first."""
        text = key.decode() if isinstance(key, bytes) else key or ""
        if text.startswith("claim/"):
            tenant, _, _serial = text.removeprefix("claim/").rpartition("/")
            self._claimed.add(tenant)
        elif text.startswith("grant/"):
            tenant = text.removeprefix("grant/")
            if tenant in self._claimed:
                self._claimed.discard(tenant)
                self._injector.grant(tenant, self)

    def send_offsets_to_transaction(self, *args: Any, **kwargs: Any) -> None:
        self._refuse_if_fatal()
        super().send_offsets_to_transaction(*args, **kwargs)
        if self._txn is not None:
            self._injector.at("send_offsets", self._txn, self)

    def commit_transaction(self, *args: Any) -> None:
        self._refuse_if_fatal()
        txn = self._txn
        if txn is not None:
            self._injector.at("commit", txn, self)
        super().commit_transaction(*args)
        self._txn = None
        if txn is not None:
            self._injector.ended(txn)
            self._injector.at("committed", txn, self)

    def abort_transaction(self, *args: Any) -> None:
        self._refuse_if_fatal()
        super().abort_transaction(*args)
        txn, self._txn = self._txn, None
        if txn is not None:
            self._injector.ended(txn)

    def flush(self, *args: Any) -> int:
        self._refuse_if_fatal()
        return super().flush(*args)


class _FaultyConsumer(Consumer):
    """A real consumer that remembers its subscription, so its assignment can be lost."""

    def __init__(self, config: dict[str, Any], swallow: Callable[[], bool] = lambda: False):
        super().__init__(config)
        self._subscription: tuple[list[str], dict[str, Any]] | None = None
        self._lose = threading.Event()
        self._swallow = swallow  # true once: hide a partition of the next assignment

    def subscribe(self, topics: list[str], *args: Any, **kwargs: Any) -> None:
        if args:
            raise TypeError("pass the rebalance callbacks by name")
        self._subscription = (list(topics), dict(kwargs))
        on_assign = kwargs.get("on_assign")
        if on_assign is not None:
            kwargs = kwargs | {"on_assign": self._hiding(on_assign)}
        super().subscribe(topics, **kwargs)

    def _hiding(self, on_assign: Callable[[Any, list[Any]], None]) -> Callable[..., None]:
        """``on_assign`` for a group consumer that, once asked to, keeps the first partition
        of an assignment to itself: assigned in librdkafka and in the group, never told to
        the runner, which therefore never holds it (the liveness guard's case)."""

        def assigned(consumer: Any, partitions: list[Any]) -> None:
            if partitions and self._swallow():
                hidden, partitions = partitions[:1], partitions[1:]
                consumer.incremental_assign(hidden)
                consumer.pause(hidden)
                log.warning("injected fault: partition %d assigned, not told", hidden[0].partition)
            on_assign(consumer, partitions)

        return assigned

    def lose(self) -> None:
        """At the next poll (on the thread that polls): what librdkafka does when the
        assignment is lost, ``on_lost`` then a fresh join."""
        self._lose.set()

    def poll(self, *args: Any, **kwargs: Any) -> Any:
        if self._lose.is_set() and self._subscription is not None:
            self._lose.clear()
            topics, callbacks = self._subscription
            lost = self.assignment()
            log.warning("injected fault: assignment lost (%d partition(s))", len(lost))
            on_lost = callbacks.get("on_lost")
            if on_lost is not None:
                on_lost(self, lost)
            # Leaving and joining again: the revocation this brings unassigns what was lost.
            self.unsubscribe()
            self.subscribe(topics, **callbacks)
        return super().poll(*args, **kwargs)


class FaultyClients:
    """A ClientFactory building real clients that strike with ``faults``.

    ``prefix`` is the runner's ``topics.prefix`` (which topics are schemas and DLQ topics);
    ``exit`` and ``sleep`` are what ``crash`` and ``hold`` call (``os._exit``, ``time.sleep``).
    """

    def __init__(
        self,
        faults: Sequence[Fault],
        *,
        prefix: str,
        exit: Callable[[int], Any] = os._exit,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._injector = _Injector(faults, prefix, exit, sleep)
        self._consumers: list[_FaultyConsumer] = []
        self._swallow = threading.Event()
        self.producers = 0  # transactional ones built so far (a fatal error makes another)

    @property
    def faults(self) -> list[Fault]:
        return self._injector.faults

    @property
    def struck(self) -> list[str]:
        """The faults injected so far, in order, e.g. ``abortable@commit in transaction 3``."""
        return list(self._injector.struck)

    def producer(self, config: dict[str, Any]) -> Producer:
        if "transactional.id" in config:  # not the command or credential stores' own
            self.producers += 1
        return _FaultyProducer(config, self._injector)

    def consumer(self, config: dict[str, Any]) -> Consumer:
        consumer = _FaultyConsumer(config, self._swallowing)
        self._consumers.append(consumer)
        return consumer

    def swallow_assignment(self) -> None:
        """The next non-empty assignment of a group consumer keeps its first partition from
        the runner (once): the group and librdkafka say the runner holds it, and it does not."""
        self._swallow.set()

    def _swallowing(self) -> bool:
        if not self._swallow.is_set():
            return False
        self._swallow.clear()
        return True

    def lose_assignment(self) -> None:
        """Every subscribed consumer loses its assignment at its next poll."""
        for consumer in self._consumers:
            if consumer._subscription is not None:
                consumer.lose()
