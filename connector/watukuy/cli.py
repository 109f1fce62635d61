"""``watukuy-source``: the runner's command line."""

from __future__ import annotations

import argparse
import sys

from watukuy import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="watukuy-source", description=__doc__)
    parser.add_argument("--version", action="version", version=f"watukuy {__version__}")
    parser.add_argument("--config", help="path of the runner's YAML config")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.config is None:
        print("watukuy-source: --config is required", file=sys.stderr)
        return 2
    print("watukuy-source: the runner is not built yet", file=sys.stderr)
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
