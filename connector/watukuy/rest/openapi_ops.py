"""The building blocks of the OpenAPI document (:mod:`watukuy.rest.openapi`): one operation's
entry with the error answers every route may give, query parameters, and the names the route
groups share."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from watukuy.rest.schemas import Schema, ref

__all__ = [
    "ACCEPTED",
    "ERRORS",
    "FORMAT",
    "INFO",
    "KEY_QUERY",
    "STRING",
    "C",
    "L",
    "P",
    "Paths",
    "T",
    "json_content",
    "operation",
    "query_param",
    "summary_id",
]

Paths = dict[str, dict[str, Any]]

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


def json_content(schema: Schema) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def operation(
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
    entry: dict[str, Any] = {
        "summary": summary,
        "operationId": operation_id or summary_id(summary),
    }
    params = [{"$ref": f"#/components/parameters/{name}"} for name in parameters]
    params.extend(query)
    if params:
        entry["parameters"] = params
    codes = set(errors) | {500, 503}
    if parameters:
        codes |= {400, 404}
    if body is not None:
        entry["requestBody"] = {"required": body_required, "content": json_content(body)}
        codes |= {400, 413, 415}
    if not open_route:
        codes.add(401)
    answers: dict[str, Any] = {}
    for code, (description, schema) in responses.items():
        answers[str(code)] = {"description": description}
        if schema is not None:
            answers[str(code)]["content"] = json_content(schema)
    for code in sorted(codes - set(responses)):
        answers[str(code)] = {"description": ERRORS[code], "content": json_content(ref("Error"))}
    entry["responses"] = answers
    if open_route:
        entry["security"] = []
    return entry


def summary_id(summary: str) -> str:
    words = "".join(c if c.isalnum() else " " for c in summary).split()
    return words[0].lower() + "".join(word.capitalize() for word in words[1:])


def query_param(name: str, schema: Schema, description: str, **extra: Any) -> Schema:
    return {"name": name, "in": "query", "description": description, "schema": schema, **extra}


ACCEPTED = {202: ("Accepted.", None)}
INFO = ref("ConnectorInfo")
FORMAT = query_param(
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
