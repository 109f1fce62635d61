"""Run the vendor simulator as a standalone server, for demos and manual pollers.

    python -m integration.simulator --tenants 5 --items 20 --seed 7 --port 8099 --mutate-every 2s

Each tenant also has a tracker (``--projects``, ``--issues``, ``--comments``, ``--users``),
and an OAuth2 identity provider whose client is ``--client-id``/``--client-secret`` and whose
access tokens live ``--token-expires-in`` seconds (see :mod:`integration.simulator.identity_http`).
With ``--webhook-url URL --webhook-secret S [--webhook-scheme hmac|stripe]`` every tenant there
is at the start gets signed webhooks of its changes (see :mod:`integration.simulator.webhooks`).

The first line on stdout is one JSON object, ``{"base_url": ..., "tenants": [{"id", "slug",
"token"}]}``, so a script can read it and start polling; progress goes to stderr. It serves
until SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import signal
import sys
from collections.abc import Sequence

from .app import running_simulator
from .identity import CLIENT_ID, CLIENT_SECRET
from .records import TrackerSizes
from .vendor import VendorSimulator
from .webhooks import SCHEMES, Subscription, attach

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m)?")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, None: 1.0}


def parse_duration(text: str) -> float:
    """Seconds from ``500ms``, ``2s``, ``1m`` or a bare number of seconds."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (try 500ms, 2s, 1m)")
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m integration.simulator", description=__doc__)
    parser.add_argument("--tenants", type=int, default=3, help="number of tenants (3)")
    parser.add_argument("--items", type=int, default=20, help="initial items per tenant (20)")
    parser.add_argument("--projects", type=int, default=2, help="tracker projects per tenant (2)")
    parser.add_argument("--issues", type=int, default=3, help="issues per project (3)")
    parser.add_argument("--comments", type=int, default=2, help="comments per issue (2)")
    parser.add_argument("--users", type=int, default=3, help="users per tenant (3)")
    parser.add_argument("--seed", type=int, default=0, help="seed of all generated data (0)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    parser.add_argument("--port", type=int, default=8099, help="port, 0 for any free (8099)")
    parser.add_argument("--quota", type=int, default=1000, help="requests per window (1000)")
    parser.add_argument("--window", type=parse_duration, default=60.0, help="rate window (60s)")
    parser.add_argument("--client-id", default=CLIENT_ID, help=f"OAuth2 client ({CLIENT_ID})")
    parser.add_argument("--client-secret", default=CLIENT_SECRET, help="OAuth2 client's secret")
    parser.add_argument(
        "--token-expires-in", type=int, default=3600, help="access token lifetime, s (3600)"
    )
    parser.add_argument(
        "--mutate-every",
        type=parse_duration,
        default=None,
        metavar="DURATION",
        help="make a random item change, and one tracker change, this often (off)",
    )
    hooks = parser.add_argument_group("webhooks", "signed webhooks of every tenant's changes")
    hooks.add_argument("--webhook-url", metavar="URL", help="POST them here (off)")
    hooks.add_argument("--webhook-secret", metavar="S", help="signing secret (with a URL)")
    hooks.add_argument("--webhook-scheme", choices=SCHEMES, default="hmac", help="(hmac)")
    hooks.add_argument("--webhook-tenant-header", default="X-Tenant", help="(X-Tenant)")
    hooks.add_argument(
        "--webhook-events", default="*", metavar="P,P", help="types to send: issue.*,user.* (*)"
    )
    return parser


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.webhook_url and not args.webhook_secret:
        parser.error("--webhook-url needs --webhook-secret")
    return args


def _subscribe_every_tenant(sim: VendorSimulator, args: argparse.Namespace) -> None:
    """Subscribe the tenants there are now (later ones opt in over the admin API)."""
    if not args.webhook_url:
        return
    sender = attach(sim)
    for tenant in sim.tenants:
        subscription = Subscription(
            tenant.id,
            args.webhook_url,
            args.webhook_secret,
            scheme=args.webhook_scheme,
            tenant_header=args.webhook_tenant_header,
            events=tuple(args.webhook_events.split(",")),
        )
        sender.subscribe(subscription)


async def _mutate(sim: VendorSimulator, every: float) -> None:
    """Keep the data moving so a demo poller has something to report."""
    while True:
        await asyncio.sleep(every)
        change = sim.mutate_randomly()
        if change is not None:
            operation, tenant_id, item_id = change
            print(f"mutated: {operation} {tenant_id}/{item_id}", file=sys.stderr, flush=True)
        tracker_change = sim.mutate_tracker_randomly()
        if tracker_change is not None:
            operation, tenant_id, name, record_id = tracker_change
            line = f"mutated: {operation} {tenant_id}/{name}/{record_id}"
            print(line, file=sys.stderr, flush=True)


async def _serve(args: argparse.Namespace) -> None:
    tracker = TrackerSizes(args.projects, args.issues, args.comments, args.users)
    sim = VendorSimulator(
        args.tenants,
        args.items,
        seed=args.seed,
        quota=args.quota,
        window=args.window,
        tracker=tracker,
    )
    sim.identity.client_id, sim.identity.client_secret = args.client_id, args.client_secret
    sim.identity.configure(expires_in=args.token_expires_in)
    _subscribe_every_tenant(sim, args)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    async with running_simulator(sim, args.host, args.port) as base_url:
        tenants = [tenant.to_json() for tenant in sim.tenants]
        print(json.dumps({"base_url": base_url, "tenants": tenants}), flush=True)
        print(f"vendor simulator on {base_url}; Ctrl-C to stop", file=sys.stderr, flush=True)
        mutator = None
        if args.mutate_every:
            mutator = asyncio.create_task(_mutate(sim, args.mutate_every))
        await stop.wait()
        if mutator is not None:
            mutator.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await mutator


def main(argv: Sequence[str] | None = None) -> int:
    asyncio.run(_serve(_parse(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
