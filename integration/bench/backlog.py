"""One tenant's backlog for ``integration.bench.throughput``: a slow vendor, and a simulator
that can page through a million items.

- ``--page-delay``: every tenant's simulator answers each page after that delay (the
  ``delay`` fault, ``POST /_admin/tenants/{id}/faults``). With next-token pages nothing can be
  asked for before the page that names its token is answered, so one tenant's rate is at most
  page size / delay (100 items / 20 ms = 5,000 items/s): :func:`vendor_limit`.
- ``--pages-in-flight``: values of ``runner.max.pages.in.flight.per.key`` to compare.
- The simulator selects a page by filtering and sorting all of a tenant's items on every
  request (``integration.simulator.paging.select_page``): about 0.3 s a page at 200,000 items
  on this 2-core machine, more than the vendor delay being measured. A tenant of
  :data:`INDEXED_FROM` items or more is therefore served by ``python -m integration.bench.backlog``
  (same arguments as ``python -m integration.simulator``): the same simulator, whose top-level
  listings are cut from a sorted index of each tenant's items (kept until an item is written
  or removed), so the pages, tokens and ground truth are the ones the simulator serves.
"""

from __future__ import annotations

import json
import select
import signal
import subprocess
import sys
import urllib.request
import weakref
from bisect import bisect_right
from collections.abc import Callable
from operator import attrgetter
from pathlib import Path
from typing import Any

from integration.demo import ROOT, Simulator, start_simulator, stop_process
from integration.pollers import page_size
from integration.simulator import __main__ as simulator_main
from integration.simulator.paging import Page, Position, encode_cursor
from integration.simulator.records import Item, collection
from integration.simulator.shelf import Shelf
from integration.simulator.vendor import VendorSimulator
from watukuy.core.durations import parse_duration

INDEXED_FROM = 10_001
"""A tenant with this many items or more is served from a sorted index."""
START_TIMEOUT = 300.0  # seconds: a million items take about half a minute to generate

Index = tuple[list[Position], list[Item]]
_INDEX: weakref.WeakKeyDictionary[Shelf, Index] = weakref.WeakKeyDictionary()


def page_delay(text: str) -> float:
    """Seconds of ``--page-delay`` (``20ms``, ``0.02s``; ``0`` for none)."""
    return 0.0 if text.strip() in ("", "0") else parse_duration(text, "--page-delay")


def counts(text: str) -> list[int | None]:
    """``--pages-in-flight 1,16`` -> ``[1, 16]``; nothing given -> ``[None]`` (the default)."""
    given = [int(n) for n in text.split(",") if n.strip()]
    if any(n < 1 for n in given):
        raise ValueError(f"--pages-in-flight: positive counts, got {text!r}")
    return list(given) or [None]


def vendor_limit(tenants: int, delay: float) -> float | None:
    """Items/s the vendor allows at most: each tenant's pages one after the other, each
    answered after ``delay`` (``None`` without a delay: no vendor limit)."""
    return tenants * page_size() / delay if delay > 0 else None


def start_vendor(tenants: int, items: int, log: Path) -> Simulator:
    """The simulator with ``tenants`` x ``items`` invoices and a quota nobody reaches; indexed
    from :data:`INDEXED_FROM` items a tenant."""
    options = ["--tenants", str(tenants), "--items", str(items), "--quota", str(10**9)]
    if items < INDEXED_FROM:
        return start_simulator(*options, log=log)
    command = [sys.executable, "-m", "integration.bench.backlog", *options, "--port", "0"]
    with open(log, "ab") as stderr:
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,  # as start_simulator: a Ctrl-C reaches only the script
        )
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], START_TIMEOUT)
    line = process.stdout.readline() if ready else ""
    if not line:
        stop_process(process, signal.SIGKILL, 5)
        raise RuntimeError(f"the indexed simulator did not print its address; see {log}")
    info = json.loads(line)
    return Simulator(process, info["base_url"], info["tenants"])


def slow_down(sim: Simulator, delay: float) -> None:
    """Make every tenant answer each page after ``delay`` seconds (nothing for 0)."""
    if delay <= 0:
        return
    for tenant in sim.tenants:
        request = urllib.request.Request(
            f"{sim.base_url}/_admin/tenants/{tenant['id']}/faults",
            data=json.dumps({"delay": delay}).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            answer.read()


# -- the indexed simulator (python -m integration.bench.backlog) ---------------------------


def _index(shelf: Shelf) -> Index:
    index = _INDEX.get(shelf)
    if index is None:
        items = sorted(shelf.by_id.values(), key=attrgetter("position"))
        index = ([item.position for item in items], items)
        _INDEX[shelf] = index
    return index


def _page(
    self: VendorSimulator,
    tenant_id: str,
    after: Position,
    limit: int,
    name: str = "items",
    parents: tuple[str, ...] = (),
    where: Callable[[Item], bool] | None = None,
) -> Page[Item]:
    """``VendorSimulator.page`` for a top-level collection, as ``select_page`` cuts it."""
    if collection(name).parent is not None or where is not None:
        return _PLAIN_PAGE(self, tenant_id, after, limit, name, parents, where)
    positions, items = _index(self._state(tenant_id).shelves[name])
    start = bisect_right(positions, after)
    chosen = items[start : start + limit]
    end = chosen[-1].position if chosen else after
    more = len(items) - start > limit
    return Page(items=chosen, next=encode_cursor(end) if more else None, resume=encode_cursor(end))


def _put(self: Shelf, item: Item, parent: str | None) -> None:
    _PLAIN_PUT(self, item, parent)
    _INDEX.pop(self, None)


def _remove(self: Shelf, record_id: str) -> None:
    _PLAIN_REMOVE(self, record_id)
    _INDEX.pop(self, None)


def _init(self: VendorSimulator, *args: Any, **kwargs: Any) -> None:
    _PLAIN_INIT(self, *args, **kwargs)
    for tenant in self.tenants:  # sorted before the address is printed, not on the first page
        _index(self._state(tenant.id).shelves["items"])


_PLAIN_PAGE = VendorSimulator.page
_PLAIN_PUT = Shelf.put
_PLAIN_REMOVE = Shelf.remove
_PLAIN_INIT = VendorSimulator.__init__


def indexed() -> None:
    """Serve top-level listings from the index in this process."""
    VendorSimulator.page = _page  # type: ignore[method-assign]
    VendorSimulator.__init__ = _init  # type: ignore[method-assign]
    Shelf.put = _put  # type: ignore[method-assign]
    Shelf.remove = _remove  # type: ignore[method-assign]


if __name__ == "__main__":
    indexed()
    sys.exit(simulator_main.main())
