"""Partition data is never persisted or logged: the canary tenants of :mod:`tests.engine.canaries`
fail in every way a poll can (5xx, timeout, malformed JSON, 404, 401, refused, a failing
handler, a failing ``partitions()``), and none of their data shows up in ``last_error``,
``inspect()``, state or parked values, log records at any level, or watukuy's exceptions.

What an operator reads instead is checked too: the exception type, the method, the URL
template when the poller gave one, and the status."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest

from integration.simulator import VendorSimulator, running_simulator
from tests.engine.canaries import POLLER, TEMPLATE, Scenario
from watukuy import Engine, FakeClock, MemoryStore
from watukuy.serde.state import encode_parked, encode_state

ROUNDS = 5


@pytest.fixture
async def scenario() -> AsyncIterator[tuple[Scenario, FakeClock]]:
    clock = FakeClock()
    sim = VendorSimulator(tenants=0, items_per_tenant=3, seed=7, now=clock.now)
    async with running_simulator(sim) as base_url:
        yield Scenario.build(sim, base_url), clock


async def test_no_canary_reaches_state_inspect_logs_or_exceptions(
    scenario: tuple[Scenario, FakeClock], caplog: pytest.LogCaptureFixture
) -> None:
    canaries, clock = scenario
    http = canaries.http()
    store = MemoryStore()
    engine = Engine([canaries.poller()], store=store, clock=clock, http=http)
    engine.on(POLLER, canaries.handler)
    with caplog.at_level(logging.DEBUG):
        async with engine:
            for _ in range(ROUNDS):  # enough failures to open circuits and probe them again
                await engine.tick()
                clock.advance(15 * 60)
            canaries.partitions_error = True
            clock.advance(5 * 60)
            await engine.tick()
            inspections = engine.inspect()
            handler_key = canaries.tenant("handler").key
            parked = await engine.parked.list(POLLER, partition=handler_key, kind="poison")
        await http.close()

    # What operators read: type, method, template or "<url withheld>", status.
    errors = {i.partition: i.last_error for i in inspections}
    assert errors[canaries.tenant("5xx").key] == f"VendorError: GET {TEMPLATE} -> 500"
    assert (errors[canaries.tenant("malformed").key] or "").startswith(
        f"InvalidResponse: GET {TEMPLATE}: malformed JSON ("
    )
    assert errors[canaries.tenant("timeout").key] in (
        "VendorUnavailable: GET <url withheld>: timed out after 0.3s (TimeoutError)",
        "fetch timed out after 0.3s",  # the whole fetch's deadline, when it comes first
    )
    assert errors[canaries.tenant("refused").key] == (
        "VendorUnavailable: GET <url withheld>: connection failed (ClientConnectorError)"
    )
    assert errors[canaries.tenant("404").key] == (
        "RuntimeError: 404 from <url withheld> with Bearer [redacted]: "
        """{"error": "no tenant '[redacted]'"}"""
    )
    assert errors[canaries.tenant("401").key] == (
        "RuntimeError: 401 from <url withheld> with Bearer [redacted]: "
        '{"error": "missing or wrong bearer token"}'
    )
    assert errors[handler_key] is None
    assert {i.circuit for i in inspections if i.partition != handler_key} == {"open"}
    assert len(parked) == 3
    assert all(p.error.startswith("RuntimeError: warehouse refused it_") for p in parked)

    # Where the canaries must not be.
    leaks: list[str] = []
    for entry in inspections:
        leaks += [f"inspect {entry.partition}: {c}" for c in canaries.found_in(repr(entry))]
    for key, state in store.states.items():
        leaks += [f"state {key}: {c}" for c in canaries.found_in(encode_state(state))]
        leaks += [f"state {key}: {c}" for c in canaries.found_in(repr(state))]
    for key, items in store.parked.items():
        for item in items.values():
            leaks += [f"parked {key}: {c}" for c in canaries.found_in(encode_parked(item))]
    for record in caplog.records:
        text = record.getMessage() + (record.exc_text or "")
        leaks += [f"log {record.name}: {c}" for c in canaries.found_in(text)]
    leaks += [f"log text: {c}" for c in canaries.found_in(caplog.text)]
    assert canaries.raised, "the fetch saw none of watukuy's HTTP errors"
    for exc in canaries.raised:
        for text in (str(exc), repr(exc), repr(exc.args)):
            leaks += [f"{type(exc).__name__}: {c}" for c in canaries.found_in(text)]
    assert leaks == []

    # The log lines that quote failures are there, and quote them redacted.
    messages = [r.getMessage() for r in caplog.records]
    assert any(
        m.startswith(f"{POLLER}/{canaries.tenant('5xx').key}: circuit opened: VendorError")
        for m in messages
    )
    (refresh_failed,) = [m for m in messages if "partitions() failed" in m]
    assert refresh_failed.startswith(
        f"poller '{POLLER}': partitions() failed, keeping the previous 7 partition(s): "
        "RuntimeError: tenant db failed on row {'slug': '[redacted]', 'host': '[redacted]'"
    )
    assert any("parked as poison: RuntimeError: warehouse refused" in m for m in messages)
