"""Class-data sharing (AppCDS) for the JVMs the harness starts: brokers, the storage tool and
Kafka's command-line tools.

A JVM that loads Kafka spends most of its start parsing and verifying the same few thousand
classes. A dynamic class-data archive, written once by a JVM at its exit
(``-XX:ArchiveClassesAtExit``) and mapped by later ones (``-XX:SharedArchiveFile``), skips that:
measured here, a broker's start went from 3.9 s of CPU to 2.3 s, a ``kafka-transactions.sh``
call from 1.5 s to 0.6 s (with C1 only and the serial collector, which suit a JVM that lives a
second). The fault suite and CI start dozens of these on two cores, so it adds up.

One archive serves every JVM of a cached Kafka version: it is trained by a broker whose class
path is ``libs/*``, and the JVM accepts an archive whose class path is a prefix of its own, so
the storage tool (same class path) and the command-line tools (``libs/*`` plus the tools jar) use
it too. The file name carries the JVM's identity, so a JDK upgrade trains a new one instead of
mapping an old one (which the JVM would refuse, but only after reading it).

Only a checked archive is ever put in place: a JVM killed while writing one leaves a truncated
file, and mapping a truncated archive crashes the JVM (SIGBUS, seen here), so a recording goes
to a partial file that must map with ``-Xshare:on`` before it is renamed.
``WATUKUY_KAFKA_CDS=0`` turns all of this off.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

# A JVM that runs for a second never reaches C2's payoff; the serial collector starts fastest.
SHORT_LIVED = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
# -Xshare:auto falls back to loading classes from the jars when the archive does not fit (an
# old JDK's, a different class path): quietly, because a fallback is slower, never wrong.
_QUIET = "-Xlog:cds=off,cds+dynamic=off"


def java() -> str:
    found = shutil.which("java")
    if found is None:
        raise SystemExit("kafka: Java 17+ is needed to run Kafka; install a JDK first")
    return found


def enabled() -> bool:
    return os.environ.get("WATUKUY_KAFKA_CDS", "1").strip().lower() not in {"0", "false", "no"}


def archive_path(libs: Path) -> Path:
    """Where the archive of the Kafka in ``libs`` and of this machine's JVM lives."""
    binary = Path(java()).resolve()
    facts = binary.stat()
    tag = hashlib.sha256(f"{binary}:{facts.st_size}:{facts.st_mtime_ns}".encode()).hexdigest()
    return libs.parent / "cds" / f"classes-{tag[:12]}.jsa"


def sharing_flags(libs: Path) -> list[str]:
    """Flags that map the archive when there is one; none when there is not (yet)."""
    if not enabled():
        return []
    archive = archive_path(libs)
    if not archive.exists():
        return []
    return [f"-XX:SharedArchiveFile={archive}", "-Xshare:auto", _QUIET]


def recording_flags(partial: Path) -> list[str]:
    return [f"-XX:ArchiveClassesAtExit={partial}", _QUIET]


@contextlib.contextmanager
def training(libs: Path) -> Iterator[Path | None]:
    """Yields a partial file to record an archive into when ``libs`` has none, else None.

    The caller runs a JVM with :func:`recording_flags` and lets it exit (a JVM writes the
    archive on exit, SIGTERM included). Afterwards the recording is checked and put in place.
    One process trains at a time (a file lock); the others wait and then find the archive.
    """
    if not enabled():
        yield None
        return
    archive = archive_path(libs)
    if archive.exists():
        yield None
        return
    archive.parent.mkdir(parents=True, exist_ok=True)
    with open(archive.parent / "training.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if archive.exists():
            yield None
            return
        partial = archive.with_name(f"{archive.stem}.{uuid.uuid4().hex[:8]}.partial")
        try:
            yield partial
            if partial.exists() and _maps(partial, libs):
                os.replace(partial, archive)
        finally:
            partial.unlink(missing_ok=True)


def _maps(archive: Path, libs: Path) -> bool:
    """Whether a JVM can map ``archive`` (-Xshare:on fails instead of falling back)."""
    crash_report = archive.with_suffix(".crash.log")  # where a JVM that cannot map it says why
    done = subprocess.run(
        [java(), f"-XX:SharedArchiveFile={archive}", "-Xshare:on", f"-XX:ErrorFile={crash_report}",
         "-cp", f"{libs}/*", "-version"],
        capture_output=True, check=False, timeout=60,
    )  # fmt: skip
    crash_report.unlink(missing_ok=True)
    return done.returncode == 0
