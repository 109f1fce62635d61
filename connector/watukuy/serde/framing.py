"""Avro single-object encoding (Avro spec, "Single object encoding").

A value is ``C3 01``, the 8-byte little-endian CRC-64-AVRO fingerprint of the writer schema's
Parsing Canonical Form, then the Avro binary body. A reader finds the writer schema by that
fingerprint, so values written by an older release stay readable through schema resolution.

fastavro returns the fingerprint as the hex of exactly those little-endian bytes (it follows
the Java implementation), so ``bytes.fromhex`` gives the header as the spec lays it out.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fastavro import schemaless_reader, schemaless_writer
from fastavro.schema import fingerprint, parse_schema, to_parsing_canonical_form

from watukuy.core.errors import StateCorrupted

MAGIC = b"\xc3\x01"
HEADER = len(MAGIC) + 8


@dataclass(frozen=True)
class Schema:
    """A parsed writer/reader schema with what framing needs, computed once."""

    parsed: Any
    canonical: str
    fingerprint: bytes  # 8 bytes, little-endian, as on the wire

    @property
    def fingerprint_hex(self) -> str:
        return self.fingerprint.hex()

    @classmethod
    def of(cls, schema: Mapping[str, Any] | str | list[Any]) -> Schema:
        given = json.loads(schema) if isinstance(schema, str) else schema
        parsed = parse_schema(dict(given) if isinstance(given, Mapping) else given)
        canonical = to_parsing_canonical_form(parsed)
        return cls(parsed, canonical, bytes.fromhex(fingerprint(canonical, "CRC-64-AVRO")))


def encode(schema: Schema, value: Any) -> bytes:
    out = io.BytesIO()
    out.write(MAGIC)
    out.write(schema.fingerprint)
    schemaless_writer(out, schema.parsed, value)
    return out.getvalue()


def fingerprint_of(raw: bytes) -> bytes:
    if len(raw) < HEADER or raw[:2] != MAGIC:
        raise StateCorrupted("not an Avro single-object value (no C3 01 header)")
    return raw[2:HEADER]


def decode(raw: bytes, writer: Schema, reader: Schema | None = None) -> Any:
    """The value of ``raw``, written with ``writer``, read as ``reader`` (default: writer)."""
    if fingerprint_of(raw) != writer.fingerprint:
        raise StateCorrupted("the value was written with another schema than the one given")
    body = io.BytesIO(raw[HEADER:])
    try:
        if reader is None or reader.fingerprint == writer.fingerprint:
            return schemaless_reader(body, writer.parsed, None)
        return schemaless_reader(body, writer.parsed, reader.parsed)
    except Exception as exc:  # fastavro raises many types for a bad body
        raise StateCorrupted(f"unreadable Avro value: {type(exc).__name__}: {exc}") from exc
