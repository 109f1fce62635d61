"""``${env:NAME}``, ``${file:PATH}`` and ``${file:PATH:KEY}`` in config strings.

Resolution records which config paths got their value from a reference and what those values
were, so that nothing printed later (errors, ``repr``, ``describe()``) shows them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from watukuy.core.errors import ConfigError
from watukuy.core.validation import join
from watukuy.options.properties import parse_properties

REDACTED = "[redacted]"
_REFERENCE = re.compile(r"\$\{([A-Za-z0-9_.-]*):([^}]*)\}")
_SYNTAX = "use ${env:NAME}, ${file:PATH} or ${file:PATH:KEY}"
_SCRUB_MIN_LENGTH = 4  # shorter values are scrubbed only where they appear quoted


@dataclass(frozen=True, slots=True)
class Written:
    """A config string that held ``${...}`` references: as written, and in resolved pieces.

    Templates use it so that braces inside a resolved secret stay literal text, and so that
    what an error shows of a URL is the reference (``${env:VENDOR_URL}/{partition.key}``), never
    its value.
    """

    raw: str
    pieces: tuple[tuple[str, bool], ...]
    """``(text, from_reference)`` in order; joined, the resolved string."""

    @property
    def resolved(self) -> str:
        return "".join(text for text, _ in self.pieces)


class Secrets:
    """Config paths whose values are secret, and the secret values themselves."""

    def __init__(self) -> None:
        self.paths: set[str] = set()
        self.values: set[str] = set()
        self.written: dict[str, Written] = {}
        """The strings that held references, by config path (``pollers[0].request.url``)."""

    def covers(self, path: str) -> bool:
        """Whether ``path`` or a section holding it is secret."""
        return any(path == p or path.startswith((f"{p}.", f"{p}[")) for p in self.paths)

    def show(self, value: object, path: str) -> str:
        """``value`` as an error message may print it."""
        return REDACTED if self.covers(path) else repr(value)

    def scrub(self, text: str) -> str:
        """``text`` with every secret value replaced by ``[redacted]``."""
        for value in sorted(self.values, key=len, reverse=True):
            if not value:
                continue
            text = text.replace(repr(value), repr(REDACTED))
            if len(value) >= _SCRUB_MIN_LENGTH:
                for spelling in (repr(value)[1:-1], value):
                    text = text.replace(spelling, REDACTED)
        return text


def resolve_references(
    data: Mapping[str, Any], base_dir: Path, environ: Mapping[str, str] | None = None
) -> tuple[dict[str, Any], Secrets]:
    """A copy of ``data`` with every reference replaced by its value."""
    resolver = _Resolver(base_dir, os.environ if environ is None else environ)
    resolved = {key: resolver.walk(value, join("", key)) for key, value in data.items()}
    return resolved, resolver.secrets


class _Resolver:
    def __init__(self, base_dir: Path, environ: Mapping[str, str]) -> None:
        self.base_dir = base_dir
        self.environ = environ
        self.secrets = Secrets()

    def walk(self, node: Any, path: str) -> Any:
        if isinstance(node, str):
            return self.substitute(node, path)
        if isinstance(node, Mapping):
            return {key: self.walk(value, join(path, key)) for key, value in node.items()}
        if isinstance(node, list):
            return [self.walk(value, f"{path}[{index}]") for index, value in enumerate(node)]
        return node

    def substitute(self, text: str, path: str) -> str:
        if "${" not in text:
            return text
        pieces: list[tuple[str, bool]] = []
        done = 0
        for match in _REFERENCE.finditer(text):
            if match.start() > done:
                pieces.append((text[done : match.start()], False))
            value = self.lookup(match.group(1), match.group(2), path)
            self.secrets.values.add(value)
            pieces.append((value, True))
            done = match.end()
        if not pieces:
            return text
        if done < len(text):
            pieces.append((text[done:], False))
        written = Written(text, tuple(pieces))
        self.secrets.paths.add(path)
        self.secrets.values.add(written.resolved)
        self.secrets.written[path] = written
        return written.resolved

    def lookup(self, provider: str, argument: str, path: str) -> str:
        if provider == "env":
            return self.env(argument, path)
        if provider == "file":
            return self.file(argument, path)
        raise ConfigError(f"unknown config provider {provider!r}; {_SYNTAX}", path)

    def env(self, name: str, path: str) -> str:
        if not name:
            raise ConfigError(f"${{env:}} needs a variable name; {_SYNTAX}", path)
        value = self.environ.get(name)
        if value is None:
            raise ConfigError(f"environment variable {name!r} is not set", path)
        return value

    def file(self, argument: str, path: str) -> str:
        location, sep, key = argument.rpartition(":")
        if not sep:
            location, key = argument, ""
        elif not key:
            raise ConfigError(f"${{file:PATH:KEY}} needs a key after the colon; {_SYNTAX}", path)
        if not location:
            raise ConfigError(f"${{file:...}} needs a file path; {_SYNTAX}", path)
        file = Path(location).expanduser()
        if not file.is_absolute():
            file = self.base_dir / file
        text = _read(file, path)
        if not sep:
            return _strip_newline(text)
        properties = parse_properties(text)
        if key not in properties:
            raise ConfigError(f"key {key!r} not found in properties file '{file}'", path)
        return properties[key]


def _read(file: Path, path: str) -> str:
    try:
        text = file.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"secret file '{file}' not found", path) from None
    except IsADirectoryError:
        raise ConfigError(f"secret file '{file}' is a directory", path) from None
    except OSError as exc:
        raise ConfigError(f"cannot read secret file '{file}': {exc.strerror}", path) from None
    except UnicodeDecodeError:
        raise ConfigError(f"secret file '{file}' is not UTF-8 text", path) from None
    return text


def _strip_newline(text: str) -> str:
    for ending in ("\r\n", "\n"):
        if text.endswith(ending):
            return text[: -len(ending)]
    return text
