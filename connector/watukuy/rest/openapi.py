"""The OpenAPI 3.1 document of every route, served at ``GET /openapi.json``.

Written apart from the routes, so that a test comparing the two catches a route added without
documentation (or documented and never served). The schemas are the contract's shapes
(:mod:`watukuy.rest.schemas`). The operations' entries (per key and per connector: summary,
request body) are generated from the registry, :mod:`watukuy.core.operations`, so an operation
added there is documented here.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from functools import cache
from typing import Any

from watukuy.core.lifecycle import Target
from watukuy.core.operations import (
    CONNECTOR_OPERATIONS,
    KEY_OPERATIONS,
    ConnectorOperation,
    KeyOperation,
    json_value,
)
from watukuy.core.version import VERSION
from watukuy.rest.port import PARTITION_OPERATIONS
from watukuy.rest.schemas import (
    KEY_IN_BODY,
    PARAMETERS,
    SCHEMAS,
    Schema,
    object_schema,
    ref,
)

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
        answers[str(code)] = {"description": ERRORS[code], "content": _json_content(ref("Error"))}
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
INFO = ref("ConnectorInfo")
FORMAT = _query(
    "format",
    {"enum": ["flat", "nested"], "default": "flat"},
    "The config's form in the answer: Connect's flat map of strings, or the nested poller.",
)
C = ("name",)
P = ("name", "key")
T = ("name", "id")
L = ("logger",)
STRING = {"type": "string"}
KEY_QUERY = "^(([A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*)?|~)$"


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
    return object_schema(properties, required=list(extra or {}), additionalProperties=False)


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
    """Every route, in the order the contract lists them: the connectors, their configs and
    status, what their keys hold, the runner's own routes; then the registry's operations."""
    paths = _connector_paths() | _config_paths() | _stored_paths() | _runner_paths()
    paths |= _logger_paths()
    for op in CONNECTOR_OPERATIONS.values():
        paths[f"/connectors/{{name}}/{op.name}"] = _connector_operation(op)
    return paths | _key_operations()


Paths = dict[str, dict[str, Any]]


def _connector_paths() -> Paths:
    return {
        "/": {
            "get": _operation("Cluster info", {200: ("Version and cluster.", ref("ClusterInfo"))})
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
                                ref("ExpandedConnectors"),
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
                    FORMAT,
                ),
            ),
            "post": _operation(
                "Create a connector",
                {201: ("Created.", INFO)},
                errors=(409,),
                body=ref("CreateConnector"),
                query=(FORMAT,),
            ),
        },
        "/connectors/{name}": {
            "get": _operation(
                "Get a connector", {200: ("The connector.", INFO)}, parameters=C, query=(FORMAT,)
            ),
            "delete": _operation(
                "Delete a connector",
                {204: ("Deleted; its keys stop, their state is kept.", None)},
                errors=(409,),
                parameters=C,
            ),
        },
    }


def _config_paths() -> Paths:
    return {
        "/connectors/{name}/config": {
            "get": _operation(
                "Get a connector config",
                {200: ("The config as written (secrets as placeholders).", ref("Config"))},
                parameters=C,
                query=(FORMAT,),
            ),
            "put": _operation(
                "Create or replace a connector config",
                {200: ("Replaced.", INFO), 201: ("Created.", INFO)},
                errors=(409,),
                parameters=C,
                body=ref("Config"),
                query=(FORMAT,),
            ),
            "patch": _operation(
                "Patch a connector config",
                {200: ("Merged.", INFO)},
                errors=(409,),
                parameters=C,
                body=ref("ConfigPatch"),
                query=(FORMAT,),
            ),
        },
        "/connectors/{name}/status": {
            "get": _operation(
                "Get a connector status",
                {200: ("One task per partition.", ref("ConnectorStatus"))},
                parameters=C,
            )
        },
    } | _task_paths()


def _task_paths() -> Paths:
    """Connect's task routes: a task is a partition key, its id the key's index in key order."""
    return {
        "/connectors/{name}/tasks": {
            "get": _operation(
                "List connector tasks",
                {
                    200: (
                        "One task per partition, in key order (the status's ids).",
                        {"type": "array", "items": ref("TaskInfo")},
                    )
                },
                parameters=C,
            )
        },
        "/connectors/{name}/tasks/{id}/status": {
            "get": _operation(
                "Get a task status",
                {200: ("The task's entry of the status.", ref("TaskStatus"))},
                parameters=T,
            )
        },
        "/connectors/{name}/tasks/{id}/restart": {
            "post": _operation(
                "Restart a task",
                {204: ("Its partition is triggered: polled now.", None)},
                errors=(409,),
                parameters=T,
            )
        },
        "/connectors/{name}/topics": {
            "get": _operation(
                "Get connector active topics",
                {200: ("KIP-558: the topics it published to.", ref("ActiveTopics"))},
                parameters=C,
            )
        },
        "/connectors/{name}/topics/reset": {
            "put": _operation(
                "Reset connector active topics",
                {202: ("Forgotten; the next publish to a topic lists it again.", None)},
                parameters=C,
            )
        },
    }


def _stored_paths() -> Paths:
    """Offsets, partitions and parked items: what a connector's keys hold."""
    return {
        "/connectors/{name}/offsets": {
            "get": _operation(
                "Get connector offsets", {200: ("Cursors per key.", ref("Offsets"))}, parameters=C
            ),
            "patch": _operation(
                "Alter connector offsets",
                {200: ("Altered.", ref("Message"))},
                errors=(409,),
                parameters=C,
                body=ref("OffsetsPatch"),
            ),
            "delete": _operation(
                "Reset connector offsets",
                {200: ("Reset.", ref("Message"))},
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
                        {"type": "array", "items": ref("PartitionInfo")},
                    )
                },
                parameters=C,
            )
        },
        "/connectors/{name}/parked": {
            "get": _operation(
                "List parked items",
                {200: ("Parked items.", {"type": "array", "items": ref("ParkedItem")})},
                parameters=C,
                query=(
                    _query(
                        "partition",
                        {"type": "string", "pattern": KEY_QUERY},
                        "Only this key (`~` or empty: the key '').",
                    ),
                    _query("kind", {"enum": ["invalid", "poison"]}, "Only this kind."),
                ),
            )
        },
    }


def _runner_paths() -> Paths:
    paths: Paths = {
        "/connector-plugins": {
            "get": _operation("List connector plugins", {200: ("The classes.", ref("Plugins"))})
        },
        "/connector-plugins/{plugin}/config/validate": {
            "put": _operation(
                "Validate a connector config",
                {200: ("Connect's validation shape.", ref("Validation"))},
                parameters=("plugin",),
                body=ref("Config"),
            )
        },
        "/health": {
            "get": _operation(
                "Health",
                {
                    200: ("Healthy.", ref("Health")),
                    503: ("Starting.", ref("Health")),
                    500: ("Unhealthy.", ref("Health")),
                },
                open_route=True,
            )
        },
        "/healthz": {"get": _operation("Keys of this instance", {200: ("Keys.", ref("Healthz"))})},
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
    paths["/metrics"]["get"]["responses"]["200"]["content"] = {
        "text/plain": {"schema": {"type": "string"}}
    }
    return paths


def _logger_paths() -> Paths:
    """KIP-495's log levels at run time."""
    scope = _query(
        "scope",
        {"enum": ["worker", "cluster"], "default": "worker"},
        "`worker`: this instance; `cluster`: every instance, through Kafka (any case).",
    )
    paths: Paths = {
        "/admin/loggers": {
            "get": _operation("List loggers", {200: ("`root` and those set.", ref("Loggers"))})
        },
        "/admin/loggers/{logger}": {
            "get": _operation(
                "Get a logger level", {200: ("Its level.", ref("LoggerLevel"))}, parameters=L
            ),
            "put": _operation(
                "Set a logger level",
                {
                    200: ("Worker scope: the loggers set.", {"type": "array", "items": STRING}),
                    204: ("Cluster scope: written for every instance.", None),
                },
                parameters=L,
                query=(scope,),
                body=ref("LoggerLevelChange"),
            ),
        },
    }
    del paths["/admin/loggers/{logger}"]["put"]["responses"]["404"]  # a new name is created
    return paths


@cache
def openapi_document() -> dict[str, Any]:
    """The document (built once; callers must not change it)."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "watukuy REST API",
            "version": VERSION,
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
