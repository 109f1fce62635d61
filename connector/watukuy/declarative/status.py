"""``on_status``: what a response status means for the poll.

Keys are a status (``404``, ``"404"``) or a class (``"4xx"``); values one of:

- ``ok``: a page; its body is read as usual.
- ``ignore``: an empty last page. The poll succeeds and ends; the cursor stays where it was
  (a timestamp cursor keeps what earlier pages of the poll saw).
- ``retry``: a passing fault; the poll fails and is retried with backoff (the circuit breaker
  counts it).
- ``rate-limited``: the vendor asks us to slow down; the partition waits until the time its
  ``Retry-After`` / ``RateLimit-*`` headers give, else ``schedule.min``.
- ``fail``: the poll fails with the method, URL template and status.

A status takes its own entry, else its class's, else the default: 2xx ok, 429 rate-limited,
5xx retry, anything else fail. 304 always means "no change since the last poll" (the client
sent the stored ETag / Last-Modified) and cannot be configured; timeouts and refused
connections are always retried.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from watukuy.core.errors import ConfigError
from watukuy.core.validation import kind

__all__ = ["ACTIONS", "Action", "StatusTable", "parse_on_status"]

Action = Literal["ok", "ignore", "retry", "rate-limited", "fail"]
ACTIONS: tuple[Action, ...] = ("ok", "ignore", "retry", "rate-limited", "fail")

_CLASS = re.compile(r"^([2-5])xx$", re.IGNORECASE)
_CODE = re.compile(r"^\d{3}$")

# What the HTTP client does by itself with a status before the poll sees it (it raises for
# these); a configured action that differs needs the status passed through to us.
_CLIENT_RAISES = frozenset({429, *range(500, 600)})


def default_action(status: int) -> Action:
    if 200 <= status < 300:
        return "ok"
    if status == 429:
        return "rate-limited"
    if 500 <= status < 600:
        return "retry"
    return "fail"


@dataclass(frozen=True, slots=True)
class StatusTable:
    codes: Mapping[int, Action] = field(default_factory=dict)
    classes: Mapping[int, Action] = field(default_factory=dict)

    def action(self, status: int) -> Action:
        found = self.codes.get(status)
        if found is None:
            found = self.classes.get(status // 100)
        return found if found is not None else default_action(status)

    def passthrough(self) -> frozenset[int]:
        """Statuses the client must return instead of raising: configured otherwise."""
        return frozenset(
            status for status in _CLIENT_RAISES if self.action(status) != default_action(status)
        )


def parse_on_status(raw: object, where: str) -> StatusTable:
    if raw is None:
        return StatusTable()
    if not isinstance(raw, Mapping):
        raise ConfigError(f"must be a mapping like {{404: ignore}}, got {kind(raw)}", where)
    codes: dict[int, Action] = {}
    classes: dict[int, Action] = {}
    for key, value in raw.items():
        at = f"{where}.{key}"
        action = _action(value, at)
        text = str(key).strip() if isinstance(key, int | str) and not isinstance(key, bool) else ""
        matched = _CLASS.match(text)
        if matched is not None:
            target, number = classes, int(matched.group(1))
        elif _CODE.match(text) and 200 <= int(text) <= 599:
            target, number = codes, int(text)
            if number == 304:
                raise ConfigError(
                    "304 always means 'no change since the last poll'; it cannot be configured",
                    at,
                )
        else:
            raise ConfigError(
                "must be an HTTP status from 200 to 599 (404) or a class (2xx, 3xx, 4xx, 5xx)",
                at,
            )
        if number in target:
            raise ConfigError("given twice", at)
        target[number] = action
    return StatusTable(codes, classes)


def _action(value: object, where: str) -> Action:
    for action in ACTIONS:
        if value == action:
            return action
    shown = repr(value) if isinstance(value, str | int | float) else kind(value)
    raise ConfigError(f"must be one of: {', '.join(ACTIONS)}; got {shown}", where)
