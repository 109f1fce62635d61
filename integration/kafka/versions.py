"""The Kafka releases the test harness runs, and what differs between their lines: one table.

``WATUKUY_KAFKA_VERSION`` (a release such as ``3.9.1``; default :data:`KAFKA_VERSION`) picks the
broker that :mod:`integration.kafka.broker`, :mod:`integration.kafka.cluster` and
:mod:`integration.kafka.tools` fetch and run, for the tests, the fault suite, the benchmarks
and the demo. :func:`kafka_version` is the one place that reads it, and refuses a release of no
line in :data:`LINES` at once, before anything is fetched or started.

What differs, found by starting each release (integration/kafka/VERSIONS.md):

- Logging. Kafka's POM carries no logging backend. 4.x logs through log4j2 and reads
  ``-Dlog4j2.configurationFile``; 3.x through log4j 1.x (reload4j, as its tarball ships) and
  reads ``-Dlog4j.configuration=file:...``, in its own properties syntax. Either ignores the
  other's file and then writes no ``server.log``, which the fault suite reads.
- The single node's quorum. KIP-853 (3.9) formats a dynamic quorum with ``--standalone`` and
  finds it through ``controller.quorum.bootstrap.servers``. 3.7 and 3.8 reject ``--standalone``
  and need a static ``controller.quorum.voters`` even for one node.
- Share groups (KIP-932, 4.0): ``share.coordinator.*`` settings are unknown to 3.x. A broker
  ignores unknown settings without a word, so they are left out there to keep its logged
  config true. (``group.consumer.*`` of KIP-848 exist on every supported line.)
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

ENV = "WATUKUY_KAFKA_VERSION"
KAFKA_VERSION = "4.4.0"
"""The default release: what CI and ``make test`` run, the newest on Maven Central here."""

Logging = Literal["log4j2", "reload4j"]


class UnsupportedKafkaVersion(SystemExit):
    """A release the harness cannot run. A ``SystemExit``: uncaught, a command prints the
    message alone and exits 1, before it fetches or starts anything."""


@dataclass(frozen=True)
class KafkaLine:
    """The releases ``major.minor`` for ``minor`` in ``minors``, and how they are run."""

    name: str
    major: int
    minors: range
    logging: Logging
    """The logging backend the pom fetches (its Maven profile) and the config file it reads."""
    dynamic_quorum: bool
    """KIP-853: a single node is formatted ``--standalone`` and found through
    ``controller.quorum.bootstrap.servers``; else a static ``controller.quorum.voters``."""
    share_groups: bool
    """KIP-932: the broker knows the ``share.coordinator.*`` settings."""
    matrix: str
    """The release of this line that ``make test-versions`` runs."""

    def covers(self, release: str) -> bool:
        major, minor, _ = (int(part) for part in release.split("."))
        return major == self.major and minor in self.minors

    @property
    def log_file(self) -> str:
        """The name of the logging config file in a node's runtime directory."""
        return "log4j2.properties" if self.logging == "log4j2" else "log4j.properties"

    def log_property(self, runtime: Path) -> str:
        """The JVM flag that points the backend at :attr:`log_file` in ``runtime``."""
        if self.logging == "log4j2":
            return f"-Dlog4j2.configurationFile={runtime / self.log_file}"
        return f"-Dlog4j.configuration=file:{runtime / self.log_file}"

    def log_config(self, log: Path) -> str:
        """The config that writes Kafka's own lines (INFO) and the rest (WARN) to ``log``."""
        template = LOG4J2 if self.logging == "log4j2" else LOG4J1
        return template.format(log=log)

    def format_args(self, cluster_id: str, props: Path, *, single: bool = True) -> list[str]:
        """``kafka.tools.StorageTool``'s arguments. A cluster's nodes name their static voters
        in ``props`` on every line, so only a single node of a KIP-853 line is ``--standalone``."""
        standalone = ["--standalone"] if single and self.dynamic_quorum else []
        return ["format", *standalone, "-t", cluster_id, "-c", str(props)]

    def quorum_settings(self, node_id: int, controller: str) -> dict[str, str]:
        """How a single node finds its controller quorum (itself, at ``controller``)."""
        if self.dynamic_quorum:
            return {"controller.quorum.bootstrap.servers": controller}
        return {"controller.quorum.voters": f"{node_id}@{controller}"}


LINES: tuple[KafkaLine, ...] = (
    KafkaLine("3.7-3.8", 3, range(7, 9), "reload4j", False, False, matrix="3.7.2"),
    KafkaLine("3.9", 3, range(9, 10), "reload4j", True, False, matrix="3.9.1"),
    KafkaLine("4.x", 4, range(0, 5), "log4j2", True, True, matrix=KAFKA_VERSION),
)
"""The supported lines, oldest first."""

_RELEASE = re.compile(r"\d+\.\d+\.\d+")


def supported() -> str:
    """The supported lines as messages and the docs name them."""
    return ", ".join(
        f"{line.major}.{line.minors[0]}.x"
        if len(line.minors) == 1
        else f"{line.major}.{line.minors[0]}.x-{line.major}.{line.minors[-1]}.x"
        for line in LINES
    )


def line_of(release: str, source: str = ENV) -> KafkaLine:
    """The line of ``release``; :class:`UnsupportedKafkaVersion` if it is malformed or of no
    supported line, naming where it came from (``source``)."""
    if not _RELEASE.fullmatch(release):
        raise UnsupportedKafkaVersion(
            f"{source}={release!r} is not a Kafka release: write MAJOR.MINOR.PATCH, e.g. "
            f"{KAFKA_VERSION} (supported: {supported()})"
        )
    for line in LINES:
        if line.covers(release):
            return line
    raise UnsupportedKafkaVersion(
        f"{source}={release}: Kafka {release} is not supported by the test harness "
        f"(supported: {supported()}; see integration/kafka/VERSIONS.md)"
    )


def kafka_version() -> str:
    """The Kafka release to fetch and run: ``$WATUKUY_KAFKA_VERSION`` (validated), else
    :data:`KAFKA_VERSION`."""
    release = os.environ.get(ENV, "").strip() or KAFKA_VERSION
    line_of(release)
    return release


def kafka_line() -> KafkaLine:
    """The line of :func:`kafka_version`: how to fetch, format, configure and log it."""
    return line_of(kafka_version())


def matrix_versions() -> list[str]:
    """What ``make test-versions`` runs by default: the oldest supported line and the default."""
    oldest = LINES[0].matrix
    return [oldest] if oldest == KAFKA_VERSION else [oldest, KAFKA_VERSION]


# The patterns match each other: the time, the level, the message, the logger.
LOG4J2 = """\
status = error
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.server.name = org.apache.kafka.server
logger.server.level = INFO
"""

LOG4J1 = """\
log4j.rootLogger=WARN, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka=INFO
log4j.logger.org.apache.kafka.server=INFO
"""
