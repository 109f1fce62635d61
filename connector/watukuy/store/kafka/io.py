"""The Kafka thread: every librdkafka call of a store happens here, one at a time, in order.

librdkafka's clients are blocking and call back from inside ``poll()``. Keeping them on one
thread makes the hard cases simple: a rebalance callback never runs while a transaction is in
flight, because both happen on this thread between each other; a revocation can finish the
pending commits of the partitions it gives back before letting them go.

The thread talks to the event loop only through :meth:`KafkaIO.submit` (commit requests,
thread-safe) and the ``notify`` callback it was given (called on this thread; the store hops
to its loop). Its parts, each in a module of its own:

- :mod:`.rebalance`: the group's callbacks and the leases they grant and take back;
- :mod:`.tail`: restores of assigned partitions, then the commands sent to them;
- :mod:`.catchup`: after a restore, the events its keys published beyond their states;
- :mod:`.transactions`: commit requests and plain records, sent in transactions;
- :mod:`.factory`: the clients and the clock, passed in (a test injects faults there).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Sequence

from confluent_kafka import Consumer, KafkaException

from watukuy.core.errors import Retriable, WatukuyError
from watukuy.observe import startup
from watukuy.store.kafka.catchup import EventsCatchUp, EventsOf
from watukuy.store.kafka.clients import bootstrap_of
from watukuy.store.kafka.disk import DiskCopy
from watukuy.store.kafka.factory import (
    SYSTEM_CLOCK,
    ClientFactory,
    Clock,
    ConfluentClients,
    group_consumer,
    init_transactions,
    new_producer,
    tail_consumer,
)
from watukuy.store.kafka.lease import Leases
from watukuy.store.kafka.notifications import (
    Assigned,
    CommandReceived,
    CommitRequest,
    Crashed,
    Notification,
    Notify,
    Record,
    Restored,
    Revoked,
    Transacted,
)
from watukuy.store.kafka.offsets import watermarks
from watukuy.store.kafka.rebalance import Membership
from watukuy.store.kafka.served import Served, served_of
from watukuy.store.kafka.settings import KafkaSettings
from watukuy.store.kafka.standby import Roster, Standbys
from watukuy.store.kafka.tail import Restores
from watukuy.store.kafka.transactions import Done, Requests, Transactions

__all__ = [
    "Assigned",
    "CommandReceived",
    "CommitRequest",
    "Crashed",
    "KafkaIO",
    "Notification",
    "Record",
    "Restored",
    "Revoked",
    "Transacted",
]

log = logging.getLogger("watukuy.kafka")


class _Parts:
    """What the thread builds once its clients exist."""

    def __init__(self, restores: Restores, transactions: Transactions, membership: Membership):
        self.restores = restores
        self.transactions = transactions
        self.membership = membership


class KafkaIO:
    def __init__(
        self,
        settings: KafkaSettings,
        notify: Notify,
        *,
        clients: ClientFactory | None = None,
        clock: Clock | None = None,
        events_of: EventsOf = lambda poller: None,
        disk: DiskCopy | None = None,
        roster: Roster | None = None,
    ) -> None:
        """``events_of``: a poller's events topic and its partition count (read on this
        thread; ``None`` for a poller this runner does not know). ``disk``: the local state
        store, used (and closed) on this thread only. ``roster``: who owns what in the group,
        which standbys are chosen from (none without it)."""
        self.settings = settings
        self._disk = disk
        self._roster = roster
        self._notify = notify
        self._events_of = events_of
        self._clients: ClientFactory = clients or ConfluentClients()
        self._clock: Clock = clock or SYSTEM_CLOCK
        self._leases = Leases()
        self._requests = Requests()
        self._acquire: deque[int] = deque()
        self._replace: bool | None = None  # replace_member() was asked for (rebalance or not)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.ready = threading.Event()
        self.startup_error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="watukuy-kafka", daemon=True)
        self._parts: _Parts | None = None
        self._consumers: list[Consumer] = []
        self._served: Served | None = None  # replaced whole: the thread reads it

    # -- called from the event loop ---------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        self._stopping.set()
        self._thread.join(timeout)

    def submit(self, request: CommitRequest) -> None:
        self._requests.submit(request)

    def served(self, until: float, owned: dict[int, int]) -> None:
        """The engine made every poll due before ``until`` of the keys of ``owned`` (Kafka
        partition -> lease generation): said with the next transactions (:mod:`.served`)."""
        self._served = Served(until, owned)

    def send_plain(self, record: Record, done: Done) -> None:
        """A record outside any transaction (commands written for another owner)."""
        self._requests.send_plain(record, done)

    def disk_bytes(self) -> int | None:
        """The local state store's size on disk (``None``: none, or it failed)."""
        disk = self._disk
        return None if disk is None else disk.local.bytes_on_disk()

    def standby_figures(self) -> tuple[int, float]:
        """Partitions kept warm as standbys now, and the records they are behind (read from
        another thread: a length and a number only)."""
        parts = self._parts
        standbys = None if parts is None else parts.restores.standbys
        return (0, 0.0) if standbys is None else (len(standbys.kept), standbys.lag)

    def acquire(self, kafka_partitions: Sequence[int]) -> None:
        """Without a group: take these partitions as if assigned (the CLI, group empty)."""
        with self._lock:
            self._acquire.extend(kafka_partitions)

    def replace_member(self, rebalance: bool = False) -> None:
        """Join the group again with a new consumer (the liveness guard's remedy); with
        ``rebalance``, as a dynamic member, so that the join starts a rebalance."""
        with self._lock:
            self._replace = rebalance or bool(self._replace)

    def member_id(self) -> str | None:
        """This instance's member id in the group now (``None``: not a member). librdkafka
        reads it under its own lock, so any thread may ask."""
        group = None if self._parts is None else self._parts.membership.group
        try:
            return (group.memberid() or None) if group is not None else None
        except RuntimeError:  # closed meanwhile: being replaced
            return None

    # -- the thread -------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._parts = self._build()
        except Exception as exc:
            self.startup_error = exc
            for consumer in self._consumers:  # those built before the failure
                consumer.close()
            if self._disk is not None:
                self._disk.close()
            self.ready.set()
            return
        self.ready.set()
        parts = self._parts
        try:
            while not self._stopping.is_set():
                self._pump(parts)
            parts.transactions.flush()
            parts.transactions.mark(now=True)  # for the next owner of every partition
        except WatukuyError as exc:  # one line the operator can act on, no traceback
            log.error("%s", exc)
            self._crashed(exc)
        except Exception as exc:  # the loop must hear about it; the thread cannot go on
            log.exception("kafka thread failed")
            self._crashed(exc)
        finally:
            self._close(parts)

    def _crashed(self, exc: Exception) -> None:
        """Answer what waits on this thread (nothing else will), then tell the store."""
        failed = Retriable(f"the Kafka store stopped: {exc}")
        for request in self._requests.take_pending():
            request.done(failed)
        for _, done in self._requests.take_plain():
            done(failed)
        self._notify(Crashed(exc))

    def _build(self) -> _Parts:
        settings, clients, clock = self.settings, self._clients, self._clock
        # Its transactions are initialised once the group is joined: both take a round trip
        # or two to a coordinator, and the join goes on in librdkafka's threads meanwhile.
        producer = new_producer(settings, clients, initialised=False)
        tail = tail_consumer(settings, clients)
        restores = self._restores(tail)
        group = group_consumer(settings, clients) if settings.use_group else None
        if group is not None:
            self._consumers.insert(0, group)
        membership: Membership | None = None

        def rejoin() -> None:
            if membership is not None:
                membership.rejoin()

        transactions = Transactions(
            settings,
            self._leases,
            self._requests,
            self._notify,
            clock,
            clients,
            producer=producer,
            group=group,
            tail=tail,
            on_fatal=rejoin,
            disk=self._disk,
            served=lambda: self._served,
        )

        def finish() -> None:  # a revocation's: the partitions are still ours meanwhile
            transactions.flush()
            transactions.mark(now=True)

        def rebuild(dead: Consumer, static: bool = True) -> Consumer:
            fresh = group_consumer(settings, clients, static=static)
            self._consumers = [fresh, *(c for c in self._consumers if c is not dead)]
            transactions.use_group(fresh)
            return fresh

        membership = Membership(
            settings.layout,
            self._leases,
            self._notify,
            group=group,
            restores=restores,
            requests=self._requests,
            flush=finish,
            rebuild=rebuild,
            clock=clock,
            # Two fencings this close together are two processes with one runner.id.
            fence_window=2 * settings.session_timeout,
        )
        membership.subscribe()
        startup.mark("group subscribed")
        init_transactions(producer, settings)  # nothing uses the producer before _build returns
        startup.mark("producer's transactions initialised")
        return _Parts(restores, transactions, membership)

    def _restores(self, tail: Consumer) -> Restores:
        """What restores assigned partitions, reading through ``tail`` and consumers of its
        own (``self._consumers`` then holds them all)."""
        settings, clients, clock = self.settings, self._clients, self._clock
        # Never assigned: their offset queries do not queue behind the tail's fetches.
        stable = tail_consumer(settings, clients)
        written = tail_consumer(settings, clients, committed=False)
        events = tail_consumer(settings, clients)  # reads restores' events (see .catchup)
        self._consumers = [tail, stable, written, events]
        standbys = None
        roster = self._roster
        if self._disk is not None and roster is not None and settings.standby_replicas > 0:
            standbys = Standbys(
                settings,
                self._disk,
                self._leases,
                clock,
                tail=tail,
                # One short try: a standby is only worth it while it never holds this thread
                # (a broker back from an outage answered NOT_LEADER for seconds, and a 60 s
                # wait for a leader here stalled every commit of the runner).
                watermarks=lambda tp: watermarks(stable, tp, clock, deadline=0.0, timeout=1.0),
                roster=roster,
                member=self._in_group,
            )

        def served(kafka_partition: int) -> float | None:
            group = None if self._parts is None else self._parts.membership.group
            return served_of(group, settings.layout.state, kafka_partition)

        return Restores(
            settings.layout,
            self._leases,
            self._notify,
            clock,
            served=served,
            tail=tail,
            stable=stable,
            written=written,
            catchup=EventsCatchUp(events, stable, self._events_of, clock),
            transaction_timeout=settings.transaction_timeout,
            bootstrap=bootstrap_of(settings.kafka),
            disk=self._disk,
            standbys=standbys,
        )

    def _in_group(self) -> bool:
        group = None if self._parts is None else self._parts.membership.group
        return group is not None and bool(group.memberid())

    def _pump(self, parts: _Parts) -> None:
        restores, transactions, membership = parts.restores, parts.transactions, parts.membership
        busy = restores.busy or self._requests.pending
        if membership.group is not None:
            # Serves rebalance callbacks; during a restore the tail's read does the waiting.
            membership.poll(0.0 if restores.reading else 0.02 if busy else 0.05)
        elif not restores.reading:
            self._stopping.wait(0.01 if busy else 0.05)
        with self._lock:
            acquire = list(self._acquire)
            self._acquire.clear()
            replace, self._replace = self._replace, None
        membership.acquire(acquire)
        if replace is not None:
            membership.replace_member(rebalance=replace)
        membership.settle()
        restores.start_settled()
        if restores.standbys is not None:
            restores.standbys.refresh()
        restores.read()
        transactions.send_plain()
        if transactions.due:
            transactions.flush()
        transactions.mark()
        disk = self._disk
        if disk is not None and disk.failed:
            # What the restores read from it is gone with it: restore every partition again,
            # from the topics alone (the store is closed: nothing reads or writes it now).
            self._disk = None
            standbys, restores.standbys = restores.standbys, None
            if standbys is not None:
                for kafka_partition in sorted(standbys.kept):
                    standbys.release(kafka_partition)
            membership.rejoin()

    def _close(self, parts: _Parts) -> None:
        group = parts.membership.group
        if group is not None:
            try:
                group.close()  # leaves the group (a static member stays until its session)
            except KafkaException as exc:
                log.warning("closing the group consumer: %s", exc)
        for consumer in self._consumers:
            if consumer is not group:
                consumer.close()
        parts.transactions.close()
        if self._disk is not None:
            self._disk.close()
