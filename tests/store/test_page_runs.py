"""Pages in flight: a store never commits a page built on one it refused.

The rule itself (:class:`PageRuns`), and where the Kafka store applies it last, the thread
that makes transactions: a page still queued when the transaction of the page before it fails
is refused without reaching the producer, and a new run commits. The producer here is a fake
that fails one transaction; what Kafka does with transactions is tested against the broker.
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from tests.clock import ManualClock
from watukuy.core.errors import Retriable
from watukuy.store.apply import PageRuns
from watukuy.store.base import PageRun
from watukuy.store.kafka.lease import Leases, LeaseState
from watukuy.store.kafka.notifications import CommitRequest, Record
from watukuy.store.kafka.settings import KafkaSettings
from watukuy.store.kafka.topics import TopicLayout
from watukuy.store.kafka.transactions import Requests, Transactions

pytestmark = pytest.mark.unit

KEY = "p/tenant"


def test_a_run_is_refused_from_its_first_refused_page_until_a_new_run() -> None:
    runs = PageRuns()
    assert runs.admits(KEY, PageRun(1))
    assert runs.admits(KEY, PageRun(2, after=1))
    runs.refused(KEY, PageRun(2, after=1))

    assert not runs.admits(KEY, PageRun(3, after=2))  # built on the refused page
    assert not runs.admits(KEY, PageRun(4, after=3))  # and on what was built on it
    assert runs.admits("p/other", PageRun(3, after=2))  # other keys are not affected
    assert runs.admits(KEY, None)  # an operation's commit is in no run
    assert runs.admits(KEY, PageRun(5))  # a new run builds on what was committed
    assert runs.admits(KEY, PageRun(6, after=5))


class FailingOnce:
    """A transactional producer whose first commit fails (a non-fatal, abortable error)."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def list_topics(self, topic: str, timeout: float) -> None:
        return None  # what init_transactions asks first (store.kafka.factory)

    def init_transactions(self, timeout: float) -> None:
        return None

    def begin_transaction(self) -> None:
        self.log.append("begin")

    def produce(self, topic: str, value: bytes | None, key: bytes, *args: Any, **kw: Any) -> None:
        self.log.append(f"produce {value!r}")

    def commit_transaction(self, timeout: float) -> None:
        if "failed" not in self.log:
            self.log.append("failed")
            raise KafkaException(KafkaError(KafkaError.INVALID_TXN_STATE, "injected"))
        self.log.append("commit")

    def abort_transaction(self, timeout: float) -> None:
        self.log.append("abort")

    def purge(self, **kw: Any) -> None:
        return None

    def flush(self, timeout: float) -> int:
        return 0


class Factory:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def producer(self, config: dict[str, Any]) -> FailingOnce:
        return FailingOnce(self.log)

    def consumer(self, config: dict[str, Any]) -> Any:
        raise AssertionError("no consumer is needed without a group")


def test_a_page_queued_behind_a_failed_transaction_is_refused_and_never_produced() -> None:
    log: list[str] = []
    leases = Leases()
    leases.grant(0)
    leases.move(0, LeaseState.OWNED)
    generation = leases.get(0).generation  # type: ignore[union-attr]
    requests = Requests()
    settings = KafkaSettings({}, TopicLayout("p", 1, 1), "runner-1", use_group=False)
    factory = Factory(log)
    transactions = Transactions(
        settings, leases, requests, lambda _: None, ManualClock(0.0), factory,
        producer=factory.producer({}), group=None, tail=None, on_fatal=lambda: None,  # type: ignore[arg-type]
    )  # fmt: skip
    answers: dict[str, BaseException | None] = {}

    def page(name: str, run: PageRun) -> CommitRequest:
        record = Record("p.events", KEY.encode(), name.encode(), 0)
        return CommitRequest([record], {0: generation}, lambda e: answers.__setitem__(name, e),
                             [(KEY, run)])  # fmt: skip

    requests.submit(page("page-1", PageRun(1)))
    transactions.flush()  # its transaction fails
    requests.submit(page("page-2", PageRun(2, after=1)))  # sent before the engine heard
    requests.submit(page("again-1", PageRun(3)))  # the engine's new run, from what committed
    transactions.flush()

    assert isinstance(answers["page-1"], Retriable)
    assert isinstance(answers["page-2"], Retriable)
    assert "builds on" in str(answers["page-2"])
    assert answers["again-1"] is None
    assert log == [
        "begin", "produce b'page-1'", "failed", "abort",
        "begin", "produce b'again-1'", "commit",
    ]  # fmt: skip
