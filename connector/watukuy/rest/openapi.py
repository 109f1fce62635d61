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
from watukuy.rest.openapi_ops import (
    ACCEPTED,
    C,
    P,
    operation,
    query_param,
)
from watukuy.rest.openapi_routes import (
    config_paths,
    connector_paths,
    logger_paths,
    runner_paths,
    stored_paths,
)
from watukuy.rest.port import PARTITION_OPERATIONS
from watukuy.rest.schemas import (
    KEY_IN_BODY,
    PARAMETERS,
    SCHEMAS,
    Schema,
    object_schema,
)

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
    return operation(
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
    paths["/connectors/{name}/partitions/{key}/credentials"] = {
        "put": operation(
            "Hand in a grant the tenant authorised anew: saved in the credential store (never "
            "shown again), and the tenant's keys on every stream resume",
            ACCEPTED,
            parameters=P,
            errors=(409,),  # a grant the store holds already, for a tenant needing authorising
            operation_id="putPartitionCredentials",
            body=object_schema(
                {"refresh_token": {"type": "string", "minLength": 1, "maxLength": 8192}},
                required=["refresh_token"],
                additionalProperties=False,
            ),
        )
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
    query_param(
        "includeTasks", {"type": "boolean", "default": False}, "Restart its partitions too."
    ),
    query_param("onlyFailed", {"type": "boolean", "default": False}, "Only the FAILED ones."),
)


def _connector_operation(op: ConnectorOperation) -> dict[str, Any]:
    """``PUT .../pause`` and the like; ``POST .../restart`` with Connect's two flags."""
    summary, operation_id = _sentence(op.summary), f"{op.name}Connector"
    if op.restarts:
        post = operation(
            summary, ACCEPTED, parameters=C, query=RESTART_QUERY, operation_id=operation_id
        )
        return {"post": post}
    return {"put": operation(summary, ACCEPTED, parameters=C, operation_id=operation_id)}


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(word.capitalize() for word in rest)


def _paths() -> dict[str, dict[str, Any]]:
    """Every route, in the order the contract lists them: the connectors, their configs and
    status, what their keys hold, the runner's own routes; then the registry's operations."""
    paths = connector_paths() | config_paths() | stored_paths() | runner_paths()
    paths |= logger_paths()
    for op in CONNECTOR_OPERATIONS.values():
        paths[f"/connectors/{{name}}/{op.name}"] = _connector_operation(op)
    return paths | _key_operations()


@cache
def webhook_operation() -> dict[str, Any]:
    """A connector's webhook path (``webhook.path``), listed as the runner serves it."""
    entry = operation(
        "Receive a vendor's webhook: its signature checked, the keys it names woken through "
        "Kafka; 202 once the wakes are durable, 503 when Kafka does not take them",
        ACCEPTED,
        errors=(400, 413),
        body={"description": "The vendor's payload, as signed (read for its tenant and keys)"},
        open_route=True,  # the signature is its authentication: 401 when it does not hold
        operation_id=None,
    )
    entry["responses"].pop("415", None)  # the body is read as bytes, whatever its type
    entry["responses"]["401"] = {
        "description": "The signature is missing or does not hold; nothing was woken.",
        "content": entry["responses"]["400"]["content"],
    }
    return {"post": entry}


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
