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
- ``restart``: the page is dropped and the poll's listing starts again from its first page
  and the cursor it started from (an expired page cursor); on the first page itself it fails.

Instead of an action, a list of rules read in order, ``{when: FILTER, do: ACTION}`` (the
filter grammar of ``transform.filter``, on the JSON body; a body that is not JSON matches no
``when``) or a bare action (the rest): the first rule that matches wins, none matching is the
status's default::

    400: [{when: {path: message, matches: ".*not enabled.*"}, do: ignore}, fail]
    200: [{when: {path: "errors[0].code", equals: CursorExpired}, do: restart}, ok]

A status takes its own entry, else its class's, else the default: 2xx ok, 429 rate-limited,
5xx retry, anything else fail. 304 always means "no change since the last poll" (the client
sent the stored ETag / Last-Modified) and cannot be configured; timeouts and refused
connections are always retried.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from watukuy.core.errors import ConfigError
from watukuy.core.filters import Filter, compile_filter
from watukuy.core.validation import check_keys, kind

__all__ = ["ACTIONS", "Action", "Rule", "StatusTable", "parse_on_status"]

Action = Literal["ok", "ignore", "retry", "rate-limited", "fail", "restart"]
ACTIONS: tuple[Action, ...] = ("ok", "ignore", "retry", "rate-limited", "fail", "restart")


@dataclass(frozen=True, slots=True)
class Rule:
    """``{when, do}``: ``when`` None for the rest."""

    when: Filter | None
    do: Action


Meaning = Action | tuple[Rule, ...]
"""What a status or class maps to: an action, or rules read on the body."""

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
    codes: Mapping[int, Meaning] = field(default_factory=dict)
    classes: Mapping[int, Meaning] = field(default_factory=dict)

    def _meaning(self, status: int) -> Meaning | None:
        found = self.codes.get(status)
        return self.classes.get(status // 100) if found is None else found

    def needs_body(self, status: int) -> bool:
        """Whether the action of ``status`` depends on the body (its rules have a ``when``)."""
        return isinstance(self._meaning(status), tuple)

    def action(self, status: int, body: Any = None) -> Action:
        """The action for ``status``; ``body`` (the parsed JSON body, ``None`` when it is not
        JSON) is read by rules."""
        found = self._meaning(status)
        if isinstance(found, tuple):
            for rule in found:
                if rule.when is None or rule.when(body):
                    return rule.do
            return default_action(status)
        return found if found is not None else default_action(status)

    def passthrough(self) -> frozenset[int]:
        """Statuses the client must return instead of raising: configured otherwise, or by
        rules on the body."""
        return frozenset(
            status
            for status in _CLIENT_RAISES
            if self.needs_body(status) or self.action(status) != default_action(status)
        )


def parse_on_status(raw: object, where: str) -> StatusTable:
    if raw is None:
        return StatusTable()
    if not isinstance(raw, Mapping):
        raise ConfigError(f"must be a mapping like {{404: ignore}}, got {kind(raw)}", where)
    codes: dict[int, Meaning] = {}
    classes: dict[int, Meaning] = {}
    for key, value in raw.items():
        at = f"{where}.{key}"
        action = _rules(value, at) if isinstance(value, list) else _action(value, at)
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


def _rules(raw: list[Any], where: str) -> tuple[Rule, ...]:
    if not raw:
        raise ConfigError("must be an action or a non-empty list of rules", where)
    rules: list[Rule] = []
    for index, entry in enumerate(raw):
        at = f"{where}[{index}]"
        if rules and rules[-1].when is None:
            raise ConfigError("comes after a rule without 'when', which takes the rest", at)
        if not isinstance(entry, Mapping):
            rules.append(Rule(None, _action(entry, at)))
            continue
        check_keys(entry, ("when", "do"), at)
        if "do" not in entry:
            raise ConfigError("a rule needs 'do': the action when it matches", f"{at}.do")
        when = entry.get("when")
        test = None if when is None else compile_filter(when, f"{at}.when")
        rules.append(Rule(test, _action(entry["do"], f"{at}.do")))
    return tuple(rules)


def _action(value: object, where: str) -> Action:
    for action in ACTIONS:
        if value == action:
            return action
    shown = repr(value) if isinstance(value, str | int | float) else kind(value)
    raise ConfigError(f"must be one of: {', '.join(ACTIONS)}; got {shown}", where)
