"""CPU of one ``/metrics`` scrape (``PrometheusObserver.render``) with many keys, in process.

    PYTHONPATH=connector:. .venv/bin/python -m integration.bench.scrape \
        [--keys 10000,100000] [--labels true,false] [--base DIR] [--rounds 1] [--some 0.017]

Each measure runs in a fresh child process: one engine on the memory store and a fake clock,
one poller with a partition per key (cursor ``none``, schedule 30 s), a vendor seam that
answers the first request of a key 200 with an ETag and every later one 304 (an idle key), and
one ``PrometheusObserver`` (``partition_label`` true or false, without the process' own
figures) watching the engine as the runner wires it. Every key is polled twice (its 200, then
its first 304), then the scrapes, each timed with ``time.process_time`` up to the text ready to
send (joined a megabyte at a time from the observer's pieces as ``GET /metrics`` does, or
whole where the observer gives no pieces):

- ``first``: the first scrape (everything the observer writes is written);
- ``same``: the next one, 5 s later, with nothing polled since (only the lags move);
- ``all``: after every key polled again (a scrape interval longer than the keys' interval);
- ``some``: after ``--some`` of the keys polled (1.7%: 100,000 keys polled every 15 minutes,
  scraped every 15 s).

Also printed: the scrape's bytes, the RSS after the polls and after the scrapes (what the
observer keeps between scrapes), and the CPU of the two polling rounds.

``--base DIR`` also runs each measure with the ``watukuy`` package of ``DIR`` (another
worktree's ``connector`` directory), alternating with this one, for a before/after table from
one run: the older observer reads ``engine.inspect`` where this one reads ``engine.figures``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import subprocess
import sys
import time
from importlib import import_module
from typing import Any

from integration.bench.idle_measures import rss_mb

START = 1_800_000_000.0
ETAG = '"v1"'


class Vendor:
    """The transport seam: 200 with an ETag to a key's first request, 304 after."""

    async def send(self, request: Any) -> Any:
        from watukuy.http.transport import RawResponse, frozen_headers

        if request.headers.get("If-None-Match") == ETAG:
            return RawResponse(304, frozen_headers({"ETag": ETAG}), b"", str(request.url))
        headers = frozen_headers({"ETag": ETAG, "Content-Type": "application/json"})
        return RawResponse(200, headers, b'{"data": []}', str(request.url))

    async def close(self) -> None:
        return None


async def fetch(ctx: Any) -> dict[str, Any]:
    response = await ctx.http.get(f"https://api.test/{ctx.partition.key}/items")
    return {"items": (await response.json())["data"], "cursor": None, "has_more": False}


def timed(observer: Any) -> tuple[float, int]:
    """The scrape's CPU to its text ready to send: where the observer gives its pieces, their
    length is summed (the answer's ``Content-Length``) and they are joined a part at a time,
    as ``GET /metrics`` does; else the text is one join."""
    pieces = getattr(observer, "render_pieces", None)
    if pieces is None:
        start = time.process_time()
        body, _ = observer.render()
        return time.process_time() - start, len(body)
    from watukuy.rest.routes import megabytes

    start = time.process_time()
    made, _ = pieces()
    length = sum(map(len, made))
    sent = sum(len(part) for part in megabytes(made))
    took = time.process_time() - start
    if sent != length:
        raise RuntimeError(f"sent {sent} bytes of {length}")
    return took, sent


async def measure(keys: int, partition_label: bool, some: float) -> dict[str, Any]:
    from watukuy import Engine, FakeClock, define_poller
    from watukuy.http import HttpClient
    from watukuy.observe.metrics import PrometheusObserver

    # The REST routes (aiohttp's server, 20 MB) are loaded by every runner: loaded here for
    # either code, before any figure, so the RSS compares and no scrape pays for the import.
    import_module("watukuy.rest.routes")
    clock = FakeClock(START)
    poller = define_poller(
        name="bench",
        fetch=fetch,
        identity=lambda item: item["id"],
        partitions=lambda: [{"key": f"tenant-{i:06d}", "data": {}} for i in range(keys)],
        cursor={"strategy": "none"},
        schedule={"min": "30s", "max": "30s"},
    )
    observer = PrometheusObserver(partition_label=partition_label, process=False)
    engine = Engine([poller], clock=clock, http=HttpClient(transport=Vendor()), observers=observer)
    figures = getattr(engine, "figures", None)
    if figures is not None:
        observer.watch(figures.table, lambda: engine.pollers)
    else:  # the code before engine.figures: its observer read inspect()
        observer.watch(engine.inspect, lambda: engine.pollers)  # type: ignore[arg-type]
    polls = time.process_time()
    await engine.tick()  # every key's first poll: 200
    clock.advance(30)
    await engine.tick()  # and its first 304
    polls = time.process_time() - polls
    gc.collect()
    gc.freeze()  # as the runner does with what lives as long as it (runner.FREEZE_AFTER)
    figures_out: dict[str, Any] = {"keys": keys, "polls_s": polls, "rss_polled": rss_mb()}
    clock.advance(5)
    figures_out["first"], figures_out["bytes"] = timed(observer)
    clock.advance(5)
    figures_out["same"], _ = timed(observer)
    clock.advance(20)
    await engine.tick()  # every key again
    figures_out["all"], _ = timed(observer)
    step = max(1, round(1 / some))
    for i in range(0, keys, step):
        await engine.trigger("bench", partition=f"tenant-{i:06d}")
    clock.advance(1)
    await engine.tick()
    figures_out["some"], _ = timed(observer)
    figures_out["rss_scraped"] = rss_mb()
    figures_out["rss_peak"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    await engine.close()
    return figures_out


def run_child(code: str, keys: int, label: bool, some: float) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=f"{code}:{os.getcwd()}")
    command = [sys.executable, "-m", "integration.bench.scrape", "--child"]
    command += ["--keys", str(keys), "--labels", str(label).lower(), "--some", str(some)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the measure failed ({code}, {keys}, {label}):\n{done.stderr}")
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", default="10000,100000")
    parser.add_argument("--labels", default="true,false")
    parser.add_argument("--base", help="another worktree's connector directory, measured too")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--some", type=float, default=0.017)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    counts = [int(n) for n in args.keys.split(",")]
    labels = [text.strip() == "true" for text in args.labels.split(",")]
    if args.child:
        print(json.dumps(asyncio.run(measure(counts[0], labels[0], args.some))))
        return
    codes = [("this", os.path.abspath("connector"))]
    if args.base:
        codes.insert(0, ("base", os.path.abspath(args.base)))
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    print(
        f"{'code':5} {'keys':>7} {'label':5} {'first s':>8} {'same s':>7} {'all s':>7} "
        f"{'some s':>7} {'bytes':>11} {'RSS polled':>10} {'scraped':>8} {'peak MB':>8} "
        f"{'polls s':>7}"
    )
    for keys in counts:
        for label in labels:
            for turn in range(args.rounds):
                order = codes if turn % 2 == 0 else codes[::-1]
                for name, code in order:
                    m = run_child(code, keys, label, args.some)
                    print(
                        f"{name:5} {keys:>7,} {str(label).lower():5} {m['first']:>8.3f} "
                        f"{m['same']:>7.3f} {m['all']:>7.3f} {m['some']:>7.3f} "
                        f"{m['bytes']:>11,} {m['rss_polled']:>10.0f} {m['rss_scraped']:>8.0f} "
                        f"{m['rss_peak']:>8.0f} {m['polls_s']:>7.1f}",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
