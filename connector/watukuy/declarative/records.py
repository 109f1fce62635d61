"""Where a page's items are in its body (``records``): one concept, its own module, so that
each new shape (one object per answer, ``[*]`` over wrapped records) is one more kind here.

    records: data         the list at this path is the page's items ('' = the body itself);
                          null is no items, anything else not a list is a bad body

Pure: a body goes in, the items come out; an error names the path and the request's method
and URL template, never a value from the body.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from watukuy.declarative.errors import BadBody
from watukuy.declarative.paths import MISSING, Path, parse_path

__all__ = ["ListAt", "Records", "parse_records"]


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
        path = self.path
        found = path.find(body)
        if found is MISSING:
            raise BadBody(f"{what}: no records at {path.text!r} in the body")
        if found is None:
            return []
        if not isinstance(found, list):
            shown = "the body" if not path.text else repr(path.text)
            noun = "a mapping" if isinstance(found, dict) else f"a {type(found).__name__}"
            raise BadBody(f"{what}: records at {shown} is {noun}, not a list")
        return found


def parse_records(raw: object, where: str) -> Records:
    """``records`` at ``where`` ('' when absent: the body is the list)."""
    return ListAt(parse_path("" if raw is None else raw, where, allow_empty=True))
