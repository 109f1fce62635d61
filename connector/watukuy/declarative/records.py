"""Where a page's items are in its body (``records``): one concept, its own module, so that
each new shape (one object per answer, ``[*]`` over wrapped records) is one more kind here.

    records: data         the list at this path is the page's items ('' = the body itself);
                          null is no items, anything else not a list is a bad body
    records: "list[*].customer"
                          each element's sub-path is an item; an element without it is
                          parked invalid with the reason (never dropped silently)
    record: data          the one object at this path is the page's item (an answer that is
                          one object: /users/me, a detail endpoint); null or absent: none

Pure: a body goes in, the items come out; an error names the path and the request's method
and URL template, never a value from the body.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from watukuy.core.errors import ConfigError
from watukuy.core.poller import Unreadable
from watukuy.declarative.errors import BadBody
from watukuy.declarative.paths import MISSING, Path, parse_path

__all__ = ["ListAt", "OneRecord", "Records", "Spread", "parse_records"]


class Records(Protocol):
    @property
    def text(self) -> str:
        """The path as configured."""

    def read(self, body: Any, what: str) -> list[Any]:
        """The page's items; :class:`BadBody` naming ``what`` (method and URL template)."""


@dataclass(frozen=True, slots=True)
class ListAt:
    """The list at ``path``."""

    path: Path

    @property
    def text(self) -> str:
        return self.path.text

    def read(self, body: Any, what: str) -> list[Any]:
        return _list_at(self.path, body, what, "records")


@dataclass(frozen=True, slots=True)
class Spread:
    """``list[*].sub``: the list at ``head``, each element's ``tail`` an item."""

    text: str
    head: Path
    tail: Path

    def read(self, body: Any, what: str) -> list[Any]:
        out: list[Any] = []
        tail = self.tail
        for index, element in enumerate(_list_at(self.head, body, what, "records")):
            found = tail.find(element)
            if found is MISSING or found is None:
                reason = f"records {self.text!r}: element {index} has no {tail.text!r}"
                out.append(Unreadable(element, reason))
            else:
                out.append(found)
        return out


@dataclass(frozen=True, slots=True)
class OneRecord:
    """``record``: the one object at ``path``."""

    path: Path

    @property
    def text(self) -> str:
        return self.path.text

    def read(self, body: Any, what: str) -> list[Any]:
        found = self.path.find(body)
        if found is MISSING or found is None:
            return []
        if isinstance(found, list):
            shown = "the body" if not self.path.text else repr(self.path.text)
            raise BadBody(f"{what}: record at {shown} is a list, not one object (use records)")
        return [found]


def _list_at(path: Path, body: Any, what: str, key: str) -> list[Any]:
    found = path.find(body)
    if found is MISSING:
        raise BadBody(f"{what}: no {key} at {path.text!r} in the body")
    if found is None:
        return []
    if not isinstance(found, list):
        shown = "the body" if not path.text else repr(path.text)
        noun = "a mapping" if isinstance(found, dict) else f"a {type(found).__name__}"
        raise BadBody(f"{what}: {key} at {shown} is {noun}, not a list")
    return found


def parse_records(given: Mapping[str, Any], where: str) -> Records:
    """``records`` or ``record`` of the poller entry ``given`` at ``where`` (neither: the body
    is the list)."""
    if "records" in given and "record" in given:
        raise ConfigError("set one of records and record, not both", f"{where}.record")
    if "record" in given:
        return OneRecord(parse_path(given["record"], f"{where}.record", allow_empty=True))
    at = f"{where}.records"
    path = parse_path(given.get("records", ""), at, allow_empty=True, every=True)
    spread = path.spread()
    if spread is None:
        return ListAt(path)
    return Spread(path.text, *spread)
