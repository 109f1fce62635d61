"""``watukuy-source tail``: a poller's events, decoded, as JSON lines on stdout.

Schemas come from ``<prefix>.schemas`` (single-object encoding) or the configured registry
(Confluent wire format), so what it prints is what any downstream consumer can read.
"""

from __future__ import annotations

import json
import sys
from typing import TextIO

from watukuy.config import RunnerConfig
from watukuy.control.streams import poller_named
from watukuy.serde.consumer import EventReader, SchemaTopicResolver
from watukuy.store.kafka import clients
from watukuy.store.kafka.topics import TopicLayout


def tail(
    config: RunnerConfig,
    poller_name: str,
    *,
    partition: str | None,
    from_beginning: bool,
    follow: bool,
    max_messages: int | None,
    out: TextIO = sys.stdout,
) -> int:
    """Print events until Ctrl-C, ``max_messages``, or (without ``follow``) the current end."""
    poller = poller_named({p.name: p for p in config.pollers}, poller_name, "--poller")
    topics = config.topics
    layout = TopicLayout(topics.prefix, topics.partitions, topics.replication_factor)
    kafka, timeout = config.kafka, config.runner.startup_timeout
    clients.probe(kafka, timeout)  # one clear line when the cluster is not there
    registry = None
    if config.schema_registry.url is not None:
        from watukuy.serde.registry import registry_client

        registry = registry_client(config.schema_registry.url, config.schema_registry.basic_auth)
    resolver = SchemaTopicResolver(kafka, layout.schemas, timeout=timeout)
    key = partition  # the reader matches it against record keys poller/<partition>
    printed = 0
    try:
        with EventReader(
            kafka,
            layout.events(poller_name, poller.topic),
            resolver=resolver,
            registry=registry,
            from_beginning=from_beginning,
            partition_key=key,
            timeout=timeout,
        ) as reader:
            for event in reader.read(follow=follow):
                if event.poller != poller_name:
                    continue  # pollers may share a topic
                out.write(json.dumps(event.to_dict(), default=str) + "\n")
                out.flush()
                printed += 1
                if max_messages is not None and printed >= max_messages:
                    break
    finally:
        resolver.close()
    return printed
