"""``watukuy-source validate``'s warnings: templates a child stream inherits wrongly
(:func:`watukuy.declarative.streams.template_warnings`), and the transform history (issue 23).

A transform changed since a poller last published reshapes only the items polled from then
on. When the config's Kafka answers within a few seconds, ``validate`` reads the status
topic's ``transform/`` records (:mod:`watukuy.control.transformrecords`) and returns one
warning per poller whose transform is not the one it last published with. A cluster that does
not answer is one line saying the history could not be checked: ``validate`` is about the
config, and its exit code stays the config's.

Only configs with a transform are checked, so that a config without one validates at once
offline; the price is that removing every transform of a config is not warned about.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator

from watukuy.config import RunnerConfig
from watukuy.control.reader import Message, MissingTopic, TopicReader
from watukuy.control.transformrecords import (
    changed_transforms,
    decode_transform,
    fingerprint_of,
    transform_warning,
)
from watukuy.core.errors import StateCorrupted, WatukuyError
from watukuy.declarative.streams import template_warnings
from watukuy.store.kafka import clients
from watukuy.store.kafka.topics import TopicLayout

__all__ = ["HISTORY_TIMEOUT", "transform_warnings", "validate_warnings"]

log = logging.getLogger("watukuy.control")

HISTORY_TIMEOUT = 5.0
"""Seconds ``validate`` waits for Kafka (at most ``runner.startup.timeout``)."""


def validate_warnings(config: RunnerConfig) -> list[str]:
    """Every warning ``validate`` shows (none changes its exit code)."""
    found = [
        line
        for index, entry in enumerate(config.written_pollers)
        for line in template_warnings(entry, f"pollers[{index}]")
    ]
    return [*found, *transform_warnings(config)]


def transform_warnings(config: RunnerConfig) -> list[str]:
    """The lines to show: a warning per poller whose transform changed, or one line saying
    the history could not be read; none when nothing changed or no poller has a transform."""
    if all(p.transform is None for p in config.pollers):
        return []
    topics = config.topics
    layout = TopicLayout(topics.prefix, topics.partitions, topics.replication_factor)
    timeout = min(HISTORY_TIMEOUT, config.runner.startup_timeout)
    group = f"{config.runner.group_id}.validate"
    try:
        with _clients_quiet():
            recorded = asyncio.run(_recorded(config, layout.status, group, timeout))
    except MissingTopic:
        return []  # no runner ever started on this prefix: nothing was published
    except WatukuyError as exc:
        reason = " ".join(str(exc).split())
        return [f"note: the transform history could not be checked: {reason}"]
    pollers = {p.name: p for p in config.pollers}
    return [
        transform_warning(name, removed=fingerprint_of(pollers[name]) is None)
        for name in changed_transforms(config.pollers, recorded)
    ]


async def _recorded(
    config: RunnerConfig, topic: str, group: str, wait: float
) -> dict[str, str | None]:
    recorded: dict[str, str | None] = {}

    def apply(batch: list[Message]) -> None:
        for message in batch:
            try:
                found = (
                    None if message.key is None else decode_transform(message.key, message.value)
                )
            except StateCorrupted as exc:
                log.warning("%s[%d]@%d skipped: %s", topic, message.partition, message.offset, exc)
                continue
            if found is not None:
                recorded[found.poller] = found.fingerprint

    reader = TopicReader(config.kafka, topic, group=group, apply=apply, timeout=wait)
    await reader.start()
    await reader.stop()
    return recorded


@contextlib.contextmanager
def _clients_quiet() -> Iterator[None]:
    """The Kafka clients' own errors silenced (unless debugging): an unreachable cluster is
    the one note above, not a page of librdkafka's connection failures."""
    logger = clients.librdkafka_logger()
    if logger.isEnabledFor(logging.DEBUG):
        yield
        return
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)
