"""The OpenAPI entries of the routes written by hand (:mod:`watukuy.rest.openapi` adds the
registry's operations): the connectors, their configs, tasks and status, what their keys hold,
the runner's own routes and the loggers, one function per group."""

from __future__ import annotations

from watukuy.rest.openapi_ops import (
    FORMAT,
    INFO,
    KEY_QUERY,
    STRING,
    C,
    L,
    Paths,
    T,
    operation,
    query_param,
)
from watukuy.rest.schemas import ref

__all__ = [
    "config_paths",
    "connector_paths",
    "logger_paths",
    "runner_paths",
    "stored_paths",
    "task_paths",
]


def connector_paths() -> Paths:
    return {
        "/": {
            "get": operation("Cluster info", {200: ("Version and cluster.", ref("ClusterInfo"))})
        },
        "/connectors": {
            "get": operation(
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
                    query_param(
                        "expand",
                        {"type": "array", "items": {"enum": ["status", "info"]}},
                        "Add each connector's status and/or info (both may be given).",
                        style="form",
                        explode=True,
                    ),
                    FORMAT,
                ),
            ),
            "post": operation(
                "Create a connector",
                {201: ("Created.", INFO)},
                errors=(409,),
                body=ref("CreateConnector"),
                query=(FORMAT,),
            ),
        },
        "/connectors/{name}": {
            "get": operation(
                "Get a connector", {200: ("The connector.", INFO)}, parameters=C, query=(FORMAT,)
            ),
            "delete": operation(
                "Delete a connector",
                {204: ("Deleted; its keys stop, their state is kept.", None)},
                errors=(409,),
                parameters=C,
            ),
        },
    }


def config_paths() -> Paths:
    return {
        "/connectors/{name}/config": {
            "get": operation(
                "Get a connector config",
                {200: ("The config as written (secrets as placeholders).", ref("Config"))},
                parameters=C,
                query=(FORMAT,),
            ),
            "put": operation(
                "Create or replace a connector config",
                {200: ("Replaced.", INFO), 201: ("Created.", INFO)},
                errors=(409,),
                parameters=C,
                body=ref("Config"),
                query=(FORMAT,),
            ),
            "patch": operation(
                "Patch a connector config",
                {200: ("Merged.", INFO)},
                errors=(409,),
                parameters=C,
                body=ref("ConfigPatch"),
                query=(FORMAT,),
            ),
        },
        "/connectors/{name}/status": {
            "get": operation(
                "Get a connector status",
                {200: ("One task per partition.", ref("ConnectorStatus"))},
                parameters=C,
            )
        },
    } | task_paths()


def task_paths() -> Paths:
    """Connect's task routes: a task is a partition key, its id the key's index in key order."""
    return {
        "/connectors/{name}/tasks": {
            "get": operation(
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
            "get": operation(
                "Get a task status",
                {200: ("The task's entry of the status.", ref("TaskStatus"))},
                parameters=T,
            )
        },
        "/connectors/{name}/tasks/{id}/restart": {
            "post": operation(
                "Restart a task",
                {204: ("Its partition is triggered: polled now.", None)},
                errors=(409,),
                parameters=T,
            )
        },
        "/connectors/{name}/topics": {
            "get": operation(
                "Get connector active topics",
                {200: ("KIP-558: the topics it published to.", ref("ActiveTopics"))},
                parameters=C,
            )
        },
        "/connectors/{name}/topics/reset": {
            "put": operation(
                "Reset connector active topics",
                {202: ("Forgotten; the next publish to a topic lists it again.", None)},
                parameters=C,
            )
        },
    }


def stored_paths() -> Paths:
    """Offsets, partitions and parked items: what a connector's keys hold."""
    return {
        "/connectors/{name}/offsets": {
            "get": operation(
                "Get connector offsets", {200: ("Cursors per key.", ref("Offsets"))}, parameters=C
            ),
            "patch": operation(
                "Alter connector offsets",
                {200: ("Altered.", ref("Message"))},
                errors=(409,),
                parameters=C,
                body=ref("OffsetsPatch"),
            ),
            "delete": operation(
                "Reset connector offsets",
                {200: ("Reset.", ref("Message"))},
                errors=(409,),
                parameters=C,
            ),
        },
        "/connectors/{name}/partitions": {
            "get": operation(
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
            "get": operation(
                "List parked items",
                {200: ("Parked items.", {"type": "array", "items": ref("ParkedItem")})},
                parameters=C,
                query=(
                    query_param(
                        "partition",
                        {"type": "string", "pattern": KEY_QUERY},
                        "Only this key (`~` or empty: the key '').",
                    ),
                    query_param("kind", {"enum": ["invalid", "poison"]}, "Only this kind."),
                ),
            )
        },
    }


def runner_paths() -> Paths:
    paths: Paths = {
        "/connector-plugins": {
            "get": operation("List connector plugins", {200: ("The classes.", ref("Plugins"))})
        },
        "/connector-plugins/{plugin}/config/validate": {
            "put": operation(
                "Validate a connector config",
                {200: ("Connect's validation shape.", ref("Validation"))},
                parameters=("plugin",),
                body=ref("Config"),
            )
        },
        "/health": {
            "get": operation(
                "Health",
                {
                    200: ("Healthy.", ref("Health")),
                    503: ("Starting.", ref("Health")),
                    500: ("Unhealthy.", ref("Health")),
                },
                open_route=True,
            )
        },
        "/healthz": {"get": operation("Keys of this instance", {200: ("Keys.", ref("Healthz"))})},
        "/metrics": {
            "get": operation(
                "Prometheus metrics",
                {200: ("Text exposition format.", None)},
            )
        },
        "/openapi.json": {
            "get": operation("This document", {200: ("OpenAPI 3.1.", {"type": "object"})})
        },
    }
    paths["/metrics"]["get"]["responses"]["200"]["content"] = {
        "text/plain": {"schema": {"type": "string"}}
    }
    return paths


def logger_paths() -> Paths:
    """KIP-495's log levels at run time."""
    scope = query_param(
        "scope",
        {"enum": ["worker", "cluster"], "default": "worker"},
        "`worker`: this instance; `cluster`: every instance, through Kafka (any case).",
    )
    paths: Paths = {
        "/admin/loggers": {
            "get": operation("List loggers", {200: ("`root` and those set.", ref("Loggers"))})
        },
        "/admin/loggers/{logger}": {
            "get": operation(
                "Get a logger level", {200: ("Its level.", ref("LoggerLevel"))}, parameters=L
            ),
            "put": operation(
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
