"""``fanout``: one partition per value of a list, for an endpoint there is one of per value
(a mail folder, a board id from the tenant's data)::

    fanout:
      - {name: folder, values: [inbox, drafts, sent]}         # static values
      - {name: board, values: "{partition.data.board_ids}"}   # a list in the tenant's data

Each tenant's partitions are the product of the entries' values, keyed
``<tenant>/<v1>/<v2>``; ``{fanout.NAME}`` renders a partition's value in templates. The
values are partitions, not configuration: they come with the tenants' listing at each refresh,
so a value that leaves a tenant's list pauses its partition (state kept) and, after
``retain``, deletes it, as a child partition is; one that comes back resumes. Partitions
carry their values as ``Partition.parents`` (the last first, as a child's ancestors), which
is also how the engine finds a key's tenant.

A value that cannot be part of a key (not a string or a number, empty, or holding ``/``) is
left out of the listing, saying so in the log (the tenant's key and the config path, never
the value: it is tenant data).
"""

from __future__ import annotations

import inspect
import itertools
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from watukuy.core.errors import ConfigError
from watukuy.core.keys import key_part
from watukuy.core.partitions import normalise
from watukuy.core.paths import Path, parse_path
from watukuy.core.poller import Partition
from watukuy.core.validation import check_keys, kind

__all__ = ["FanEntry", "Fanout", "parse_fanout"]

log = logging.getLogger("watukuy.declarative")

NAME = re.compile(r"[A-Za-z0-9_]+")
_DATA = re.compile(r"\{\s*partition\.data\.([^{}]+?)\s*\}")


@dataclass(frozen=True, slots=True)
class FanEntry:
    """One entry: its ``name`` and its values, given (``values``) or read from each
    tenant's data at ``data`` (a list there)."""

    name: str
    where: str
    values: tuple[str, ...] = ()
    data: Path | None = None

    def of(self, tenant: Partition) -> list[str]:
        if self.data is None:
            return list(self.values)
        found = self.data.find(tenant.data) if tenant.data is not None else None
        if not isinstance(found, list):
            log.warning(
                "%s: tenant %r has no list at partition.data.%s; no partition of it",
                self.where,
                tenant.key,
                self.data.text,
            )
            return []
        out = []
        for value in found:
            text = key_part(value)
            if text is None:
                log.warning(
                    "%s: a value of tenant %r cannot be part of a key (not text, empty or "
                    "holding '/'); left out",
                    self.where,
                    tenant.key,
                )
            else:
                out.append(text)
        return list(dict.fromkeys(out))


@dataclass(frozen=True, slots=True)
class Fanout:
    entries: tuple[FanEntry, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(entry.name for entry in self.entries)

    def expand(self, tenants: Iterable[Partition]) -> list[Partition]:
        """Each tenant's partitions: the product of the entries' values."""
        out = []
        for tenant in tenants:
            for values in itertools.product(*(entry.of(tenant) for entry in self.entries)):
                key = "/".join((tenant.key, *values))
                out.append(Partition(key, tenant.data, tuple(reversed(values))))
        return out

    def listing(
        self, poller: str, tenants: Callable[[], Any]
    ) -> Callable[[], Awaitable[list[Partition]]]:
        """The ``partitions`` callable of a fan-out stream over its tenants' listing."""

        async def listed() -> list[Partition]:
            returned = tenants()
            if inspect.isawaitable(returned):
                returned = await returned
            return self.expand(normalise(poller, returned).values())

        return listed


def parse_fanout(raw: object, where: str) -> Fanout | None:
    """``fanout`` at ``where``: a non-empty list of ``{name, values}`` (``None``: none)."""
    if raw is None:
        return None
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"must be a non-empty list of {{name, values}}, got {kind(raw)}", where)
    entries = [_entry(entry, f"{where}[{index}]") for index, entry in enumerate(raw)]
    names = [entry.name for entry in entries]
    for index, name in enumerate(names):
        if name in names[:index]:
            raise ConfigError(f"the name {name!r} is given twice", f"{where}[{index}].name")
    return Fanout(tuple(entries))


def _entry(raw: object, where: str) -> FanEntry:
    if not isinstance(raw, dict):
        raise ConfigError(
            f"must be a mapping like {{name: folder, values: [...]}}, got {kind(raw)}", where
        )
    check_keys(raw, ("name", "values"), where)
    name = raw.get("name")
    if not isinstance(name, str) or NAME.fullmatch(name) is None:
        raise ConfigError(f"must match [A-Za-z0-9_]+, got {name!r}", f"{where}.name")
    values = raw.get("values")
    at = f"{where}.values"
    if isinstance(values, str):
        found = _DATA.fullmatch(values.strip())
        if found is None:
            raise ConfigError(
                "must be a list of values or one placeholder {partition.data.NAME} (a list "
                "in each tenant's data)",
                at,
            )
        return FanEntry(name, where, data=parse_path(found.group(1), at))
    return FanEntry(name, where, values=_static(values, at))


def _static(values: object, where: str) -> tuple[str, ...]:
    if not isinstance(values, Sequence) or isinstance(values, str | bytes) or not values:
        raise ConfigError(f"must be a non-empty list of values, got {kind(values)}", where)
    out = []
    for index, value in enumerate(values):
        text = key_part(value)
        if text is None:
            raise ConfigError(
                "must be a string or a number, not empty, without '/' (it ends a key)",
                f"{where}[{index}]",
            )
        if text in out:
            raise ConfigError(f"{text!r} is given twice", f"{where}[{index}]")
        out.append(text)
    return tuple(out)
