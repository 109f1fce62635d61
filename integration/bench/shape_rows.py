"""The side-by-side benchmark's rows for real APIs' shapes (issue 43): ``config/invoices.yaml``
reading the simulator's items as Zendesk serves them (``declarative+next_url``: the next page
a URL in the body, followed and never stored) and as Chargebee does
(``declarative+wrapped``: ``records: "list[*].customer"``, a token in ``next_offset``), so
that their CPU per event is measured beside the plain ``records`` + ``next_token`` row, in one
run against one backlog. The items and the schema are the same; only the answer's shape
differs."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

NEXT_URL = "declarative+next_url"
WRAPPED = "declarative+wrapped"
NAMES = (NEXT_URL, WRAPPED)


def reshaped(example: Mapping[str, Any], name: str, page: int) -> dict[str, Any]:
    """``example`` (the declarative invoices config) reading the shape ``name``."""
    out = copy.deepcopy(dict(example))
    for poller in out["pollers"]:
        request = poller["request"]
        base = request["url"].rsplit("/items", 1)[0]
        if name == NEXT_URL:
            request["url"] = f"{base}/zendesk/items"
            request["query"] = {"page[size]": page}
            poller["records"] = "items"
            poller["paginate"] = {
                "next_url": {"path": "links.next"},
                "stop": {"path": "meta.has_more", "equals": False},
            }
            poller["cursor"] = {"token": {"path": "meta.after_cursor", "param": "page[after]"}}
        elif name == WRAPPED:
            request["url"] = f"{base}/chargebee/customers"
            request["query"] = {"limit": page}
            poller["records"] = "list[*].customer"
            poller["paginate"] = {"next_token": {"path": "next_offset", "param": "offset"}}
            poller["cursor"] = {"none": True}
        else:
            raise ValueError(f"no shape row {name!r}; choose from {', '.join(NAMES)}")
    return out
