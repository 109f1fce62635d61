"""The real runner with fault-injecting Kafka clients.

    python -m integration.faults.runner --config FILE [--debug]
        [--hold-transaction S]
        [--crash-at POINT --after N]
        [--fail-at POINT (--fatal | --abortable) --after N [--times N]]
        [--fault ACTION@POINT[,after=N][,times=N|every][,seconds=S] ...]
        [--swallow-assignment]

It runs exactly what ``watukuy-source run --config FILE`` runs (``watukuy.cli.main``, with its
logs, exit codes and signal handling), with :class:`integration.faults.clients.FaultyClients`
as the store's client factory. Points and counting are described there; in short:

- ``--hold-transaction S``: every transaction stays open S seconds before its commit (so a
  SIGKILL or SIGSTOP is likely to land inside one);
- ``--crash-at POINT --after N``: the process ends (exit 137) at POINT of the first transaction
  begun after N counted ones: ``produce`` (after produce), ``commit`` (during commit: produced,
  not committed), ``committed`` (after commit), ``dlq`` (during the commit of a transaction that
  writes a DLQ record), ``begin``, ``send_offsets``; ``grant``: the credential store's write of
  a tenant's grant after this runner claimed its refresh (the provider has rotated the grant,
  the store never gets the new one), after N such writes;
- ``--fail-at POINT --fatal|--abortable --after N``: that transaction fails with a fatal
  (fenced) or an abortable error at POINT;
- ``--swallow-assignment``: the first partition of the group consumer's first assignment is
  assigned, and never told to the runner (:meth:`FaultyClients.swallow_assignment`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from integration.faults.clients import ACTIONS, POINTS, Fault, FaultyClients, parse_fault

__all__ = ["faults_of", "main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m integration.faults.runner",
        description="watukuy-source run, with Kafka clients that fail on purpose.",
    )
    parser.add_argument("--config", required=True, help="path of the runner's YAML config")
    parser.add_argument("--debug", action="store_true", help="as watukuy-source --debug")
    parser.add_argument(
        "--hold-transaction", type=float, metavar="S", help="hold every transaction open S s"
    )
    parser.add_argument("--crash-at", choices=POINTS, metavar="POINT", help="exit 137 at POINT")
    parser.add_argument("--fail-at", choices=POINTS, metavar="POINT", help="raise at POINT")
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument("--fatal", action="store_true", help="--fail-at raises a fatal error")
    kind.add_argument("--abortable", action="store_true", help="--fail-at raises an abortable one")
    parser.add_argument(
        "--after", type=int, default=0, metavar="N", help="let N counted transactions through"
    )
    parser.add_argument("--times", type=int, default=1, metavar="N", help="for --fail-at (1)")
    parser.add_argument(
        "--swallow-assignment",
        action="store_true",
        help="keep the first partition of the first assignment from the runner",
    )
    parser.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="SPEC",
        help=f"ACTION@POINT[,after=N][,times=N|every][,seconds=S]; actions: {', '.join(ACTIONS)}",
    )
    return parser


def faults_of(argv: Sequence[str]) -> tuple[list[Fault], list[str]]:
    """The faults the options ask for, and the arguments for ``watukuy.cli.main``."""
    parser = _parser()
    args = parser.parse_args(list(argv))
    faults: list[Fault] = []
    try:
        if args.hold_transaction is not None:
            faults.append(Fault("hold", "commit", times=None, seconds=args.hold_transaction))
        if args.crash_at is not None:
            faults.append(Fault("crash", args.crash_at, after=args.after))
        if args.fail_at is not None:
            if not (args.fatal or args.abortable):
                parser.error("--fail-at needs --fatal or --abortable")
            action = "fatal" if args.fatal else "abortable"
            faults.append(Fault(action, args.fail_at, after=args.after, times=args.times))
        elif args.fatal or args.abortable:
            parser.error("--fatal and --abortable go with --fail-at")
        faults.extend(parse_fault(spec) for spec in args.fault)
    except ValueError as exc:
        parser.error(str(exc))
    cli = ["--config", args.config, *(["--debug"] if args.debug else [])]
    return faults, cli


def _prefix(config: str) -> str | None:
    """The config's ``topics.prefix``; None when it does not load (``run`` then says why)."""
    from watukuy.config import load_config

    try:
        return load_config(config).topics.prefix
    except Exception:
        return None


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    faults, cli = faults_of(argv)
    swallow = _parser().parse_args(argv).swallow_assignment  # not a transaction's fault
    from watukuy import cli as watukuy_cli

    shown = ", ".join(str(f) for f in faults) or "none"
    print(f"integration.faults.runner: faults: {shown}", file=sys.stderr)
    prefix = _prefix(cli[1])
    if prefix is None:
        return watukuy_cli.main(cli)
    clients = FaultyClients(faults, prefix=prefix)
    if swallow:
        clients.swallow_assignment()
    return watukuy_cli.main(cli, clients=clients)


if __name__ == "__main__":
    sys.exit(main())
