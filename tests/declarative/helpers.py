"""Helpers of the declarative poller tests: compile a spec, call its fetch the way the engine
does (one page per call, the cursor it returned passed back), against a ScriptedTransport."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from watukuy import FakeClock, FetchContext, FetchResult, Partition, Poller
from watukuy.declarative import compile_poller
from watukuy.engine.credentials import Vault
from watukuy.engine.fetching import CursorView
from watukuy.http import HttpClient, Request, ScriptedTransport

API = "https://api.test"
WHERE = "pollers[0]"


def spec(**overrides: Any) -> dict[str, Any]:
    """A minimal valid poller entry; ``overrides`` replace top-level keys (None removes one)."""
    base: dict[str, Any] = {
        "name": "tickets",
        "request": {"url": f"{API}/items"},
        "records": "data",
        "identity": "id",
    }
    base.update(overrides)
    return {key: value for key, value in base.items() if value is not None}


def compile_spec(entry: Mapping[str, Any], base_dir: Path | None = None, **kw: Any) -> Poller:
    return compile_poller(entry, where=WHERE, base_dir=base_dir or Path("."), **kw)


def query_of(request: Request) -> dict[str, str]:
    return dict(parse_qsl(request.url.raw_query_string, keep_blank_values=True))


@dataclass
class Driver:
    """Calls a compiled poller's fetch like the engine: one page per call, per poll until
    ``has_more`` is False (or ``max_pages``), keeping the cursor between polls."""

    poller: Poller
    transport: ScriptedTransport = field(default_factory=ScriptedTransport)
    partition: Partition = field(default_factory=lambda: Partition(key=""))
    clock: FakeClock = field(default_factory=FakeClock)
    cursor: Any = None
    pages: list[FetchResult] = field(default_factory=list)
    credentials: Vault | None = None

    async def page(self) -> FetchResult:
        client = HttpClient(transport=self.transport)
        http = client.for_key(validators={}, acquire=None, now=self.clock.now)
        ctx = FetchContext(
            poller=self.poller.name,
            cursor=CursorView(value=self.cursor, lane="live"),
            partition=self.partition,
            http=http,
            signal=asyncio.Event(),
            credentials=self.credentials,
        )
        result = await self.poller.fetch(ctx)
        assert isinstance(result, FetchResult)
        assert isinstance(result.has_more, bool)  # always said explicitly
        self.pages.append(result)
        self.cursor = result.cursor
        return result

    async def poll(self, max_pages: int = 50) -> list[Any]:
        """One poll: its items, every page; the cursor is left where the poll ended."""
        items: list[Any] = []
        for _ in range(max_pages):
            result = await self.page()
            items.extend(result.items)
            if not result.has_more:
                break
        return items

    def queries(self) -> list[dict[str, str]]:
        return [query_of(request) for request in self.transport.requests]
