"""What the compacted state topics hold of a connector's keys, whatever instance owns them:
each key's state, and the parked items. Read whole, from the beginning to the current end, for
each question (REST's offsets and parked routes: rare, and answered by any instance)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from watukuy.control.reader import Message, TopicReader
from watukuy.core.keys import KeyId, key_text
from watukuy.serde.state import decode_parked, decode_state
from watukuy.store.kafka.records import is_command
from watukuy.store.kafka.topics import TopicLayout

__all__ = ["StoredKeys"]


class StoredKeys:
    """Reads ``<prefix>.state`` and ``<prefix>.parked`` with the runner's Kafka settings."""

    def __init__(self, kafka: Mapping[str, Any], layout: TopicLayout, runner_id: str) -> None:
        self._kafka = kafka
        self._layout = layout
        self._runner_id = runner_id

    async def states(self, name: str) -> dict[str, Any]:
        """Partition key -> decoded state of every stored key of connector ``name``."""
        prefix = _keys_of(name)
        states: dict[str, Any] = {}

        def keep(message: Message) -> None:
            key = message.key
            if key is None or not key.startswith(prefix) or is_command(key):
                return
            partition = KeyId.parse_bytes(key).partition
            if message.value is None:
                states.pop(partition, None)
            else:
                states[partition] = decode_state(message.value)

        await self._read_whole(self._layout.state, keep)
        return states

    async def parked(self, name: str) -> list[dict[str, Any]]:
        """The parked items of connector ``name``, by partition key and id; never their data."""
        prefix = _keys_of(name)
        found: dict[bytes, dict[str, Any]] = {}

        def keep(message: Message) -> None:
            key = message.key
            if key is None or not key.startswith(prefix):
                return
            if message.value is None:
                found.pop(key, None)
                return
            item = decode_parked(message.value)
            found[key] = {
                "id": item.id,
                "partition": item.partition,
                "kind": item.kind,
                "subject": item.subject,
                "error": item.error,
                "attempts": item.attempts,
                "parked_at": item.parked_at,
                "lane": item.lane,
            }

        await self._read_whole(self._layout.parked, keep)
        return sorted(found.values(), key=lambda item: (item["partition"], item["id"]))

    async def _read_whole(self, topic: str, keep: Callable[[Message], None]) -> None:
        """Every committed record of a compacted topic up to its current end, to ``keep``."""

        def apply(batch: list[Message]) -> None:
            for message in batch:
                keep(message)

        reader = TopicReader(
            self._kafka, topic, group=f"{self._layout.prefix}.rest.{self._runner_id}", apply=apply
        )
        await reader.start()
        try:
            await reader.caught_up()
        finally:
            await reader.stop()


def _keys_of(poller: str) -> bytes:
    """What the record key of each of ``poller``'s keys starts with (a poller's name holds no
    ``/``, so no other poller's keys do)."""
    return key_text(poller, "").encode()
