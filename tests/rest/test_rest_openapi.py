"""``/openapi.json`` documents exactly the routes served, and a bounded fuzz pass generated
from it finds no 5xx, no answer off the document, and no rejected request that changed state."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import requests
import schemathesis

from tests.rest.fake_control import FakeControl, FakeWebhooks
from tests.rest.support import rest_client, seed
from watukuy.config.model import RestAuth, RestSettings
from watukuy.core.operations import CONNECTOR_OPERATIONS, KEY_OPERATIONS, Argument, KeyOperation
from watukuy.rest import build_app, openapi_document, start_rest
from watukuy.rest.openapi import arguments_schema, webhook_operation
from watukuy.rest.port import PARTITION_OPERATIONS

TOKEN = "fuzz-token-4f1d"
FUZZ_SECONDS = 15.0
EXAMPLES = 12


def documented_routes() -> set[tuple[str, str]]:
    paths = openapi_document()["paths"]
    return {(method.upper(), path) for path, operations in paths.items() for method in operations}


def test_every_route_is_documented_and_every_documented_route_exists() -> None:
    app = build_app(FakeControl())
    registered = {(route.method, route.resource.canonical) for route in app.router.routes()}
    assert registered == documented_routes()


def test_every_reference_resolves() -> None:
    document = openapi_document()

    def refs(node: Any) -> Iterator[str]:
        if isinstance(node, dict):
            if "$ref" in node:
                yield node["$ref"]
            for value in node.values():
                yield from refs(value)
        elif isinstance(node, list):
            for value in node:
                yield from refs(value)

    for ref in set(refs(document)):
        target: Any = document
        for part in ref.removeprefix("#/").split("/"):
            target = target[part]
        assert isinstance(target, dict), ref


def test_every_operation_documents_its_errors_in_the_error_shape() -> None:
    document = openapi_document()
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            codes = set(operation["responses"])
            assert "500" in codes, (method, path)
            if path != "/health":
                assert "401" in codes, (method, path)
            if "requestBody" in operation:
                assert {"400", "413", "415"} <= codes, (method, path)
            for code, answer in operation["responses"].items():
                if int(code) >= 400 and path != "/health":
                    schema = answer["content"]["application/json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/Error"}, (method, path, code)


def test_the_operations_are_documented_from_the_registry() -> None:
    """Summary and body properties of each per-key route are the registry's, so an operation
    added there is documented with its arguments."""
    paths = openapi_document()["paths"]
    documented: dict[str, tuple[str, KeyOperation, list[str]]] = {
        f"/connectors/{{name}}/partitions/{{key}}/{verb}": ("post", op, [])
        for verb, op in PARTITION_OPERATIONS.items()
    }
    documented["/connectors/{name}/partitions/{key}"] = ("delete", KEY_OPERATIONS["remove"], [])
    documented["/connectors/{name}/parked/retry"] = ("post", KEY_OPERATIONS["retry"], ["partition"])
    for path, (method, op, extra) in documented.items():
        entry = paths[path][method]
        assert entry["summary"].lower() == op.summary.lower(), path
        if not op.arguments:
            assert "requestBody" not in entry, path
            continue
        schema = entry["requestBody"]["content"]["application/json"]["schema"]
        assert list(schema["properties"]) == extra + [a.name for a in op.arguments], path
        assert schema["required"] == extra and schema["additionalProperties"] is False, path
    reset = paths["/connectors/{name}/partitions/{key}/reset"]["post"]["requestBody"]
    assert reset["content"]["application/json"]["schema"]["properties"]["clear_snapshot"] == {
        "type": "boolean",
        "default": False,
    }
    for connector_op in CONNECTOR_OPERATIONS.values():
        (entry,) = paths[f"/connectors/{{name}}/{connector_op.name}"].values()
        assert entry["summary"].lower() == connector_op.summary.lower()


def test_a_new_operations_body_is_generated_from_its_arguments() -> None:
    op = KeyOperation(
        "rewind",
        "go back",
        (
            Argument("by", "by", lambda value, path: value, schema={"type": "integer"}),
            Argument("lanes", "lanes", lambda value, path: value, ("live",)),
        ),
    )
    assert arguments_schema(op) == {
        "type": "object",
        "properties": {"by": {"type": "integer"}, "lanes": {"default": ["live"]}},
        "required": [],
        "additionalProperties": False,
    }


async def test_the_document_is_served() -> None:
    async with rest_client() as client:
        response = await client.get("/openapi.json")
        served = await response.json()
        hook = served["paths"].pop(FakeWebhooks.PATH)  # each webhook path configured now
        assert served == openapi_document()
        assert served["openapi"] == "3.1.0"
        assert hook == webhook_operation()


# --- fuzzing ---------------------------------------------------------------------------------


class ServerThread:
    """The app over a FakeControl on a real port, its event loop on a thread of its own (the
    generated requests are sent with ``requests``, which blocks)."""

    def __init__(self, fake: FakeControl) -> None:
        self.fake = fake
        self.url = ""
        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        self._loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        settings = RestSettings(host="127.0.0.1", port=0, auth=RestAuth(tokens=(TOKEN,)))
        async with start_rest(self.fake, settings) as server:
            self.url = server.url
            self._ready.set()
            await self._stop.wait()

    def __enter__(self) -> ServerThread:
        self._thread.start()
        assert self._ready.wait(10), "the REST server did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)
        self._loop.close()


@dataclass
class Fuzz:
    """One pass: each generated request sent to the server, its answer checked against the
    document, and the fake's state compared before and after a rejected one."""

    server: ServerThread
    deadline: float
    session: requests.Session = field(default_factory=requests.Session)
    sent: dict[str, int] = field(default_factory=dict)
    slots: set[tuple[str, Any, str]] = field(default_factory=set)
    statuses: set[int] = field(default_factory=set)

    def run(self, strategy: Any, label: str, slot: tuple[Any, str]) -> None:
        """``slot`` (mode, path parameters): each gets one request even out of time, so the
        fixed names reach the seam on a loaded machine too."""
        from hypothesis import HealthCheck, Phase, given, settings

        checks = schemathesis.checks
        to_check = [
            checks.not_a_server_error,
            checks.status_code_conformance,
            checks.content_type_conformance,
            checks.response_schema_conformance,
        ]
        fake = self.server.fake

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            derandomize=True,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=strategy)
        def send(case: Any) -> None:
            if time.monotonic() > self.deadline and (label, *slot) in self.slots:
                return  # out of time: one request per operation and slot still goes out
            seed(fake)
            before = fake.snapshot()
            headers = {"Authorization": f"Bearer {TOKEN}"}
            response = case.call(base_url=self.server.url, session=self.session, headers=headers)
            self.sent[label] = self.sent.get(label, 0) + 1
            self.slots.add((label, *slot))
            self.statuses.add(response.status_code)
            case.validate_response(response, checks=to_check)
            if response.status_code >= 400:
                assert fake.snapshot() == before, (case.method, case.formatted_path)

        send()


def fixed_path_parameters(names: set[str]) -> list[dict[str, str] | None]:
    """Random names mostly miss (404): the seeded connectors and keys reach the bodies' checks
    and the seam."""
    if "name" not in names:
        return [None]
    if "key" not in names:
        return [None, {"name": "tenants"}]
    return [None, {"name": "tenants", "key": "acme"}, {"name": "tickets", "key": "~"}]


def test_fuzz_the_documented_routes() -> None:
    from hypothesis.errors import Unsatisfiable

    document = openapi_document()
    document["paths"][FakeWebhooks.PATH] = webhook_operation()  # served as the runner serves it
    schema = schemathesis.openapi.from_dict(document)
    operations = [result.ok() for result in schema.get_all_operations()]
    modes = (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE)
    with ServerThread(seed(FakeControl())) as server:
        fuzz = Fuzz(server, deadline=time.monotonic())
        share = FUZZ_SECONDS / len(operations)  # each operation its share, so none is starved
        for operation in operations:
            fuzz.deadline = time.monotonic() + share
            names = {parameter.name for parameter in operation.path_parameters}
            for mode in modes:
                for fixed in fixed_path_parameters(names):
                    strategy = operation.as_strategy(generation_mode=mode, path_parameters=fixed)
                    try:
                        fuzz.run(strategy, operation.label, slot=(mode, str(fixed)))
                    except Unsatisfiable:  # nothing to break in an operation without inputs
                        if mode is not schemathesis.GenerationMode.NEGATIVE:
                            raise

    assert time.monotonic() < fuzz.deadline + 30, "the fuzz pass ran over its budget"
    assert set(fuzz.sent) == {operation.label for operation in operations}
    assert {200, 202, 204, 400, 404, 409} <= fuzz.statuses
