"""The schemas and path parameters of the OpenAPI document (its ``components``): the contract's
shapes of every body REST reads or writes. States and targets come from
:mod:`watukuy.core.lifecycle`, a cursor's schema from :mod:`watukuy.core.operations`."""

from __future__ import annotations

from typing import Any

from watukuy.core.keys import POLLER_NAME
from watukuy.core.lifecycle import Target, TaskState
from watukuy.core.loglevels import LEVELS, LOGGER_NAME
from watukuy.core.operations import CURSOR_SCHEMA

__all__ = ["KEY_IN_BODY", "PARAMETERS", "SCHEMAS", "Schema", "object_schema", "ref"]

Schema = dict[str, Any]

NAME = f"^{POLLER_NAME.pattern}$"
KEY = "^([A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*|~)$"
"""A key in a path: a child stream's key joins its parts with ``/`` (written ``%2F``)."""
STATES = [state.value for state in TaskState]
TARGETS = [target.value for target in Target]
LOG_LEVELS = list(LEVELS)


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def object_schema(
    properties: dict[str, Schema], required: list[str] | None = None, **extra: Any
) -> Schema:
    schema: Schema = {"type": "object", "properties": properties}
    schema["required"] = list(properties) if required is None else required
    schema.update(extra)
    return schema


CURSOR: Schema = dict(CURSOR_SCHEMA)
KEY_IN_BODY: Schema = {
    "type": "string",
    "pattern": "^([A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*)?$",
    "description": "The partition key ('' for an unpartitioned connector).",
}

SCHEMAS: dict[str, Schema] = {
    "Error": object_schema(
        {"error_code": {"type": "integer"}, "message": {"type": "string"}},
        additionalProperties=False,
    ),
    "Message": object_schema({"message": {"type": "string"}}),
    "LoggerLevel": object_schema(
        {
            "level": {"enum": LOG_LEVELS},
            "last_modified": {
                "type": ["integer", "null"],
                "description": "When this instance last changed it through the API (epoch ms).",
            },
        },
        additionalProperties=False,
    ),
    "Loggers": {"type": "object", "additionalProperties": ref("LoggerLevel")},
    "LoggerLevelChange": object_schema(
        {"level": {"type": "string", "description": f"One of {', '.join(LOG_LEVELS)} (any case)."}}
    ),
    "ClusterInfo": object_schema(
        {
            "version": {"type": "string"},
            "commit": {"type": "string"},
            "kafka_cluster_id": {"type": ["string", "null"]},
        }
    ),
    "Config": {
        "type": "object",
        "description": "Connect's form: `connector.class` (`http` or `python`), `name`, and "
        "one string per setting by its dotted path (`request.url`, `schedule.min`); a list or "
        "a map a dotted path cannot name is one key holding JSON text. With `?format=nested`, "
        "or when `connector.class` is absent on input: a declarative poller (the keys of a "
        "`pollers:` entry, without `name`). Secrets are written as `${env:NAME}` / "
        "`${file:PATH}` and read back as written.",
        "additionalProperties": True,
    },
    "ConfigPatch": {
        "type": "object",
        "description": "Flat keys (KIP-477: a dotted key or only string/null values): each "
        "given key is set, `null` removes it. Otherwise a JSON Merge Patch (RFC 7386) of the "
        "nested config: `null` removes a key, an object merges into an object.",
        "additionalProperties": True,
    },
    "CreateConnector": object_schema(
        {
            "name": {"type": "string", "pattern": NAME},
            "config": ref("Config"),
            "initial_state": {"enum": TARGETS, "default": Target.RUNNING.value},
        },
        required=["name", "config"],
        additionalProperties=False,
    ),
    "ConnectorInfo": object_schema(
        {
            "name": {"type": "string"},
            "config": ref("Config"),
            "tasks": {
                "type": "array",
                "items": object_schema(
                    {"connector": {"type": "string"}, "task": {"type": "integer"}}
                ),
            },
            "type": {"const": "source"},
        }
    ),
    "WorkerState": object_schema(
        {"state": {"enum": STATES}, "worker_id": {"type": ["string", "null"]}}
    ),
    "TaskStatus": object_schema(
        {
            "id": {"type": "integer", "description": "The partition's index in key order."},
            "state": {"enum": STATES},
            "worker_id": {"type": ["string", "null"]},
            "partition": {"type": "string"},
            "lag": {"type": ["number", "null"], "description": "Seconds since the last poll."},
            "circuit": {"enum": ["closed", "open", "half-open"]},
            "parked": {"type": "object", "additionalProperties": {"type": "integer"}},
            "backfill": {"type": "boolean"},
            "trace": {
                "type": "string",
                "description": "Why a FAILED or UNASSIGNED task is so; absent otherwise.",
            },
            "stream": {
                "type": "string",
                "description": "The key's stream, in the status of a connector with streams.",
            },
        },
        required=["id", "state", "worker_id", "partition", "lag", "circuit", "parked", "backfill"],
    ),
    "TaskInfo": object_schema(
        {
            "id": object_schema({"connector": {"type": "string"}, "task": {"type": "integer"}}),
            "config": {
                "type": "object",
                "description": "The task's partition key (and stream); never partition data "
                "or secrets.",
                "additionalProperties": {"type": "string"},
            },
        }
    ),
    "ConnectorStatus": object_schema(
        {
            "name": {"type": "string"},
            "connector": ref("WorkerState"),
            "type": {"const": "source"},
            "tasks": {"type": "array", "items": ref("TaskStatus")},
        }
    ),
    "ExpandedConnectors": {
        "type": "object",
        "description": "By connector name, the expansions asked for.",
        "additionalProperties": object_schema(
            {"status": ref("ConnectorStatus"), "info": ref("ConnectorInfo")},
            required=[],
            additionalProperties=False,
        ),
    },
    "ActiveTopics": {
        "type": "object",
        "description": "By connector name (the one asked for), its topics.",
        "additionalProperties": object_schema(
            {"topics": {"type": "array", "items": {"type": "string"}}}
        ),
    },
    "LaneCursors": {
        "type": "object",
        "properties": {"live": CURSOR, "backfill": CURSOR, "reconcile": CURSOR},
        "additionalProperties": False,
    },
    "KeyOffsets": object_schema(
        {
            "partition": object_schema({"key": KEY_IN_BODY}, additionalProperties=False),
            "offset": {"oneOf": [ref("LaneCursors"), {"type": "null"}]},
        },
        additionalProperties=False,
    ),
    "Offsets": object_schema({"offsets": {"type": "array", "items": ref("KeyOffsets")}}),
    "OffsetsPatch": object_schema(
        {"offsets": {"type": "array", "items": ref("KeyOffsets"), "minItems": 1}},
        additionalProperties=False,
    ),
    "PartitionInfo": object_schema(
        {
            "key": {"type": "string"},
            "state": {"enum": STATES},
            "owner": {"type": ["string", "null"]},
        }
    ),
    "ParkedItem": object_schema(
        {
            "id": {"type": "string"},
            "partition": {"type": "string"},
            "kind": {"enum": ["invalid", "poison"]},
            "error": {"type": "string"},
            "attempts": {"type": "integer"},
        },
        description="An item that could not become an event; never partition data.",
        additionalProperties=True,
    ),
    "Plugins": {
        "type": "array",
        "items": object_schema({"class": {"enum": ["http", "python"]}}),
    },
    "Validation": object_schema(
        {
            "name": {"type": "string"},
            "error_count": {"type": "integer", "minimum": 0},
            "groups": {"type": "array", "items": {"type": "string"}},
            "configs": {"type": "array", "items": ref("ConfigInfo")},
            "warnings": {
                "type": "array",
                "items": {"type": "string"},
                "description": "watukuy's, not Connect's: present when a valid config's "
                "transform changed since its connector last published.",
            },
        },
        required=["name", "error_count", "groups", "configs"],
    ),
    "ConfigInfo": object_schema(
        {
            "definition": object_schema(
                {
                    "name": {"type": "string"},
                    "type": {"enum": ["STRING", "INT", "DOUBLE", "BOOLEAN", "LIST", "PASSWORD"]},
                    "required": {"type": "boolean"},
                    "default_value": {"type": ["string", "null"]},
                    "importance": {"enum": ["HIGH", "MEDIUM", "LOW"]},
                    "documentation": {"type": "string"},
                    "group": {"type": "string"},
                    "order_in_group": {"type": "integer"},
                    "width": {"type": "string"},
                    "display_name": {"type": "string"},
                    "dependents": {"type": "array", "items": {"type": "string"}},
                }
            ),
            "value": object_schema(
                {
                    "name": {"type": "string"},
                    "value": {
                        "type": ["string", "null"],
                        "description": "As given, or the default; a secret is `[redacted]`.",
                    },
                    "recommended_values": {"type": "array", "items": {"type": "string"}},
                    "errors": {"type": "array", "items": {"type": "string"}},
                    "visible": {"type": "boolean"},
                }
            ),
        }
    ),
    "Health": object_schema(
        {"status": {"enum": ["healthy", "starting", "unhealthy"]}, "message": {"type": "string"}}
    ),
    "Healthz": {
        "type": "object",
        "description": "This instance's keys with lag, circuit and parked counts.",
    },
}

PARAMETERS: dict[str, Schema] = {
    "name": {
        "name": "name",
        "in": "path",
        "required": True,
        "description": "The connector (poller) name; a stream of a connector is "
        "`{connector}.{stream}`, the name per-key routes take.",
        "schema": {"type": "string", "pattern": NAME},
    },
    "key": {
        "name": "key",
        "in": "path",
        "required": True,
        "description": "The partition key; `~` addresses the key '' of an unpartitioned connector; "
        "a child key's `/` is written `%2F`.",
        "schema": {"type": "string", "pattern": KEY},
    },
    "id": {
        "name": "id",
        "in": "path",
        "required": True,
        "description": "The task: its partition's index in key order (as in the status).",
        "schema": {"type": "integer", "minimum": 0},
    },
    "plugin": {
        "name": "plugin",
        "in": "path",
        "required": True,
        "description": "The connector class.",
        "schema": {"enum": ["http", "python"]},
    },
    "logger": {
        "name": "logger",
        "in": "path",
        "required": True,
        "description": "A logger's dotted name (`watukuy.engine`), or `root`.",
        "schema": {"type": "string", "pattern": f"^{LOGGER_NAME.pattern}$"},
    },
}
