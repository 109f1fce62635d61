"""CPU per request of each HTTP transport, as an idle key makes them.

    PYTHONPATH=connector:. .venv/bin/python -m integration.bench.http_transport \
        [--requests 5000] [--concurrency 1,32] [--rounds 3]

A vendor in a separate process (its CPU is not counted) answers ``GET /items`` with a 304
when the request's ``If-None-Match`` is the item's ETag, else a 200 with a small JSON page.
Here one :class:`~watukuy.http.HttpClient` per transport sends ``--requests`` conditional
GETs through ``KeyHttp`` as ``fetch`` does (validators kept, so all but the first are 304s),
``--concurrency`` at a time, and this process's CPU time (user + sys, ``getrusage``) per
request is printed: the best of ``--rounds`` runs, since the machine's noise only adds.
On loopback the kernel's send path also runs the vendor's receive path in this process's
sys time, which neither transport can avoid; it is printed apart.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import resource
import subprocess
import sys
import time
from collections.abc import Callable

from integration.processes import free_port
from watukuy.core.state import Validators
from watukuy.http import AiohttpTransport, Http11Transport, HttpClient, NotModified, Transport

TRANSPORTS: dict[str, Callable[[], Transport]] = {
    "http11": Http11Transport,
    "aiohttp": AiohttpTransport,
}

VENDOR = """
import sys
from aiohttp import web
ETAG = '"v1"'
async def items(request):
    if request.headers.get("If-None-Match") == ETAG:
        return web.Response(status=304, headers={"ETag": ETAG})
    return web.json_response({"data": [], "next": None}, headers={"ETag": ETAG})
app = web.Application()
app.router.add_get("/items", items)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
"""


def cpu() -> tuple[float, float]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime


async def measure(kind: str, url: str, requests: int, concurrency: int) -> tuple[float, float]:
    """(user + sys, sys) µs of CPU per request over ``requests`` 304 polls."""
    client = HttpClient(timeout=10.0, transport=TRANSPORTS[kind]())
    await client.start()
    validators: dict[str, Validators] = {}
    key = client.for_key(validators=validators, acquire=None, now=time.time)
    per_worker = requests // concurrency

    async def worker() -> None:
        for _ in range(per_worker):
            with contextlib.suppress(NotModified):
                await key.get(url, query={"limit": 100})

    try:
        await worker()  # the first: a 200 that stores the ETag, and a connection opened
        user0, sys0 = cpu()
        async with asyncio.TaskGroup() as group:
            for _ in range(concurrency):
                group.create_task(worker())
        user1, sys1 = cpu()
    finally:
        await client.close()
    done = per_worker * concurrency
    return 1e6 * ((user1 - user0) + (sys1 - sys0)) / done, 1e6 * (sys1 - sys0) / done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m integration.bench.http_transport",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--concurrency", default="1,32", help="comma-separated (1,32)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    port = free_port()
    vendor = subprocess.Popen([sys.executable, "-c", VENDOR, str(port)])
    try:
        url = f"http://127.0.0.1:{port}/items"
        deadline = time.monotonic() + 20
        while True:  # until the vendor listens
            try:
                asyncio.run(measure("aiohttp", url, 2, 1))
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        for concurrency in (int(part) for part in args.concurrency.split(",")):
            for kind in TRANSPORTS:
                runs = [
                    asyncio.run(measure(kind, url, args.requests, concurrency))
                    for _ in range(args.rounds)
                ]
                total, sys_part = min(runs)
                print(
                    f"{kind:8} concurrency {concurrency:3}: {total:6.1f} µs CPU per 304 poll "
                    f"({sys_part:5.1f} µs of it sys), best of {args.rounds} x {args.requests}",
                    flush=True,
                )
    finally:
        vendor.terminate()
        vendor.wait(10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
