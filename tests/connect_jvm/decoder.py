"""Kafka Connect's REST entity classes, run from Python: ``Decode.java`` on connect-runtime's jars.

The jars come from Maven Central through the pom beside this file, the way the test broker's do
(``integration/kafka/broker.py``): ``mvn dependency:copy-dependencies`` into
``$WATUKUY_CACHE`` (default ``~/.cache/watukuy``), once. ``Decode.java`` is compiled with
``javac`` against them, the classes cached under a hash of the pom and the source, so a change
to either rebuilds and an unchanged checkout reuses them.

    decoder = ConnectDecoder.prepare()
    [info, error] = decoder.decode([("ConnectorInfo", body), ("ErrorMessage", other)])

One JVM decodes a whole batch: a JVM start costs a second or two, a decode nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
POM = HERE / "pom.xml"
SOURCE = HERE / "Decode.java"
CONNECT_VERSION = "4.1.1"


class DecodeError(AssertionError):
    """An entity did not decode: the message is Jackson's, with the path of the bad field."""


def cache_root() -> Path:
    return Path(os.environ.get("WATUKUY_CACHE") or str(Path.home() / ".cache" / "watukuy"))


def _digest(*paths: Path) -> str:
    hasher = hashlib.sha256()
    for path in paths:
        hasher.update(path.read_bytes())
    return hasher.hexdigest()[:16]


@contextlib.contextmanager
def _locked(name: str) -> Iterator[None]:
    """Held while a session fetches or compiles, so two sessions never half-write one cache."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(f"connect entities: {name} is needed (Java 17+ JDK and Maven)")
    return found


def fetch_jars() -> Path:
    """connect-runtime and its runtime dependencies, fetched once per pom."""
    target = cache_root() / f"connect-runtime-{CONNECT_VERSION}-{_digest(POM)}"
    libs = target / "libs"
    with _locked(target.name):
        if (target / ".complete").exists():
            return libs
        staging = target.with_name(target.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        cmd = [
            _tool("mvn"), "-q", "-B", "--no-transfer-progress", "-Dstyle.color=never",
            "-f", str(POM), f"-Dconnect.version={CONNECT_VERSION}",
            "dependency:copy-dependencies", "-DincludeScope=runtime",
            f"-DoutputDirectory={staging / 'libs'}",
        ]  # fmt: skip
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
        (target / ".complete").write_text(CONNECT_VERSION)
    return libs


def compile_decoder(libs: Path) -> Path:
    """``Decode.class``, compiled once per (pom, source)."""
    target = cache_root() / f"connect-decode-{_digest(POM, SOURCE)}"
    classes = target / "classes"
    with _locked(target.name):
        if (target / ".complete").exists():
            return classes
        shutil.rmtree(target, ignore_errors=True)
        cmd = [_tool("javac"), "-proc:none", "-cp", f"{libs}/*", "-d", str(classes), str(SOURCE)]
        subprocess.run(cmd, check=True)
        (target / ".complete").write_text(SOURCE.name)
    return classes


@dataclass(frozen=True)
class Decoded:
    """One entry's outcome: ``value`` (the entity read back through its accessors) or ``error``."""

    entity: str
    ok: bool
    value: Any = None
    error: str = ""

    def get(self) -> Any:
        """The value; a :class:`DecodeError` naming the entity and Jackson's message if none."""
        if not self.ok:
            raise DecodeError(f"{self.entity}: {self.error}")
        return self.value


@dataclass(frozen=True)
class ConnectDecoder:
    libs: Path
    classes: Path

    @classmethod
    def prepare(cls) -> ConnectDecoder:
        libs = fetch_jars()
        return cls(libs, compile_decoder(libs))

    def decode(self, batch: Sequence[tuple[str, str]]) -> list[Decoded]:
        """Each ``(entity, json_text)`` decoded by Connect's classes, in one JVM run."""
        requests = [{"entity": entity, "json": text} for entity, text in batch]
        with tempfile.NamedTemporaryFile("w", suffix=".json") as handle:
            json.dump(requests, handle)
            handle.flush()
            cmd = [
                _tool("java"), "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-Xmx256m",
                "-cp", f"{self.classes}{os.pathsep}{self.libs}/*", "Decode", handle.name,
            ]  # fmt: skip
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"Decode.java failed ({done.returncode}): {done.stderr[-2000:]}")
        lines = done.stdout.splitlines()
        assert len(lines) == len(batch), f"{len(batch)} entries, {len(lines)} answers"
        return [
            Decoded(entity, **json.loads(line))
            for (entity, _), line in zip(batch, lines, strict=True)
        ]
