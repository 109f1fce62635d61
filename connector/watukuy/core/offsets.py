"""A key's offsets in the shape Kafka Connect's KIP-875 gives them: its lane cursors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from watukuy.core.arguments import LANES, check_names, offset
from watukuy.core.errors import ConfigError
from watukuy.core.state import Lane, PartitionState
from watukuy.core.validation import join, kind


def offsets_of(state: PartitionState) -> dict[str, Any]:
    """``{"partition": {"key": K}, "offset": {"live": C, "backfill": C, "reconcile": C}}``."""
    return {
        "partition": {"key": state.partition},
        "offset": {lane: state.lane(Lane(lane)).cursor for lane in LANES},
    }


def decode_offsets(
    raw: object, *, partitioned: bool, path: str = "offsets"
) -> list[tuple[str, dict[str, Any] | None]]:
    """``[{"partition": {"key": K}, "offset": {...} | null}, ...]`` -> ``[(K, offset)]``.

    A poller without partitions has one key, ``""``; a key given twice is refused (which one
    would win is not obvious).
    """
    if isinstance(raw, str | bytes | Mapping) or not isinstance(raw, list | tuple):
        raise ConfigError(f"must be a list of {{partition, offset}}, got {kind(raw)}", path)
    out: list[tuple[str, dict[str, Any] | None]] = []
    seen: set[str] = set()
    for index, entry in enumerate(raw):
        where = f"{path}[{index}]"
        if not isinstance(entry, Mapping):
            raise ConfigError(
                f"must be a mapping with partition and offset, got {kind(entry)}", where
            )
        check_names(entry, ("partition", "offset"), where)
        for required in ("partition", "offset"):
            if required not in entry:
                raise ConfigError("is required", join(where, required))
        partition = entry["partition"]
        if not isinstance(partition, Mapping):
            raise ConfigError(
                f"must be a mapping like {{'key': 't_42'}}, got {kind(partition)}",
                f"{where}.partition",
            )
        check_names(partition, ("key",), f"{where}.partition")
        key = partition.get("key", None if partitioned else "")
        if not isinstance(key, str):
            raise ConfigError(f"must be a string, got {kind(key)}", f"{where}.partition.key")
        if partitioned and not key:
            raise ConfigError("must be a non-empty partition key", f"{where}.partition.key")
        if not partitioned and key:
            raise ConfigError(
                "this poller has no partitions: its one key is ''", f"{where}.partition.key"
            )
        if key in seen:
            raise ConfigError(f"partition {key!r} is given twice", f"{where}.partition.key")
        seen.add(key)
        out.append((key, offset(entry["offset"], f"{where}.offset")))
    return out
