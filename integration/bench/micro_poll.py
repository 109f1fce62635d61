"""CPU of one idle poll in the engine, in process: no socket, no broker.

    python -m integration.bench.micro_poll [--keys 2000] [--rounds 5] [--profile]

An ``Engine`` on the memory store holds ``--keys`` tenants of the runner benchmark's poller
(``integration.pollers:invoices``'s ``fetch``, schedule 30 s); its HTTP client's transport
answers in process, as the vendor simulator does: a 200 with two items and an ETag, then a
304 to a request that carries that ETag. The clock is a ``FakeClock``: each round moves it
30 s on, and ``Engine.tick()`` polls every key, all of them due, which is an idle runner's
work per key and interval without the loopback, the Kafka store and the status topic (two
rounds of 200s come first: the first page moves the cursor, so the second asks another URL).
Printed: thread CPU µs per poll (best of ``--rounds``; a key moved to its point of the
interval may sit a round out); ``--profile`` prints the top of a
cProfile of one round instead. The work is fixed, so under ``valgrind --tool=callgrind`` its
instruction count is a figure that does not move with the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import os
import pstats
import time

from integration.pollers import invoices
from watukuy import define_poller
from watukuy.core.clock import FakeClock
from watukuy.core.poller import Poller
from watukuy.engine.engine import Engine
from watukuy.http import HttpClient
from watukuy.http.transport import RawResponse, Request, frozen_headers
from watukuy.runner import GC_THRESHOLDS

INTERVAL = 30.0
ETAG = '"v1"'


class Vendor:
    """The transport: what the simulator answers a tenant's items, without a socket."""

    def __init__(self) -> None:
        items = [{"id": f"it_{n}", "etag": f"e{n}", "amount": 1.5} for n in range(2)]
        self._page = json.dumps({"data": items, "next": None, "resume": "r1"}).encode()
        self._full = frozen_headers({"Content-Type": "application/json", "ETag": ETAG})
        self._same = frozen_headers({"ETag": ETAG})
        self.requests = self.not_modified = 0

    async def send(self, request: Request) -> RawResponse:
        self.requests += 1
        if request.headers.get("If-None-Match") == ETAG:
            self.not_modified += 1
            return RawResponse(status=304, headers=self._same, body=b"")
        return RawResponse(status=200, headers=self._full, body=self._page)

    async def close(self) -> None:
        return None


def poller(keys: int) -> Poller:
    tenants = [
        {"key": f"t{n:05d}", "data": {"slug": f"s{n:05d}", "token": f"k{n}"}} for n in range(keys)
    ]
    return define_poller(
        name="invoices",
        partitions=lambda: tenants,
        identity=invoices.identity,
        version=invoices.version,
        cursor={"strategy": "token", "initial": None},
        fetch=invoices.fetch,
        schedule={"min": "30s", "max": "30s"},
    )


async def rounds(keys: int, count: int, profile: cProfile.Profile | None) -> list[float]:
    """CPU seconds per poll of each of ``count`` rounds of 304s."""
    clock = FakeClock(1_700_000_000.0)
    vendor = Vendor()
    engine = Engine([poller(keys)], clock=clock, http=HttpClient(transport=vendor))
    try:
        # Two rounds of 200s: the first poll's cursor is moved on by its page, so the second
        # asks another URL, whose answer's ETag the rounds after it send.
        for _ in range(2):
            await engine.tick()
            clock.advance(INTERVAL)
        per_poll: list[float] = []
        for _ in range(count):
            asked, same = vendor.requests, vendor.not_modified
            began = time.thread_time()
            if profile is not None:
                profile.enable()
            await engine.tick()
            if profile is not None:
                profile.disable()
            took = time.thread_time() - began
            polls = vendor.requests - asked
            if polls == 0 or vendor.not_modified - same != polls:
                raise RuntimeError(f"a round of {polls} polls was not all 304s")
            per_poll.append(took / polls)
            clock.advance(INTERVAL)
        return per_poll
    finally:
        await engine.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("WATUKUY_VENDOR_URL", "http://vendor.test")
    gc.set_threshold(*GC_THRESHOLDS)
    profile = cProfile.Profile() if args.profile else None
    taken = asyncio.run(rounds(args.keys, args.rounds, profile))
    if profile is not None:
        pstats.Stats(profile).sort_stats("tottime").print_stats(30)
        return
    print(f"{args.keys} keys, idle polls (304s): {min(taken) * 1e6:.1f} µs of CPU a poll")


if __name__ == "__main__":
    main()
