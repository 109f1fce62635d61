"""The store's topic check (:func:`~watukuy.store.kafka.topics.ensure_topics`) on a thread of
its own, so that it can start before the store exists.

``watukuy-source run`` starts it as soon as the config is read, before the engine, the
control plane and REST are imported (0.3-0.5 s): the broker then creates the topics of a new
deployment, and makes their partitions writable (another 0.1-1 s for a few hundred
partitions), meanwhile. :meth:`KafkaStore.start` takes its answer when it covers the same
topics, and checks again itself otherwise.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from typing import Any

from watukuy.observe import startup
from watukuy.store.kafka import clients
from watukuy.store.kafka.topics import BrokerUnavailable, TopicInfo, TopicLayout, ensure_topics

__all__ = ["TopicCheck"]

Pollers = tuple[tuple[str, str | None], ...]
"""(poller name, its topic override or None), in config order."""


class TopicCheck:
    """One run of ``ensure_topics`` for ``pollers``' topics and the internal ones, started at
    once on a daemon thread (bounded by ``timeout``)."""

    def __init__(
        self,
        kafka: Mapping[str, Any],
        layout: TopicLayout,
        pollers: Sequence[tuple[str, str | None]],
        timeout: float,
    ) -> None:
        self.kafka = kafka
        self.layout = layout
        self.pollers: Pollers = tuple(pollers)
        self.timeout = timeout
        self._answer: Future[dict[str, TopicInfo]] = Future()
        threading.Thread(target=self._run, name="watukuy-topics", daemon=True).start()

    def covers(self, layout: TopicLayout, pollers: Sequence[tuple[str, str | None]]) -> bool:
        """Whether it checks exactly these topics."""
        return layout == self.layout and tuple(pollers) == self.pollers

    async def result(self) -> dict[str, TopicInfo]:
        """Every topic checked, by name; raises what the check raised (``ConfigError`` for a
        topic that does not fit, ``BrokerUnavailable`` when the cluster did not answer)."""
        return await asyncio.wrap_future(self._answer)

    def _run(self) -> None:
        try:
            self._answer.set_result(self._check())
            startup.mark("topics checked")
        except BaseException as exc:  # handed to whoever waits for the answer
            self._answer.set_exception(exc)

    def _check(self) -> dict[str, TopicInfo]:
        kafka, timeout = self.kafka, self.timeout
        admin = clients.admin_client(kafka)
        try:
            return ensure_topics(
                admin,
                self.layout,
                self.pollers,
                bootstrap=clients.bootstrap_of(kafka),
                timeout=timeout,
            )
        except BrokerUnavailable as exc:
            raise clients.unreachable(kafka, timeout) from exc
        finally:
            clients.drain_logs(admin)  # why it could not connect, if it could not
