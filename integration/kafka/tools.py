"""Kafka's own command-line tools, from the jars the broker runs on, for what librdkafka does
not offer: ``kafka-transactions.sh`` (list, describe-producers, find-hanging, abort).

    python -m integration.kafka.tools classpath       # the broker's jars and kafka-tools
    integration/kafka/bin/kafka-transactions.sh --bootstrap-server HOST:PORT list

The tools jar is fetched once from Maven Central beside the broker's jars (its dependencies are
the broker's own), the way the Kafka distribution ships both in one ``libs/``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from integration.kafka import jvm
from integration.kafka.broker import cache_dir, fetch_jars
from integration.kafka.versions import kafka_version


def tools_jar() -> Path:
    """``kafka-tools-<version>.jar`` of the broker's release, fetched on first use."""
    version = kafka_version()
    target = cache_dir() / "tools"
    jar = target / f"kafka-tools-{version}.jar"
    if jar.exists():
        return jar
    if shutil.which("mvn") is None:
        raise SystemExit("kafka tools: Maven (mvn) is needed to fetch them; install it first")
    staging = target.with_name("tools.partial")
    shutil.rmtree(staging, ignore_errors=True)
    cmd = [
        "mvn", "-q", "-B", "--no-transfer-progress", "-Dstyle.color=never",
        "dependency:copy", f"-Dartifact=org.apache.kafka:kafka-tools:{version}",
        f"-DoutputDirectory={staging}",
    ]  # fmt: skip
    # Maven's output goes to stderr: stdout carries the classpath to the shell script.
    subprocess.run(cmd, check=True, cwd=cache_dir(), stdout=sys.stderr)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return jar


def classpath() -> str:
    return f"{fetch_jars()}/*:{tools_jar()}"


def transactions(bootstrap: str, *args: str, timeout: float = 120) -> str:
    """``kafka-transactions.sh --bootstrap-server <bootstrap> <args>``'s output; a failure
    raises with its stderr."""
    done = subprocess.run(
        [jvm.java(), *jvm.sharing_flags(fetch_jars()), *jvm.SHORT_LIVED,
         "-cp", classpath(), "org.apache.kafka.tools.TransactionsCommand",
         "--bootstrap-server", bootstrap, *args],
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"kafka-transactions.sh {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["classpath"])
    parser.parse_args(argv)
    print(classpath())
    return 0


if __name__ == "__main__":
    sys.exit(main())
