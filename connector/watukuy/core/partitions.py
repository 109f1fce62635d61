"""The list a ``partitions`` callable returns: checked, normalised and compared."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from watukuy.core.errors import ConfigError
from watukuy.core.poller import Partition

SINGLE = Partition(key="")
"""The one partition of a poller without ``partitions``."""


def normalise(poller: str, returned: object) -> dict[str, Partition]:
    """Partitions by key, in the order returned. Keys must be non-empty, unique strings."""
    if isinstance(returned, str | bytes | Mapping) or not isinstance(returned, Iterable):
        raise ConfigError(
            f"poller '{poller}': partitions() must return a list of partitions, "
            f"got {type(returned).__name__}"
        )
    result: dict[str, Partition] = {}
    for index, entry in enumerate(returned):
        partition = _one(poller, index, entry)
        if partition.key in result:
            raise ConfigError(
                f"poller '{poller}': duplicate partition key {partition.key!r}",
                f"partitions[{index}].key",
            )
        result[partition.key] = partition
    return result


def _one(poller: str, index: int, entry: Any) -> Partition:
    key: object
    parents: tuple[str, ...] = ()
    if isinstance(entry, Partition):
        key = entry.key
        data = entry.data
        parents = entry.parents
    elif isinstance(entry, Mapping):
        key = entry.get("key")
        data = entry.get("data")
    else:
        raise ConfigError(
            f"poller '{poller}': expected a Partition or {{'key', 'data'}}, "
            f"got {type(entry).__name__}",
            f"partitions[{index}]",
        )
    if not isinstance(key, str) or not key:
        raise ConfigError(
            f"poller '{poller}': partition keys must be non-empty strings, got {key!r}",
            f"partitions[{index}].key",
        )
    return Partition(key=key, data=data, parents=parents)


@dataclass(frozen=True, slots=True)
class PartitionsDiff:
    added: tuple[str, ...]
    removed: tuple[str, ...]
    kept: tuple[str, ...]


def diff(before: Iterable[str], after: Iterable[str]) -> PartitionsDiff:
    old = list(dict.fromkeys(before))
    new = list(dict.fromkeys(after))
    old_set, new_set = set(old), set(new)
    return PartitionsDiff(
        added=tuple(k for k in new if k not in old_set),
        removed=tuple(k for k in old if k not in new_set),
        kept=tuple(k for k in new if k in old_set),
    )
