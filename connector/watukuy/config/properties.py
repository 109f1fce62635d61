"""Java ``.properties`` files, as Kafka Connect's FileConfigProvider reads them.

Comments (``#``, ``!``), ``key=value``, ``key: value`` and ``key value`` separators, line
continuations with a trailing backslash, and the escapes ``\\t \\n \\r \\f \\uXXXX``.
"""

from __future__ import annotations

from collections.abc import Iterator

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_SEPARATORS = "=:"
_BLANKS = " \t\f"


def parse_properties(text: str) -> dict[str, str]:
    """Every key of ``text`` with its value; a later duplicate wins, as in Java."""
    out: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split(line)
        out[_unescape(key)] = _unescape(value)
    return out


def _logical_lines(text: str) -> Iterator[str]:
    pending: str | None = None
    for physical in text.splitlines():
        stripped = physical.lstrip(_BLANKS)
        if pending is None and (not stripped or stripped[0] in "#!"):
            continue
        line = stripped if pending is None else pending + stripped
        if _ends_with_continuation(line):
            pending = line[:-1]
            continue
        pending = None
        yield line
    if pending is not None:
        yield pending


def _ends_with_continuation(line: str) -> bool:
    backslashes = len(line) - len(line.rstrip("\\"))
    return backslashes % 2 == 1


def _split(line: str) -> tuple[str, str]:
    index = 0
    while index < len(line):
        char = line[index]
        if char == "\\":
            index += 2
            continue
        if char in _SEPARATORS or char in _BLANKS:
            break
        index += 1
    key = line[:index]
    rest = line[index:].lstrip(_BLANKS)
    if rest[:1] in tuple(_SEPARATORS):
        rest = rest[1:].lstrip(_BLANKS)
    return key, rest


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char != "\\" or index + 1 == len(text):
            out.append(char)
            index += 1
            continue
        code = text[index + 1]
        if code == "u" and _is_hex(text[index + 2 : index + 6]):
            out.append(chr(int(text[index + 2 : index + 6], 16)))
            index += 6
            continue
        out.append(_ESCAPES.get(code, code))
        index += 2
    return "".join(out)


def _is_hex(text: str) -> bool:
    return len(text) == 4 and all(c in "0123456789abcdefABCDEF" for c in text)
