"""``python -m integration.faults [--profile short|full] [--only NAME,...] [--keep]``: run the
fault scenarios one after the other, each on its own topics prefix, and print one table
(scenario, rounds, events verified, duplicates, losses, aborted records seen, recovery s, ok).
The exit code is 1 if any scenario is not ok. Work files (configs, runner and simulator logs)
go to ``--workdir`` (default ``.watukuy/faults``), one directory per scenario."""

from __future__ import annotations

import argparse
import shutil
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from integration.faults.harness import FaultContext, shared_bootstrap
from integration.faults.report import Result, failed, table
from integration.faults.scenarios import SCENARIOS
from integration.runners import ROOT


def run_scenario(
    module: ModuleType, bootstrap: str, workdir: Path, profile: str, keep: bool
) -> Result:
    name: str = module.NAME
    where = workdir / name
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    began = time.monotonic()
    with FaultContext(bootstrap, where, keep_topics=keep) as ctx:
        try:
            result: Result = module.run(ctx, profile)
        except Exception as exc:  # one scenario's crash is its row, the others still run
            (where / "traceback.txt").write_text(traceback.format_exc())
            result = failed(name, f"{type(exc).__name__}: {exc} (see {where}/traceback.txt)")
    result.seconds = time.monotonic() - began
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m integration.faults", description=__doc__)
    parser.add_argument("--profile", choices=["short", "full"], default="short")
    parser.add_argument("--only", default="", help="comma-separated scenario names")
    parser.add_argument("--workdir", type=Path, default=ROOT / ".watukuy" / "faults")
    parser.add_argument("--keep", action="store_true", help="keep the scenarios' topics")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    known = {m.NAME: m for m in SCENARIOS}
    unknown = [n for n in names if n not in known]
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(unknown)}; known: {', '.join(known)}")
    chosen = [known[n] for n in names] if names else SCENARIOS
    results = []
    with shared_bootstrap() as bootstrap:
        for module in chosen:
            name = module.NAME
            print(f"faults: {name} ({args.profile}) ...", file=sys.stderr, flush=True)
            result = run_scenario(module, bootstrap, args.workdir, args.profile, args.keep)
            verdict = "ok" if result.ok else "NOT OK"
            print(
                f"faults: {name}: {verdict} in {result.seconds:.0f}s", file=sys.stderr, flush=True
            )
            results.append(result)
    print(table(results))
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
