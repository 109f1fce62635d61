"""The Confluent wire format: magic ``0``, the 4-byte big-endian schema id, the Avro body.

Schemas are registered under ``<topic>-value`` (TopicNameStrategy) through confluent-kafka's
:class:`SchemaRegistryClient` (a ``mock://`` URL gives its in-memory mock); the body is written
by fastavro, as in the single-object encoding. Credentials go to the client as
``basic.auth.user.info`` and never into an error message.
"""

from __future__ import annotations

import io
import threading
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import unquote, urlsplit, urlunsplit

from watukuy.core.errors import ConfigError, Retriable
from watukuy.core.events import Event
from watukuy.serde import framing
from watukuy.serde.events import (
    CONFLUENT_HEADER,
    CONFLUENT_MAGIC,
    EventSchemas,
    SchemaNotFound,
    UndecodableEvent,
    WriterSchema,
    event_of,
    read_body,
    write_body,
)

if TYPE_CHECKING:  # the client is imported where it is used: only registry mode needs it, and
    # it brings httpx and authlib with it (0.2 s of every other runner's start)
    from confluent_kafka.schema_registry import SchemaRegistryClient

MAGIC = CONFLUENT_MAGIC
HEADER = CONFLUENT_HEADER


REGISTRY_TIMEOUT = 30
"""Seconds a registry request may take: the client's default is to wait for ever, and a
registry that accepts a connection and never answers hung a whole CI run."""


def registry_client(
    url: str, basic_auth: str | None = None, *, timeout: int = REGISTRY_TIMEOUT
) -> SchemaRegistryClient:
    """A client for ``url`` (``http(s)://`` or ``mock://``), basic auth ``"user:password"``,
    whose requests give up after ``timeout`` seconds.

    Credentials written into the URL are moved to ``basic.auth.user.info``, so the URL the
    client reports in errors never holds them.
    """
    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None:
        if basic_auth is not None:
            raise ConfigError(
                "credentials are given both in the URL and as basic.auth.user.info",
                "schema.registry.url",
            )
        basic_auth = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
        host = parts.netloc.rpartition("@")[2]
        url = urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
    conf: dict[str, str | int] = {"url": url, "timeout": timeout}
    if basic_auth is not None:
        if ":" not in basic_auth:
            raise ConfigError("must be 'user:password'", "schema.registry.basic.auth.user.info")
        conf["basic.auth.user.info"] = basic_auth
    from confluent_kafka.schema_registry import SchemaRegistryClient

    try:
        return SchemaRegistryClient.new_client(conf)
    except (ValueError, TypeError) as exc:
        raise ConfigError(_scrub(str(exc), basic_auth), "schema.registry.url") from None


def _scrub(text: str, basic_auth: str | None) -> str:
    if basic_auth:
        text = text.replace(basic_auth, "***")
        password = basic_auth.partition(":")[2]
        if password:
            text = text.replace(password, "***")
    return text


def _failure(client: SchemaRegistryClient, what: str, exc: Exception) -> Exception:
    """A registry failure as watukuy's error, without credentials."""
    from confluent_kafka.schema_registry import SchemaRegistryError

    auth = cast(Any, client).config().get("basic.auth.user.info")  # untyped in the client
    message = f"schema registry: {what}: " + _scrub(f"{type(exc).__name__}: {exc}", auth)
    if isinstance(exc, SchemaRegistryError):
        status = exc.http_status_code
        if status == 404:
            return SchemaNotFound(message)
        if status in (401, 403, 409, 422):  # credentials, or an incompatible schema
            return ConfigError(message)
    return Retriable(message)


class ConfluentEventEncoder:
    """Encodes the events of one topic: subject ``<topic>-value``, each schema registered once."""

    def __init__(self, client: SchemaRegistryClient, topic: str) -> None:
        self.client = client
        self.topic = topic
        self.subject = f"{topic}-value"
        self._ids: dict[bytes, int] = {}
        self._lock = threading.Lock()

    def schema_id(self, writer: WriterSchema) -> int:
        """The registry id of ``writer`` under this subject (registered on first use)."""
        found = self._ids.get(writer.schema.fingerprint)
        if found is not None:
            return found
        from confluent_kafka.schema_registry import Schema

        with self._lock:
            try:
                schema_id = self.client.register_schema(self.subject, Schema(writer.text, "AVRO"))
            except Exception as exc:  # the client raises its own and httpx's errors
                raise _failure(self.client, f"cannot register {self.subject}", exc) from None
            self._ids[writer.schema.fingerprint] = schema_id
            return schema_id

    def encode(self, event: Event, schemas: EventSchemas, *, validated: bool = False) -> bytes:
        """Magic 0 + schema id + body (``validated``: see :func:`~.events.event_record`)."""
        writer = schemas.writer(event.poller)
        out = io.BytesIO()
        out.write(MAGIC)
        out.write(self.schema_id(writer).to_bytes(4, "big"))
        write_body(out, event, writer, validated=validated)
        return out.getvalue()


def schema_id_of(raw: bytes) -> int:
    if len(raw) < HEADER or raw[:1] != MAGIC:
        raise UndecodableEvent("not in the Confluent wire format (no magic byte 0)")
    return int.from_bytes(raw[1:HEADER], "big")


class ConfluentEventDecoder:
    """Decodes Confluent-framed events, fetching each writer schema by id once."""

    def __init__(self, client: SchemaRegistryClient) -> None:
        self.client = client
        self._schemas: dict[int, framing.Schema] = {}

    def schema(self, schema_id: int) -> framing.Schema:
        found = self._schemas.get(schema_id)
        if found is None:
            try:
                registered = self.client.get_schema(schema_id)
            except Exception as exc:  # the client raises its own and httpx's errors
                raise _failure(self.client, f"cannot fetch schema id {schema_id}", exc) from None
            if registered.schema_type not in (None, "AVRO") or registered.schema_str is None:
                raise UndecodableEvent(f"schema id {schema_id} is not an Avro schema")
            found = self._schemas[schema_id] = framing.Schema.of(registered.schema_str)
        return found

    def __call__(self, raw: bytes) -> Event:
        schema_id = schema_id_of(raw)
        return event_of(read_body(raw, HEADER, self.schema(schema_id)))

    decode = __call__
