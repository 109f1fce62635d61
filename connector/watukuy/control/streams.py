"""A connector's streams as the control plane names them (CONTRACT.md, "Several streams").

A connector that lists ``streams:`` runs as one poller per stream, ``<connector>.<stream>``.
REST names the connector for what applies to all its streams (config, target, status,
restart) and ``<connector>.<stream>`` for what is per key (offsets, partitions, parked items,
the partition operations), since two streams' keys may be alike. The stream names come from
the connector's config as written, so a connector written moments ago is named correctly
before this instance's engine has compiled it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from watukuy.core.errors import ConfigError
from watukuy.core.poller import Poller

__all__ = ["Named", "poller_named", "stream_names", "stream_pollers"]


def stream_names(config: Mapping[str, Any]) -> tuple[str, ...]:
    """The names of the streams ``config`` lists, sorted; ``()`` for a one-poller connector."""
    streams = config.get("streams")
    if not isinstance(streams, list):
        return ()
    names = {
        entry["name"]
        for entry in streams
        if isinstance(entry, Mapping) and isinstance(entry.get("name"), str)
    }
    return tuple(sorted(names))


@dataclass(frozen=True, slots=True)
class Named:
    """What a name in a REST path stands for: a connector, or one ``stream`` of it."""

    connector: str
    stream: str | None
    streams: tuple[str, ...]
    """The connector's streams, sorted (``()``: the connector is one poller)."""

    @property
    def pollers(self) -> list[str]:
        """The engine's pollers the name covers, in stream order."""
        if self.stream is not None:
            return [f"{self.connector}.{self.stream}"]
        if self.streams:
            return [f"{self.connector}.{stream}" for stream in self.streams]
        return [self.connector]

    @property
    def grouped(self) -> bool:
        """Whether the name covers several streams: their tasks then say which is theirs."""
        return self.stream is None and bool(self.streams)


def stream_pollers(pollers: Mapping[str, Poller], connector: str) -> list[str]:
    """The pollers in ``pollers`` that are streams of ``connector`` (by their ``stream_of``),
    in stream order."""
    found = [
        poller.stream_of
        for poller in pollers.values()
        if poller.stream_of is not None and poller.stream_of.connector == connector
    ]
    return [stream.poller for stream in sorted(found, key=lambda s: s.stream)]


def poller_named(pollers: Mapping[str, Poller], name: str, path: str) -> Poller:
    """The poller ``name`` of the CLI's ``--poller`` (``path``): a poller, or a stream as
    ``<connector>.<stream>``. A connector with streams is refused with its streams' names,
    since keys and events are each stream's."""
    found = pollers.get(name)
    if found is not None:
        return found
    streams = stream_pollers(pollers, name)
    if streams:
        raise ConfigError(
            f"connector '{name}' has streams, each with its own keys and events: name one "
            f"({', '.join(streams)})",
            path,
        )
    raise ConfigError(f"unknown poller '{name}' (known: {', '.join(sorted(pollers))})", path)
