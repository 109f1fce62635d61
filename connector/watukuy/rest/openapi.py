"""The OpenAPI 3.1 document of every route, served at ``GET /openapi.json``.

Written apart from the routes, so that a test comparing the two catches a route added without
documentation (or documented and never served). The schemas are the contract's shapes. The
operations' entries (per key and per connector: summary, request body) are generated from the
registry, :mod:`watukuy.core.operations`, so an operation added there is documented here.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from functools import cache
from typing import Any

from watukuy.core.lifecycle import Target, TaskState
from watukuy.core.operations import (
    CONNECTOR_OPERATIONS,
    CURSOR_SCHEMA,
    KEY_OPERATIONS,
    ConnectorOperation,
    KeyOperation,
    json_value,
)
from watukuy.rest.control import PARTITION_OPERATIONS

Schema = dict[str, Any]

NAME = "^[A-Za-z0-9._-]+$"
KEY = "^([A-Za-z0-9._-]+|~)$"
STATES = [state.value for state in TaskState]
TARGETS = [target.value for target in Target]


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _object(
    properties: dict[str, Schema], required: list[str] | None = None, **extra: Any
) -> Schema:
    schema: Schema = {"type": "object", "properties": properties}
    schema["required"] = list(properties) if required is None else required
    schema.update(extra)
    return schema


CURSOR: Schema = dict(CURSOR_SCHEMA)
KEY_IN_BODY: Schema = {
    "type": "string",
    "pattern": "^[A-Za-z0-9._-]*$",
    "description": "The partition key ('' for an unpartitioned connector).",
}

SCHEMAS: dict[str, Schema] = {
    "Error": _object(
        {"error_code": {"type": "integer"}, "message": {"type": "string"}},
        additionalProperties=False,
    ),
    "Message": _object({"message": {"type": "string"}}),
    "ClusterInfo": _object(
        {
            "version": {"type": "string"},
            "commit": {"type": "string"},
            "kafka_cluster_id": {"type": ["string", "null"]},
        }
    ),
    "Config": {
        "type": "object",
        "description": "A declarative poller (the keys of a `pollers:` entry, without `name`). "
        "Secrets are written as `${env:NAME}` / `${file:PATH}` and read back as written.",
        "additionalProperties": True,
    },
    "ConfigPatch": {
        "type": "object",
        "description": "JSON Merge Patch (RFC 7386) of the config: `null` removes a key, an "
        "object merges into an object, anything else replaces.",
        "additionalProperties": True,
    },
    "CreateConnector": _object(
        {
            "name": {"type": "string", "pattern": NAME},
            "config": _ref("Config"),
            "initial_state": {"enum": TARGETS, "default": Target.RUNNING.value},
        },
        required=["name", "config"],
        additionalProperties=False,
    ),
    "ConnectorInfo": _object(
        {
            "name": {"type": "string"},
            "config": _ref("Config"),
            "tasks": {
                "type": "array",
                "items": _object({"connector": {"type": "string"}, "task": {"type": "integer"}}),
            },
            "type": {"const": "source"},
        }
    ),
    "WorkerState": _object({"state": {"enum": STATES}, "worker_id": {"type": ["string", "null"]}}),
    "TaskStatus": _object(
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
        },
        required=["id", "state", "worker_id", "partition", "lag", "circuit", "parked", "backfill"],
    ),
    "ConnectorStatus": _object(
        {
            "name": {"type": "string"},
            "connector": _ref("WorkerState"),
            "type": {"const": "source"},
            "tasks": {"type": "array", "items": _ref("TaskStatus")},
        }
    ),
    "ExpandedConnectors": {
        "type": "object",
        "description": "By connector name, the expansions asked for.",
        "additionalProperties": _object(
            {"status": _ref("ConnectorStatus"), "info": _ref("ConnectorInfo")},
            required=[],
            additionalProperties=False,
        ),
    },
    "LaneCursors": {
        "type": "object",
        "properties": {"live": CURSOR, "backfill": CURSOR, "reconcile": CURSOR},
        "additionalProperties": False,
    },
    "KeyOffsets": _object(
        {
            "partition": _object({"key": KEY_IN_BODY}, additionalProperties=False),
            "offset": {"oneOf": [_ref("LaneCursors"), {"type": "null"}]},
        },
        additionalProperties=False,
    ),
    "Offsets": _object({"offsets": {"type": "array", "items": _ref("KeyOffsets")}}),
    "OffsetsPatch": _object(
        {"offsets": {"type": "array", "items": _ref("KeyOffsets"), "minItems": 1}},
        additionalProperties=False,
    ),
    "PartitionInfo": _object(
        {
            "key": {"type": "string"},
            "state": {"enum": STATES},
            "owner": {"type": ["string", "null"]},
        }
    ),
    "ParkedItem": _object(
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
        "items": _object({"class": {"enum": ["http", "python"]}}),
    },
    "Validation": _object(
        {
            "name": {"type": "string"},
            "error_count": {"type": "integer", "minimum": 0},
            "groups": {"type": "array", "items": {"type": "string"}},
            "configs": {
                "type": "array",
                "items": _object(
                    {
                        "value": _object(
                            {
                                "name": {"type": "string"},
                                "errors": {"type": "array", "items": {"type": "string"}},
                            }
                        )
                    }
                ),
            },
        }
    ),
    "Health": _object(
        {"status": {"enum": ["healthy", "starting", "unhealthy"]}, "message": {"type": "string"}}
    ),
    "Healthz": {
        "type": "object",
        "description": "This instance's keys with lag, circuit and parked counts.",
    },
}

ERRORS = {
    400: "Bad input: the message names the field.",
    401: "No valid credentials (`WWW-Authenticate` says which schemes).",
    404: "Unknown route, connector or partition.",
    409: "Conflict: exists already, not STOPPED, or defined in the config file.",
    413: "The body is over the size limit.",
    415: "The body is not `application/json`.",
    500: "Internal error (no detail is given).",
    503: "Kafka or the runner cannot be reached now; try again.",
}

PARAMETERS: dict[str, Schema] = {
    "name": {
        "name": "name",
        "in": "path",
        "required": True,
        "description": "The connector (poller) name.",
        "schema": {"type": "string", "pattern": NAME},
    },
    "key": {
        "name": "key",
        "in": "path",
        "required": True,
        "description": "The partition key; `~` addresses the key '' of an unpartitioned connector.",
        "schema": {"type": "string", "pattern": KEY},
    },
    "plugin": {
        "name": "plugin",
        "in": "path",
        "required": True,
        "description": "The connector class.",
        "schema": {"enum": ["http", "python"]},
    },
}


def _json_content(schema: Schema) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _operation(
    summary: str,
    responses: Mapping[int, tuple[str, Schema | None]],
    *,
    errors: tuple[int, ...] = (),
    body: Schema | None = None,
    body_required: bool = True,
    parameters: tuple[str, ...] = (),
    query: tuple[Schema, ...] = (),
    open_route: bool = False,
    operation_id: str | None = None,
) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "summary": summary,
        "operationId": operation_id or _operation_id(summary),
    }
    params = [{"$ref": f"#/components/parameters/{name}"} for name in parameters]
    params.extend(query)
    if params:
        operation["parameters"] = params
    codes = set(errors) | {500, 503}
    if parameters:
        codes |= {400, 404}
    if body is not None:
        operation["requestBody"] = {"required": body_required, "content": _json_content(body)}
        codes |= {400, 413, 415}
    if not open_route:
        codes.add(401)
    answers: dict[str, Any] = {}
    for code, (description, schema) in responses.items():
        answers[str(code)] = {"description": description}
        if schema is not None:
            answers[str(code)]["content"] = _json_content(schema)
    for code in sorted(codes - set(responses)):
        answers[str(code)] = {"description": ERRORS[code], "content": _json_content(_ref("Error"))}
    operation["responses"] = answers
    if open_route:
        operation["security"] = []
    return operation


def _operation_id(summary: str) -> str:
    words = "".join(c if c.isalnum() else " " for c in summary).split()
    return words[0].lower() + "".join(word.capitalize() for word in words[1:])


def _query(name: str, schema: Schema, description: str, **extra: Any) -> Schema:
    return {"name": name, "in": "query", "description": description, "schema": schema, **extra}


ACCEPTED = {202: ("Accepted.", None)}
INFO = _ref("ConnectorInfo")
C = ("name",)
P = ("name", "key")


# --- the registry's operations --------------------------------------------------------------


def _sentence(summary: str) -> str:
    return summary[:1].upper() + summary[1:]


def arguments_schema(op: KeyOperation, extra: Mapping[str, Schema] | None = None) -> Schema:
    """A key operation's body: one property per argument (its JSON Schema and default), none
    required (every argument has a default), no other (an unknown one is a 400). ``extra``
    comes first, and is required: what the route adds (``partition``)."""
    properties: dict[str, Schema] = copy.deepcopy(dict(extra or {}))
    for argument in op.arguments:
        schema = copy.deepcopy(dict(argument.schema))
        if argument.default is not None:
            schema["default"] = json_value(argument.default, argument.name)
        properties[argument.name] = schema
    return _object(properties, required=list(extra or {}), additionalProperties=False)


def _key_operation(op: KeyOperation, operation_id: str, **extra: Any) -> dict[str, Any]:
    if op.arguments and "body" not in extra:
        extra |= {"body": arguments_schema(op), "body_required": False}
    # 409 where some connector target refuses it (nothing but remove runs while STOPPED)
    errors = (409,) if op.allowed != frozenset(Target) else ()
    return _operation(
        _sentence(op.summary), ACCEPTED, errors=errors, operation_id=operation_id, **extra
    )


def _key_operations() -> dict[str, dict[str, Any]]:
    """``POST .../partitions/{key}/{verb}`` for each routed key operation, ``DELETE
    .../partitions/{key}`` (remove) and ``POST .../parked/retry`` (retry)."""
    paths: dict[str, dict[str, Any]] = {
        f"/connectors/{{name}}/partitions/{{key}}/{verb}": {
            "post": _key_operation(op, f"{_camel(verb)}Partition", parameters=P)
        }
        for verb, op in PARTITION_OPERATIONS.items()
    }
    paths["/connectors/{name}/partitions/{key}"] = {
        "delete": _key_operation(KEY_OPERATIONS["remove"], "removePartition", parameters=P)
    }
    retry = KEY_OPERATIONS["retry"]
    paths["/connectors/{name}/parked/retry"] = {
        "post": _key_operation(
            retry,
            "retryParked",
            parameters=C,
            body=arguments_schema(retry, {"partition": KEY_IN_BODY}),
        )
    }
    return paths


RESTART_QUERY = (
    _query("includeTasks", {"type": "boolean", "default": False}, "Restart its partitions too."),
    _query("onlyFailed", {"type": "boolean", "default": False}, "Only the FAILED ones."),
)


def _connector_operation(op: ConnectorOperation) -> dict[str, Any]:
    """``PUT .../pause`` and the like; ``POST .../restart`` with Connect's two flags."""
    summary, operation_id = _sentence(op.summary), f"{op.name}Connector"
    if op.restarts:
        post = _operation(
            summary, ACCEPTED, parameters=C, query=RESTART_QUERY, operation_id=operation_id
        )
        return {"post": post}
    return {"put": _operation(summary, ACCEPTED, parameters=C, operation_id=operation_id)}


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(word.capitalize() for word in rest)


def _paths() -> dict[str, dict[str, Any]]:
    paths: dict[str, dict[str, Any]] = {
        "/": {
            "get": _operation("Cluster info", {200: ("Version and cluster.", _ref("ClusterInfo"))})
        },
        "/connectors": {
            "get": _operation(
                "List connectors",
                {
                    200: (
                        "Names; with `expand`, an object by name.",
                        {
                            "oneOf": [
                                {"type": "array", "items": {"type": "string"}},
                                _ref("ExpandedConnectors"),
                            ]
                        },
                    )
                },
                errors=(400,),
                query=(
                    _query(
                        "expand",
                        {"type": "array", "items": {"enum": ["status", "info"]}},
                        "Add each connector's status and/or info (both may be given).",
                        style="form",
                        explode=True,
                    ),
                ),
            ),
            "post": _operation(
                "Create a connector",
                {201: ("Created.", INFO)},
                errors=(409,),
                body=_ref("CreateConnector"),
            ),
        },
        "/connectors/{name}": {
            "get": _operation("Get a connector", {200: ("The connector.", INFO)}, parameters=C),
            "delete": _operation(
                "Delete a connector",
                {204: ("Deleted; its keys stop, their state is kept.", None)},
                errors=(409,),
                parameters=C,
            ),
        },
        "/connectors/{name}/config": {
            "get": _operation(
                "Get a connector config",
                {200: ("The config as written (secrets as placeholders).", _ref("Config"))},
                parameters=C,
            ),
            "put": _operation(
                "Create or replace a connector config",
                {200: ("Replaced.", INFO), 201: ("Created.", INFO)},
                errors=(409,),
                parameters=C,
                body=_ref("Config"),
            ),
            "patch": _operation(
                "Patch a connector config",
                {200: ("Merged.", INFO)},
                errors=(409,),
                parameters=C,
                body=_ref("ConfigPatch"),
            ),
        },
        "/connectors/{name}/status": {
            "get": _operation(
                "Get a connector status",
                {200: ("One task per partition.", _ref("ConnectorStatus"))},
                parameters=C,
            )
        },
        "/connectors/{name}/offsets": {
            "get": _operation(
                "Get connector offsets", {200: ("Cursors per key.", _ref("Offsets"))}, parameters=C
            ),
            "patch": _operation(
                "Alter connector offsets",
                {200: ("Altered.", _ref("Message"))},
                errors=(409,),
                parameters=C,
                body=_ref("OffsetsPatch"),
            ),
            "delete": _operation(
                "Reset connector offsets",
                {200: ("Reset.", _ref("Message"))},
                errors=(409,),
                parameters=C,
            ),
        },
        "/connectors/{name}/partitions": {
            "get": _operation(
                "List partitions",
                {
                    200: (
                        "Refreshed now; the owner of each newly listed key is told, and holds it"
                        " within seconds.",
                        {"type": "array", "items": _ref("PartitionInfo")},
                    )
                },
                parameters=C,
            )
        },
        "/connectors/{name}/parked": {
            "get": _operation(
                "List parked items",
                {200: ("Parked items.", {"type": "array", "items": _ref("ParkedItem")})},
                parameters=C,
                query=(
                    _query(
                        "partition",
                        {"type": "string", "pattern": "^([A-Za-z0-9._-]*|~)$"},
                        "Only this key (`~` or empty: the key '').",
                    ),
                    _query("kind", {"enum": ["invalid", "poison"]}, "Only this kind."),
                ),
            )
        },
        "/connector-plugins": {
            "get": _operation("List connector plugins", {200: ("The classes.", _ref("Plugins"))})
        },
        "/connector-plugins/{plugin}/config/validate": {
            "put": _operation(
                "Validate a connector config",
                {200: ("Connect's validation shape.", _ref("Validation"))},
                parameters=("plugin",),
                body=_ref("Config"),
            )
        },
        "/health": {
            "get": _operation(
                "Health",
                {
                    200: ("Healthy.", _ref("Health")),
                    503: ("Starting.", _ref("Health")),
                    500: ("Unhealthy.", _ref("Health")),
                },
                open_route=True,
            )
        },
        "/healthz": {"get": _operation("Keys of this instance", {200: ("Keys.", _ref("Healthz"))})},
        "/metrics": {
            "get": _operation(
                "Prometheus metrics",
                {200: ("Text exposition format.", None)},
            )
        },
        "/openapi.json": {
            "get": _operation("This document", {200: ("OpenAPI 3.1.", {"type": "object"})})
        },
    }
    for op in CONNECTOR_OPERATIONS.values():
        paths[f"/connectors/{{name}}/{op.name}"] = _connector_operation(op)
    paths |= _key_operations()
    paths["/metrics"]["get"]["responses"]["200"]["content"] = {
        "text/plain": {"schema": {"type": "string"}}
    }
    return paths


@cache
def openapi_document() -> dict[str, Any]:
    """The document (built once; callers must not change it)."""
    from watukuy import __version__

    return {
        "openapi": "3.1.0",
        "info": {
            "title": "watukuy REST API",
            "version": __version__,
            "description": "Kafka Connect-style control of watukuy's pollers (connectors). "
            'Errors are `{"error_code", "message"}`. With `rest.auth` set, every route but '
            "`GET /health` needs a bearer token or basic credentials. A partition key `''` (an "
            "unpartitioned connector's only key) is written `~` in paths and queries.",
        },
        "paths": _paths(),
        "components": {
            "schemas": SCHEMAS,
            "parameters": PARAMETERS,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "basic": {"type": "http", "scheme": "basic"},
            },
        },
        "security": [{"bearer": []}, {"basic": []}],
    }
