"""The REST reference's route table, generated from the OpenAPI document the server serves.

``docs/rest.md`` carries it between markers; a test holds the two equal, so a route added to
the server (and, by the OpenAPI test, to the document) shows up in the docs:

    python -m watukuy.rest.reference                       # print the table as Markdown
    python -m watukuy.rest.reference --write docs/rest.md  # refresh it between the markers
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from watukuy.options.generated import GeneratedSection
from watukuy.rest.openapi import openapi_document

METHODS = ("get", "post", "put", "patch", "delete")
# Errors any route may answer (and 413/415 any route with a body): said once, above the table.
COMMON = {"400", "401", "413", "415", "500", "503"}


def routes_markdown(document: Mapping[str, Any] | None = None) -> str:
    """One row per route (method and path) of ``document`` (default: the server's)."""
    doc = openapi_document() if document is None else document
    rows = [
        "| route | what | query / body | answers |",
        "| --- | --- | --- | --- |",
    ]
    for path, item in sorted(doc["paths"].items()):
        for method in METHODS:
            if method in item:
                rows.append(_row(method.upper(), path, item[method]))
    return "\n".join(rows)


def _row(method: str, path: str, operation: Mapping[str, Any]) -> str:
    inputs = [f"`?{p['name']}`" for p in operation.get("parameters", []) if p.get("in") == "query"]
    body = operation.get("requestBody")
    if body is not None:
        inputs.append(_body(body["content"]["application/json"]["schema"]))
    responses = operation["responses"]
    answers = [f"{code} {responses[code]['description']}" for code in responses if code < "300"]
    errors = [code for code in responses if code >= "300" and code not in COMMON]
    if errors:
        answers.append("(errors: " + ", ".join(errors) + ")")
    cells = (f"`{method} {path}`", operation["summary"], ", ".join(inputs), " ".join(answers))
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def _body(schema: Mapping[str, Any]) -> str:
    if "$ref" in schema:
        return f"body `{schema['$ref'].rpartition('/')[2]}`"
    properties = schema.get("properties")
    if properties:
        return "body `{" + ", ".join(f'"{name}"' for name in properties) + "}`"
    return "JSON body"


SECTION = GeneratedSection("rest-routes", "watukuy.rest.reference", routes_markdown)
START, END, embed, main = SECTION.start, SECTION.end, SECTION.embed, SECTION.main


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
