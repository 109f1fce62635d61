# ruff: noqa: E501  (the contract's example is kept exactly as written, its long lines too)
"""The contract's "Real API shapes" example (CONTRACT.md), exactly as written there, inside a
poller entry: it compiles, and each alternative its comments name compiles in its place."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.declarative.helpers import WHERE
from watukuy.declarative import compile_connector_entry

HEAD = """
pollers:
  - name: vendor
    partitions:
      static: [{key: acme, data: {board_ids: [1, 2]}}]
    request:
      url: "https://api.example.com/{tenant.key}/{fanout.folder}"
    records: data
"""

# CONTRACT.md, section "Real API shapes: pages, records, requests", as written there (its lines
# are longer than ours).
EXAMPLE = """
    paginate:                              # still exactly one paginator; new forms:
      next_url: {path: links.next}         # a URL in the body, absolute or relative to the request
                                           #   (Twilio's next_page_uri); followed like a Link target:
                                           #   same origin only, its query replaces the request's
      # next_token: {path: data.issues.pageInfo.endCursor, body: variables.after}
      #                                    # the token goes into the JSON body at a dotted path
      #                                    #   (GraphQL variables, search endpoints) instead of `param`
      # page:   {body: page.number, start: 1, size_body: page.size, size: 100}
      # offset: {body: offset, size_body: limit, size: 100}
      stop: {path: meta.has_more, equals: false}   # optional, any paginator: a filter (the
                                           #   transform grammar) on the page body; true = last page
    record: data                           # instead of `records`: the object at this path is the
                                           #   page's one item ('' = the body; null/absent = none)
    # records: "list[*].customer"          # [*] maps over a list: each element's sub-object is an
                                           #   item; an element without it is parked with the reason
    identity: [actor, created_at]          # several paths: one identity (stable join of the values)
    fanout:                                # one partition per value: key <tenant>/<value>, and
      - {name: folder, values: [inbox, drafts, sent]}      # {fanout.folder} in templates; several
      # - {name: board, values: "{partition.data.board_ids}"}   # entries: their product, key
                                           #   <tenant>/<v1>/<v2>; a value that leaves the list is
                                           #   paused and expired after `retain`, as a child is
    on_status:                             # a code or class maps to an action, or to rules read in
      404: ignore                          #   order, the first whose `when` (a filter on the JSON
      400:                                 #   body) matches wins; a rule without `when` is the rest
        - {when: {path: message, matches: ".*not enabled.*"}, do: ignore}
        - fail
      200: [{when: {path: "errors[0].code", equals: CursorExpired}, do: restart}, ok]
                                           # actions: ok | ignore | retry | rate-limited | fail |
                                           #   restart (this poll again from its cursor, pages dropped)
"""


def entry(example: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(HEAD + example)["pollers"][0]
    return loaded


def test_the_contracts_example_compiles_as_written() -> None:
    given = entry(EXAMPLE)
    given.pop("records")  # the example says record, instead of records
    (poller,) = compile_connector_entry(given, where=WHERE, base_dir=Path("."))
    assert poller.fanout == ("folder",)


@pytest.mark.parametrize(
    ("commented", "in_place_of"),
    [
        ("next_token: {path: data.issues.pageInfo.endCursor, body: variables.after}", "next_url"),
        ("page:   {body: page.number, start: 1, size_body: page.size, size: 100}", "next_url"),
        ("offset: {body: offset, size_body: limit, size: 100}", "next_url"),
        ('records: "list[*].customer"', "record"),
        ('- {name: board, values: "{partition.data.board_ids}"}', "folder"),
    ],
)
def test_each_alternative_the_comments_name_compiles_in_its_place(
    commented: str, in_place_of: str
) -> None:
    given = entry(EXAMPLE)
    alternative = yaml.safe_load(commented)
    if in_place_of == "next_url":
        given["paginate"] = {**alternative, "stop": given["paginate"]["stop"]}
        given["request"]["method"] = "POST"
        given.pop("records")
    elif in_place_of == "record":
        given.pop("record")
        given.update(alternative)
    else:
        given.pop("records")
        given["fanout"] += alternative
    compile_connector_entry(given, where=WHERE, base_dir=Path("."))
