"""``watukuy-source``: run a runner instance, validate a config, reset or replay a key.

Every failure a user can fix ends in one line naming the problem and a non-zero exit code:
2 for a bad config or argument, 1 for everything else. ``--debug`` adds the traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import traceback
from collections.abc import Sequence
from typing import Any

from watukuy import __version__
from watukuy.core.errors import ConfigError, WatukuyError

EXIT_CONFIG = 2
EXIT_FAILED = 1


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", help="path of the runner's YAML config")
    common.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    parser = argparse.ArgumentParser(
        prog="watukuy-source",
        description="Poll vendor APIs per tenant and publish what changed to Kafka.",
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"watukuy {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.add_parser("run", parents=[common], help="run a runner instance (the default)")
    commands.add_parser("validate", parents=[common], help="check the config and its pollers")
    tail = commands.add_parser("tail", parents=[common], help="print a poller's events as JSON")
    tail.add_argument("--poller", required=True)
    tail.add_argument("--partition", help="only this partition key's events")
    tail.add_argument("--from-beginning", action="store_true", help="start at the oldest event")
    tail.add_argument(
        "--no-follow", action="store_true", help="stop at the current end instead of waiting"
    )
    tail.add_argument("--max-messages", type=int, help="stop after this many events")
    for name, what in (("reset", "reset a key's cursor"), ("replay", "replay a key from a time")):
        sub = commands.add_parser(name, parents=[common], help=f"{what} (no runner alive)")
        sub.add_argument("--poller", required=True)
        sub.add_argument("--partition", help="the partition key (partitioned pollers)")
        if name == "reset":
            sub.add_argument("--to", help="the new cursor (JSON, else a string); default: none")
            sub.add_argument("--clear-snapshot", action="store_true")
        else:
            sub.add_argument("--from", dest="from_", required=True, help="ISO-8601 timestamp")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not args.debug:
        logging.getLogger("watukuy.librdkafka").setLevel(logging.ERROR)
    try:
        if args.config is None:
            raise ConfigError("is required", "--config")
        return _dispatch(args)
    except ConfigError as exc:
        return _fail(args, exc, EXIT_CONFIG)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # the edge: one line for the operator, the trace with --debug
        return _fail(args, exc, EXIT_FAILED)


def _dispatch(args: argparse.Namespace) -> int:
    from watukuy.config import load_config

    config = load_config(args.config)
    command = args.command or "run"
    if command == "validate":
        print(json.dumps(config.describe(), indent=2, default=str))
        print(f"watukuy-source: {args.config} is valid", file=sys.stderr)
        return 0
    if command == "run":
        from watukuy.runner import run

        asyncio.run(run(config))
        return 0
    if command == "tail":
        from watukuy.tail import tail

        if args.max_messages is not None and args.max_messages < 1:
            raise ConfigError("must be a positive integer", "--max-messages")
        tail(
            config,
            args.poller,
            partition=args.partition,
            from_beginning=args.from_beginning,
            follow=not args.no_follow,
            max_messages=args.max_messages,
        )
        return 0
    from watukuy import offline

    op, op_args = _operation(args)
    key = asyncio.run(offline.apply(config, args.poller, args.partition, op, op_args))
    print(f"watukuy-source: {command} applied to {key}", file=sys.stderr)
    return 0


def _operation(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    if args.command == "replay":
        return "replay", {"from_": args.from_}
    to: Any = None
    if args.to is not None:
        try:
            to = json.loads(args.to)
        except json.JSONDecodeError:
            to = args.to
    return "reset_cursor", {"to": to, "clear_snapshot": args.clear_snapshot}


def _fail(args: argparse.Namespace, exc: BaseException, code: int) -> int:
    if args.debug:
        traceback.print_exception(exc)
    kind = "" if isinstance(exc, WatukuyError) else f"{type(exc).__name__}: "
    message = " ".join(str(exc).split())  # one line, whatever the library wrote
    print(f"watukuy-source: {kind}{message}", file=sys.stderr)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
