"""The routes: check what the request carries, call the control seam once, shape the answer.

Path names are checked here (400), bodies after their content type (415) and size (413). The
routes of :data:`ROUTES` are the ones ``/openapi.json`` documents (a test holds them equal).
Operations are the registry's (:mod:`watukuy.core.operations`): the per-key routes, their
bodies' checks and the connector routes are derived from it, not declared here.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from aiohttp import web

from watukuy.core.errors import ConfigError
from watukuy.core.operations import (
    CONNECTOR_OPERATIONS,
    KEY_OPERATIONS,
    ConnectorOperation,
    KeyOperation,
)
from watukuy.core.validation import message_of
from watukuy.options.flat import CLASS_KEY, flatten
from watukuy.rest import configform, inputs
from watukuy.rest.errors import NotFound
from watukuy.rest.handling import CONTROL, Handler
from watukuy.rest.handling import json_body as _body
from watukuy.rest.handling import json_response as _json
from watukuy.rest.handling import the_control as _control
from watukuy.rest.loggers import LOGGER_ROUTES
from watukuy.rest.openapi import openapi_document, webhook_operation
from watukuy.rest.port import PARTITION_OPERATIONS, PLUGINS, Control, JsonValue, TaskStatus
from watukuy.rest.validation import validation_report
from watukuy.rest.webhooks import WEBHOOKS

HEALTH_STATUS = {"healthy": 200, "starting": 503, "unhealthy": 500}


def _name(request: web.Request) -> str:
    return inputs.check_name(request.match_info["name"])


# --- cluster and plugins ---------------------------------------------------------------------


async def root(request: web.Request) -> web.Response:
    return _json(dict(await _control(request).cluster()))


async def list_plugins(request: web.Request) -> web.Response:
    return _json([{"class": plugin} for plugin in PLUGINS])


async def validate_config(request: web.Request) -> web.Response:
    plugin = request.match_info["plugin"]
    if plugin not in PLUGINS:
        raise NotFound(f"unknown connector class; the classes are: {', '.join(PLUGINS)}")
    config = inputs.config_to_validate(await _body(request, required=True))
    inputs.finite(config, "")
    given = config if CLASS_KEY in config else flatten(config, plugin)
    error: ConfigError | None = None
    warnings: tuple[str, ...] = ()
    if given[CLASS_KEY] != plugin:
        error = ConfigError(f"must be {plugin}, the class this route validates", CLASS_KEY)
    else:
        try:
            nested = configform.from_wire(config, "")
        except ConfigError as exc:
            error = exc
        else:
            validated = await _control(request).validate(plugin, nested)
            error, warnings = validated.error, validated.warnings
    report: dict[str, JsonValue] = dict(validation_report(plugin, given, error))
    if warnings:
        # Not errors (error_count counts failures); Connect's ConfigInfos has no field for
        # them, and its clients ignore an unknown one (tests/connect_jvm/Decode.java).
        report["warnings"] = list(warnings)
    return _json(report)


# --- connectors ------------------------------------------------------------------------------


async def _info(control: Control, name: str, *, nested: bool) -> dict[str, JsonValue]:
    """Connect's ``ConnectorInfo``: the config in Connect's form (``nested``: as stored), a
    task per partition (none before the first status)."""
    record = await control.connector(name)
    try:
        tasks = [
            {"connector": name, "task": task["id"]}
            for task in (await control.status(name))["tasks"]
        ]
    except NotFound:
        tasks = []
    config = configform.to_wire(name, record.config, nested=nested)
    return {"name": name, "config": config, "tasks": tasks, "type": "source"}


async def list_connectors(request: web.Request) -> web.Response:
    control = _control(request)
    expand = inputs.expansions(request.query.getall("expand", []))
    nested = configform.nested_requested(request.query)
    refs = await control.connectors()
    if not expand:
        return _json([ref.name for ref in refs])
    out: dict[str, dict[str, JsonValue]] = {}
    for ref in refs:
        try:
            entry: dict[str, JsonValue] = {}
            for kind in expand:
                entry[kind] = (
                    dict(await control.status(ref.name))
                    if kind == "status"
                    else await _info(control, ref.name, nested=nested)
                )
        except NotFound:  # deleted while listing, as Connect does: left out
            continue
        out[ref.name] = entry
    return _json(out)


async def create_connector(request: web.Request) -> web.Response:
    control = _control(request)
    nested = configform.nested_requested(request.query)
    name, given, state = inputs.create_request(await _body(request, required=True))
    config = configform.from_wire(given, "config")
    try:
        await control.create_connector(name, config, state)
    except ConfigError as exc:  # the seam's paths are relative to the config
        raise ConfigError(message_of(exc), _under("config", exc.path)) from None
    info = await _info(control, name, nested=nested)
    return _json(info, 201, {"Location": f"/connectors/{name}"})


async def get_connector(request: web.Request) -> web.Response:
    nested = configform.nested_requested(request.query)
    return _json(await _info(_control(request), _name(request), nested=nested))


async def get_config(request: web.Request) -> web.Response:
    nested = configform.nested_requested(request.query)
    name = _name(request)
    record = await _control(request).connector(name)
    return _json(configform.to_wire(name, record.config, nested=nested))


async def put_config(request: web.Request) -> web.Response:
    control, name = _control(request), _name(request)
    nested = configform.nested_requested(request.query)
    given = inputs.connector_config(await _body(request, required=True), name)
    created = await control.put_connector_config(name, configform.from_wire(given, ""))
    headers = {"Location": f"/connectors/{name}"} if created else None
    return _json(await _info(control, name, nested=nested), 201 if created else 200, headers)


async def patch_config(request: web.Request) -> web.Response:
    """KIP-477. A flat patch is applied to the flat form of the config as it is now, and the
    result replaces it (the control's merge is for nested patches); a connector deleted
    in between is a 404 from the read."""
    control, name = _control(request), _name(request)
    nested = configform.nested_requested(request.query)
    patch = inputs.config_patch(await _body(request, required=True), name)
    record = await control.connector(name)
    if configform.is_flat_patch(patch) and record.origin == "rest":
        await control.put_connector_config(name, configform.patched(record.config, patch))
    else:  # a config-file connector is refused here, with the reason
        await control.patch_connector_config(name, patch)
    return _json(await _info(control, name, nested=nested))


async def delete_connector(request: web.Request) -> web.Response:
    await _control(request).delete_connector(_name(request))
    return web.Response(status=204)


async def get_status(request: web.Request) -> web.Response:
    return _json(dict(await _control(request).status(_name(request))))


def _connector_operation(op: ConnectorOperation) -> Handler:
    """``PUT .../pause`` and the like (the :class:`Control` method of the operation's name);
    ``POST .../restart`` (the one that keeps the target) takes Connect's two flags."""

    async def set_target(request: web.Request) -> web.Response:
        control, name = _control(request), _name(request)
        await getattr(control, op.name)(name)
        return web.Response(status=202)

    async def restart(request: web.Request) -> web.Response:
        include_tasks = inputs.flag(request.query, "includeTasks")
        only_failed = inputs.flag(request.query, "onlyFailed")
        control, name = _control(request), _name(request)
        await getattr(control, op.name)(name, include_tasks=include_tasks, only_failed=only_failed)
        return web.Response(status=202)

    handler = restart if op.restarts else set_target
    handler.__name__ = f"{op.name}_connector"
    return handler


# --- tasks (Connect's view of the partitions) ------------------------------------------------


async def list_tasks(request: web.Request) -> web.Response:
    """Connect's ``TaskInfo`` list: a task per partition key, in the status's order and ids;
    its config names the key only (never partition data)."""
    name = _name(request)
    tasks = (await _control(request).status(name))["tasks"]
    return _json(
        [
            {
                "id": {"connector": name, "task": task["id"]},
                "config": {
                    "partition": task["partition"],
                    **({"stream": task["stream"]} if "stream" in task else {}),
                },
            }
            for task in tasks
        ]
    )


async def _task(request: web.Request) -> tuple[str, TaskStatus]:
    name = _name(request)
    task_id = inputs.task_id(request.match_info["id"])
    tasks = (await _control(request).status(name))["tasks"]
    found = [task for task in tasks if task["id"] == task_id]
    if not found:
        raise NotFound(f"connector {name} has no task {task_id}")
    return name, found[0]


async def get_task_status(request: web.Request) -> web.Response:
    return _json(dict((await _task(request))[1]))


async def restart_task(request: web.Request) -> web.Response:
    """Connect's task restart: triggers the task's key (204, as Connect answers)."""
    name, task = await _task(request)
    trigger = KEY_OPERATIONS["trigger"]
    args = inputs.operation_args(trigger, None)
    # A connector's status names each task's stream; the key is that stream's.
    poller = f"{name}.{task['stream']}" if "stream" in task else name
    await _control(request).operate(poller, task["partition"], trigger.name, args)
    return web.Response(status=204)


# --- active topics (KIP-558) ----------------------------------------------------------------


async def get_topics(request: web.Request) -> web.Response:
    control, name = _control(request), _name(request)
    return _json({name: {"topics": await control.active_topics(name)}})


async def reset_topics(request: web.Request) -> web.Response:
    await _control(request).reset_active_topics(_name(request))
    return web.Response(status=202)


# --- offsets ---------------------------------------------------------------------------------


async def get_offsets(request: web.Request) -> web.Response:
    offsets = await _control(request).offsets(_name(request))
    return _json({"offsets": [dict(entry) for entry in offsets]})


async def patch_offsets(request: web.Request) -> web.Response:
    control, name = _control(request), _name(request)
    offsets = inputs.offsets_request(await _body(request, required=True))
    await control.alter_offsets(name, offsets)
    return _json({"message": f"the offsets of connector {name} were altered"})


async def delete_offsets(request: web.Request) -> web.Response:
    name = _name(request)
    await _control(request).reset_offsets(name)
    return _json({"message": f"the offsets of connector {name} were reset"})


# --- partitions and parked items -------------------------------------------------------------


async def list_partitions(request: web.Request) -> web.Response:
    partitions = await _control(request).partitions(_name(request))
    return _json([dict(partition) for partition in partitions])


def _key_operation(op: KeyOperation, *, body: bool = True) -> Handler:
    """A key operation on the path's key; its body (optional: every argument has a default)
    is checked by the operation itself. ``DELETE`` reads none."""

    async def handler(request: web.Request) -> web.Response:
        control, name = _control(request), _name(request)
        key = inputs.check_key(request.match_info["key"])
        given = await _body(request, required=False) if body else None
        await control.operate(name, key, op.name, inputs.operation_args(op, given))
        return web.Response(status=202)

    handler.__name__ = f"{op.name}_partition"
    return handler


async def put_credentials(request: web.Request) -> web.Response:
    """A tenant authorised again: its grant is saved in the credential store and its keys on
    every stream are triggered. 202; the grant is never echoed."""
    control, name = _control(request), _name(request)
    key = inputs.check_key(request.match_info["key"])
    grant = inputs.handed_grant(await _body(request, required=True))
    await control.grants.hand_in(name, key, grant)
    return web.Response(status=202)


async def list_parked(request: web.Request) -> web.Response:
    control, name = _control(request), _name(request)
    partition = inputs.optional_key(request.query, "partition")
    kind = inputs.parked_kind(request.query)
    return _json(await control.parked(name, partition=partition, kind=kind))


async def retry_parked(request: web.Request) -> web.Response:
    control, name = _control(request), _name(request)
    partition, args = inputs.retry_request(await _body(request, required=True))
    await control.operate(name, partition, KEY_OPERATIONS["retry"].name, args)
    return web.Response(status=202)


# --- health, metrics, the document -----------------------------------------------------------


async def health(request: web.Request) -> web.Response:
    state = await _control(request).health()
    body = {"status": state.status, "message": state.message}
    return _json(body, HEALTH_STATUS[state.status])


async def healthz(request: web.Request) -> web.Response:
    return _json(await _control(request).healthz())


METRICS_CHUNK = 1 << 20
"""Bytes of ``/metrics`` handed to the socket at a time (see :func:`metrics`)."""
PIECES_A_PART = 8192
"""Pieces of a scrape joined into one part to send: about a megabyte of key lines."""


def megabytes(
    pieces: Sequence[bytes], size: int = METRICS_CHUNK, count: int = PIECES_A_PART
) -> Iterator[bytes | memoryview]:
    """``pieces`` joined ``count`` at a time (by count, not length: a loop over a million
    pieces' lengths cost a scrape of 100,000 keys 0.06 s), each part of more than twice
    ``size`` bytes sent in slices of ``size``."""
    for start in range(0, len(pieces), count):
        part = b"".join(pieces[start : start + count])
        if len(part) <= 2 * size:
            if part:
                yield part
            continue
        whole = memoryview(part)
        for at in range(0, len(whole), size):
            yield whole[at : at + size]


async def metrics(request: web.Request) -> web.StreamResponse:
    """The scrape, written a megabyte at a time: 100,000 keys make 120 MB of text, which a
    ``web.Response`` hands to the transport whole. What the socket does not take at once
    the transport copies into its buffer (twice, on Python 3.11): 0.3 s of CPU for 120 MB,
    against 0.02-0.05 s a megabyte at a time, each sent as the socket drains. The megabytes
    are joined from the scrape's pieces as they go (:func:`megabytes`): a join of the whole
    text first cost 0.12 s more, most of it the kernel giving 120 MB of new memory its pages,
    where a megabyte's memory is used again."""
    served = await _control(request).metrics()
    response = web.StreamResponse(headers={"Content-Type": served.content_type})
    response.content_length = sum(map(len, served.pieces))
    await response.prepare(request)
    try:
        for part in megabytes(served.pieces):
            await response.write(part)
        await response.write_eof()
    except ConnectionResetError:
        pass  # the scraper went away: nothing is owed to it
    return response


async def openapi(request: web.Request) -> web.Response:
    document = openapi_document()
    for path in request.app[WEBHOOKS].paths():  # the connectors' webhooks, as configured now
        document["paths"][path] = webhook_operation()
    return _json(document)


def _under(field: str, path: str | None) -> str:
    if not path:
        return field
    return f"{field}{path}" if path.startswith("[") else f"{field}.{path}"


CONNECTOR = "/connectors/{name}"
PARTITION = CONNECTOR + "/partitions/{key}"

ROUTES: list[tuple[str, str, Handler]] = [
    ("GET", "/", root),
    ("GET", "/connectors", list_connectors),
    ("POST", "/connectors", create_connector),
    ("GET", CONNECTOR, get_connector),
    ("DELETE", CONNECTOR, delete_connector),
    ("GET", CONNECTOR + "/config", get_config),
    ("PUT", CONNECTOR + "/config", put_config),
    ("PATCH", CONNECTOR + "/config", patch_config),
    ("GET", CONNECTOR + "/status", get_status),
    *[
        ("POST" if op.restarts else "PUT", f"{CONNECTOR}/{op.name}", _connector_operation(op))
        for op in CONNECTOR_OPERATIONS.values()
    ],
    ("GET", CONNECTOR + "/tasks", list_tasks),
    ("GET", CONNECTOR + "/tasks/{id}/status", get_task_status),
    ("POST", CONNECTOR + "/tasks/{id}/restart", restart_task),
    ("GET", CONNECTOR + "/topics", get_topics),
    ("PUT", CONNECTOR + "/topics/reset", reset_topics),
    ("GET", CONNECTOR + "/offsets", get_offsets),
    ("PATCH", CONNECTOR + "/offsets", patch_offsets),
    ("DELETE", CONNECTOR + "/offsets", delete_offsets),
    ("GET", CONNECTOR + "/partitions", list_partitions),
    *[
        ("POST", f"{PARTITION}/{verb}", _key_operation(op))
        for verb, op in PARTITION_OPERATIONS.items()
    ],
    ("DELETE", PARTITION, _key_operation(KEY_OPERATIONS["remove"], body=False)),
    ("PUT", PARTITION + "/credentials", put_credentials),
    ("GET", CONNECTOR + "/parked", list_parked),
    ("POST", CONNECTOR + "/parked/retry", retry_parked),
    ("GET", "/connector-plugins", list_plugins),
    ("PUT", "/connector-plugins/{plugin}/config/validate", validate_config),
    ("GET", "/health", health),
    ("GET", "/healthz", healthz),
    ("GET", "/metrics", metrics),
    ("GET", "/openapi.json", openapi),
    *LOGGER_ROUTES,
]


def add_routes(app: web.Application, control: Control) -> None:
    app[CONTROL] = control
    for method, path, handler in ROUTES:
        app.router.add_route(method, path, handler)
