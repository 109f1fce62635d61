"""Keeping partition data out of the error texts watukuy stores and logs.

A failure's text (``last_error``, a parked item's ``error``, a log line) is written by whoever
raised: the vendor client, a library, the user's ``fetch`` or handler. Any of them may quote a
value of the partition's ``data`` (a slug in a path, a tenant host, a token) or a rendered URL.
Before such a text is kept anywhere, :func:`failure_text` makes it safe:

- every value in ``data`` is replaced by ``[redacted]``: strings of 3 characters or more
  (shorter ones match everywhere and protect nothing), integers of 5 digits or more (shorter
  ones would eat statuses, line numbers and durations), matched case-insensitively (hosts are
  lower-cased on the way) and in their URL-encoded forms too;
- URLs that are not templates (no ``{``) are withheld: their host and path may be tenant data
  that is not literally in ``data`` (``f"{slug}.vendor.com"``);
- the text becomes one line of at most :data:`MAX_LENGTH` characters, since it goes into
  state records and log lines, and a library may quote a whole response body.

The exception's type name is kept as it is, so operators can triage by it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from urllib.parse import quote, quote_plus

__all__ = ["MAX_LENGTH", "REDACTED", "URL_WITHHELD", "failure_text", "redact", "withhold_urls"]

REDACTED = "[redacted]"
URL_WITHHELD = "<url withheld>"
MAX_LENGTH = 500
MIN_TEXT = 3
MIN_DIGITS = 5
_MAX_DEPTH = 16

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def failure_text(exc: BaseException, data: object, *, trusted: bool = False) -> str:
    """``Type: message`` of ``exc`` with partition ``data`` and rendered URLs taken out.

    ``trusted`` texts (watukuy's own HTTP errors, which show a URL template at most) keep
    their URLs; their data values are still redacted.
    """
    try:
        message = one_line(str(exc))
    except Exception:  # a broken __str__ must not lose the failure itself
        message = "<unprintable message>"
    message = redact(message, data)
    if not trusted:
        message = withhold_urls(message)
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return _clip(text)


def redact(text: str, *data: object) -> str:
    """``text`` with every value found in ``data`` replaced by ``[redacted]``."""
    pattern = _pattern(_values(data))
    return text if pattern is None else pattern.sub(REDACTED, text)


def withhold_urls(text: str) -> str:
    """Rendered URLs replaced by ``<url withheld>``; templates (``{...}`` inside) are kept."""
    return _URL.sub(lambda m: m.group(0) if "{" in m.group(0) else URL_WITHHELD, text)


def one_line(text: str) -> str:
    return " ".join(text.split())


def _clip(text: str) -> str:
    return text if len(text) <= MAX_LENGTH else text[: MAX_LENGTH - 1] + "…"


def _values(roots: Iterable[object]) -> set[str]:
    """Every string (and long integer) inside ``roots``: mappings, sequences, sets,
    dataclasses and plain objects are walked; keys are field names and stay."""
    found: set[str] = set()
    seen: set[int] = set()
    stack: list[tuple[object, int]] = [(root, 0) for root in roots]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            if len(value) >= MIN_TEXT:
                found.add(value)
            continue
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, int):
            if len(str(abs(value))) >= MIN_DIGITS:
                found.add(str(value))
            continue
        if isinstance(value, bytes | bytearray | float | complex) or depth >= _MAX_DEPTH:
            continue
        if id(value) in seen:
            continue
        seen.add(id(value))
        children: Iterable[object]
        if isinstance(value, Mapping):
            children = value.values()
        elif isinstance(value, list | tuple | set | frozenset):
            children = value
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            children = [getattr(value, f.name, None) for f in dataclasses.fields(value)]
        elif hasattr(value, "__dict__") and not isinstance(value, type):
            children = vars(value).values()
        else:
            continue
        stack.extend((child, depth + 1) for child in children)
    return found


def _pattern(values: set[str]) -> re.Pattern[str] | None:
    forms: set[str] = set()
    for value in values:
        forms.update((value, quote(value, safe=""), quote(value), quote_plus(value)))
    forms = {form for form in forms if len(form) >= MIN_TEXT}
    if not forms:
        return None
    # Longest first: a host that contains the slug goes as a whole.
    ordered = sorted(forms, key=len, reverse=True)
    return re.compile("|".join(re.escape(form) for form in ordered), re.IGNORECASE)
