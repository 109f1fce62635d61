"""``watukuy-source``: run a runner instance, validate a config, reset or replay a key, tail,
status, and look at or wipe the runner's local state store (``state info|wipe``).

Every failure a user can fix ends in one line naming the problem and a non-zero exit code:
2 for a bad config or argument, 1 for everything else. ``--debug`` adds the traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import faulthandler
import gc
import json
import re
import sys
import traceback
from collections.abc import Sequence
from datetime import UTC, date, datetime, time, timedelta
from typing import TYPE_CHECKING, Any, NoReturn

from watukuy import logs
from watukuy.core.durations import parse_duration
from watukuy.core.errors import ConfigError, WatukuyError
from watukuy.core.version import VERSION
from watukuy.observe import startup

if TYPE_CHECKING:  # the Kafka modules load only for the commands that use them
    from watukuy.config import RunnerConfig
    from watukuy.store.kafka.factory import ClientFactory
    from watukuy.store.kafka.topiccheck import TopicCheck

EXIT_CONFIG = 2
EXIT_FAILED = 1

_AGO = re.compile(r"\d+(?:\.\d+)?\s*(?:ms|s|m|h|d)")
FROM_USAGE = (
    "must be an ISO-8601 time with a zone like '2026-09-01T00:00:00Z', a date like "
    "'2026-09-01' (midnight UTC), or a duration ago like '2h' or '7d'"
)


class _Parser(argparse.ArgumentParser):
    """argparse, with its usage errors on one line like every other error (exit 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_CONFIG, f"watukuy-source: {message}; see '{self.prog} --help'\n")


def _common(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """``--config`` and ``--debug``, accepted before and after the subcommand.

    The subcommands' copies default to SUPPRESS: a subparser writes its defaults over the
    namespace, which would drop ``--config X`` given before the subcommand.
    """
    default: dict[str, Any] = {"default": argparse.SUPPRESS} if suppress else {}
    parser.add_argument("--config", help="path of the runner's YAML config", **default)
    parser.add_argument(
        "--debug", action="store_true", help="show tracebacks and debug logs", **default
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="watukuy-source",
        description="Poll vendor APIs per tenant and publish what changed to Kafka.",
    )
    _common(parser, suppress=False)
    parser.add_argument("--version", action="version", version=f"watukuy {VERSION}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, help: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help)
        _common(sub, suppress=True)
        return sub

    command("run", "run a runner instance (the default)")
    command("validate", "check the config and its pollers")
    tail = command("tail", "print a poller's events as JSON")
    tail.add_argument("--poller", required=True)
    tail.add_argument("--partition", help="only this partition key's events")
    tail.add_argument("--from-beginning", action="store_true", help="start at the oldest event")
    tail.add_argument(
        "--no-follow", action="store_true", help="stop at the current end instead of waiting"
    )
    tail.add_argument("--max-messages", type=int, help="stop after this many events")
    for name, what in (("reset", "reset a key's cursor"), ("replay", "replay a key from a time")):
        sub = command(name, f"{what} (no runner alive)")
        sub.add_argument("--poller", required=True)
        sub.add_argument("--partition", help="the partition key (partitioned pollers)")
        if name == "reset":
            sub.add_argument("--to", help="the new cursor (JSON, else a string); default: none")
            sub.add_argument("--clear-snapshot", action="store_true")
        else:
            sub.add_argument(
                "--from",
                dest="from_",
                required=True,
                help="ISO-8601 time with a zone, a date (midnight UTC) or a duration ago (2h, 7d)",
            )
    status = command("status", "print each partition's status from <prefix>.status")
    status.add_argument("--poller", help="only this poller's partitions")
    _state_commands(command("state", "look at or wipe this runner's local state store"))
    return parser


def _state_commands(state: argparse.ArgumentParser) -> None:
    """``state info`` and ``state wipe``: the store under ``runner.state.dir``."""
    actions = state.add_subparsers(dest="state_command", metavar="ACTION", required=True)
    for name, what in (
        ("info", "path, size, and per Kafka partition keys, records, offsets, lag, last write"),
        ("wipe", "delete the store (or --partition's) while its runner is stopped"),
    ):
        sub = actions.add_parser(name, help=what, description=what)
        _common(sub, suppress=True)
        if name == "info":
            sub.add_argument("--format", choices=("text", "json"), default="text")
        else:
            sub.add_argument(
                "--partition",
                type=int,
                action="append",
                help="only this Kafka partition of the store (repeat for more)",
            )


def parse_from(text: str, now: datetime) -> str:
    """``replay --from``: the instant as ISO-8601 UTC (``2026-09-01T00:00:00Z``).

    Accepts an ISO-8601 time with a zone, a date alone (midnight UTC) or a duration ago
    (``2h``, ``7d``: ``now`` minus that). A time without a zone is refused, not guessed at.
    """
    value = text.strip()
    if _AGO.fullmatch(value):
        instant = now - timedelta(seconds=parse_duration(value, "--from"))
    else:
        instant = _instant(value, text)
    if instant > now:
        raise ConfigError(f"is in the future: {text!r}", "--from")
    utc = instant.astimezone(UTC)
    spec = "seconds" if utc.microsecond == 0 else "microseconds"
    return utc.replace(tzinfo=None).isoformat(timespec=spec) + "Z"


def _instant(value: str, text: str) -> datetime:
    try:
        return datetime.combine(date.fromisoformat(value), time(), UTC)
    except ValueError:
        pass  # not a date alone: a date and time
    try:
        instant = datetime.fromisoformat(value)
    except ValueError:
        raise ConfigError(f"{FROM_USAGE}, got {text!r}", "--from") from None
    if instant.tzinfo is None:
        raise ConfigError(
            f"needs a time zone, e.g. {value}Z or {value}+02:00; got {text!r}", "--from"
        )
    return instant


def main(argv: Sequence[str] | None = None, *, clients: ClientFactory | None = None) -> int:
    """``clients``: what ``run`` builds its Kafka clients with (the fault suite's runner passes
    one that injects errors; see integration/faults/runner.py)."""
    startup.mark("python started and watukuy imported")
    args = build_parser().parse_args(argv)
    # A crash inside a C library (librdkafka, RocksDB: SIGSEGV, SIGABRT) then leaves every
    # thread's Python stack on stderr, as a JVM leaves its hs_err file: the only trace of it.
    if not faulthandler.is_enabled():
        with contextlib.suppress(AttributeError, ValueError, OSError):  # stderr with no file
            faulthandler.enable()
    # Text until the config is loaded; then its log settings (``--debug`` forces debug).
    logs.configure("text", "debug" if args.debug else "info")
    from watukuy.store.kafka.clients import librdkafka_logger

    librdkafka_logger()  # every client logs here, each message at most once per period
    try:
        if args.config is None:
            raise ConfigError("is required", "--config")
        operation = _check_arguments(args, datetime.now(UTC))
        return _dispatch(args, operation, clients)
    except ConfigError as exc:
        return _fail(args, exc, EXIT_CONFIG)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # the edge: one line for the operator, the trace with --debug
        return _fail(args, exc, EXIT_FAILED)


def _check_arguments(args: argparse.Namespace, now: datetime) -> tuple[str, dict[str, Any]]:
    """The arguments argparse cannot check, before anything is loaded; for reset and replay,
    the engine operation they ask for."""
    if args.command == "tail" and args.max_messages is not None and args.max_messages < 1:
        raise ConfigError("must be a positive integer", "--max-messages")
    if args.command == "replay":
        return "replay", {"from": parse_from(args.from_, now)}  # watukuy.core.operations' JSON form
    if args.command == "reset":
        to: Any = None
        if args.to is not None:
            try:
                to = json.loads(args.to)
            except json.JSONDecodeError:
                to = args.to
        return "reset_cursor", {"to": to, "clear_snapshot": args.clear_snapshot}
    return "", {}


def _dispatch(
    args: argparse.Namespace,
    operation: tuple[str, dict[str, Any]],
    clients: ClientFactory | None = None,
) -> int:
    from watukuy.config import load_config

    command = args.command or "run"
    if command == "run":
        # Off while the runner loads and starts: its imports make objects that live as long as
        # the process, and walking them again and again cost 40-50 ms. The runner turns it
        # back on, tuned (watukuy.runner.GC_THRESHOLDS).
        gc.disable()
    config = load_config(args.config)
    startup.mark("config loaded")
    log = config.log
    logs.configure(
        log.format,
        "debug" if args.debug else log.level,
        config.runner.id if command == "run" else None,
        repeat_interval=log.repeat_interval,
    )
    if command == "validate":
        return _validate(config, args.config)
    if command == "run":
        return _run(config, clients)
    if command == "status":
        from watukuy.status_cli import status

        status(config, args.poller)
        return 0
    if command == "state":
        from watukuy import state_cli

        if args.state_command == "info":
            state_cli.info(config, fmt=args.format)
        else:
            state_cli.wipe(config, args.partition)
        return 0
    if command == "tail":
        from watukuy.tail_cli import tail

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

    op, op_args = operation
    done = asyncio.run(offline.apply(config, args.poller, args.partition, op, op_args))
    print(f"watukuy-source: {command} {done}", file=sys.stderr)
    return 0


def _run(config: RunnerConfig, clients: ClientFactory | None) -> int:
    check = _check_topics(config)  # while the runner's modules load
    from watukuy.runner import run

    startup.mark("runner imported")
    asyncio.run(run(config, clients=clients, topic_check=check))
    return 0


def _check_topics(config: RunnerConfig) -> TopicCheck:
    """The runner's topic check, started now: the broker creates a new deployment's topics
    while the engine, the control plane and REST are imported."""
    from watukuy.store.kafka.topiccheck import TopicCheck
    from watukuy.store.kafka.topics import TopicLayout

    topics = config.topics
    layout = TopicLayout(topics.prefix, topics.partitions, topics.replication_factor)
    pollers = [(poller.name, poller.topic) for poller in config.pollers]
    return TopicCheck(config.kafka, layout, pollers, config.runner.startup_timeout)


def _validate(config: RunnerConfig, path: str) -> int:
    from watukuy.validate_cli import validate_warnings

    print(json.dumps(config.describe(), indent=2, default=str))
    for line in validate_warnings(config):  # warnings: the exit code stays 0
        print(f"watukuy-source: {line}", file=sys.stderr)
    print(f"watukuy-source: {path} is valid", file=sys.stderr)
    return 0


def _fail(args: argparse.Namespace, exc: BaseException, code: int) -> int:
    if args.debug:
        traceback.print_exception(exc)
    message = " ".join(str(exc).split())  # one line, whatever the library wrote
    if not isinstance(exc, WatukuyError):
        message = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    print(f"watukuy-source: {message}", file=sys.stderr)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
