"""A real single-node Apache Kafka broker (KRaft) for tests, benchmarks and the demo.

    python -m integration.kafka.broker start     # fetch once, format, start, print bootstrap
    python -m integration.kafka.broker status
    python -m integration.kafka.broker restart   # same ports and data, e.g. for fault tests
    python -m integration.kafka.broker stop

The broker jars come from Maven Central through the small pom beside this file and are cached
in ``$WATUKUY_CACHE`` (default ``~/.cache/watukuy``) so only the first run downloads anything.
The running broker is described in ``<dir>/broker.json`` (default dir ``.watukuy/broker`` in
the repository), which is where the test fixture and the demo find its bootstrap address.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from integration.kafka import jvm
from integration.processes import alive, end_group, free_port

KAFKA_VERSION = "4.4.0"
HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
DEFAULT_DIR = REPO / ".watukuy" / "broker"
READY_TIMEOUT = 120.0


@dataclass(frozen=True)
class RunningBroker:
    bootstrap: str
    controller: str
    pid: int
    dir: str

    @property
    def port(self) -> int:
        return int(self.bootstrap.rsplit(":", 1)[1])


def cache_dir() -> Path:
    root = os.environ.get("WATUKUY_CACHE") or str(Path.home() / ".cache" / "watukuy")
    return Path(root) / f"kafka-{KAFKA_VERSION}"


def fetch_jars() -> Path:
    """Resolve the broker and its runtime dependencies once; later calls reuse the cache."""
    target = cache_dir()
    libs = target / "libs"
    marker = target / ".complete"
    if marker.exists():
        return libs
    if shutil.which("mvn") is None:
        raise SystemExit("broker: Maven (mvn) is needed to fetch Kafka; install it first")
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    cmd = [
        "mvn", "-q", "-B", "--no-transfer-progress", "-Dstyle.color=never",
        "-f", str(HERE / "pom.xml"),
        f"-Dkafka.version={KAFKA_VERSION}",
        "dependency:copy-dependencies", "-DincludeScope=runtime",
        f"-DoutputDirectory={staging / 'libs'}",
    ]  # fmt: skip
    print(f"broker: fetching Apache Kafka {KAFKA_VERSION} from Maven Central ...", file=sys.stderr)
    subprocess.run(cmd, check=True)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    marker.write_text(KAFKA_VERSION)
    return libs


def server_properties(data_dir: Path, port: int, controller_port: int) -> str:
    return properties_text(node_settings(data_dir, port, controller_port))


def properties_text(settings: dict[str, str]) -> str:
    return "".join(f"{key}={value}\n" for key, value in settings.items())


def node_settings(data_dir: Path, port: int, controller_port: int) -> dict[str, str]:
    """One node's settings, as a single node; :mod:`integration.kafka.cluster` overrides the
    identity, the quorum and the replication of Kafka's own topics for a cluster."""
    return {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(data_dir / "logs"),
        "num.partitions": "1",
        "auto.create.topics.enable": "false",
        # One node: every internal topic has one replica, and few partitions start faster.
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "4",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        # Fault tests use short consumer sessions to show fencing without long waits.
        "group.min.session.timeout.ms": "1000",
        "group.consumer.min.session.timeout.ms": "1000",
        "group.consumer.min.heartbeat.interval.ms": "500",
        "group.consumer.heartbeat.interval.ms": "1000",
        # A cleaner that runs often, so compaction is visible within a test.
        "log.cleaner.backoff.ms": "500",
        "log.cleaner.threads": "1",
        "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
        "log.retention.check.interval.ms": "5000",
        # A takeover waits for the dead owner's open transaction to be aborted: look often.
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    }


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


def cluster_id() -> str:
    """22 characters of URL-safe base64, as Kafka wants; never starting with '-', which the
    storage tool's argument parser would read as an option (1 start in 64 failed that way)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def java_command(
    libs: Path,
    runtime: Path,
    main: str,
    *args: str,
    short_lived: bool = False,
    record: Path | None = None,
) -> list[str]:
    """A JVM running ``main`` on Kafka's jars, mapping the class-data archive when there is one
    (:mod:`integration.kafka.jvm`), or recording it at exit into ``record``."""
    sharing = jvm.recording_flags(record) if record else jvm.sharing_flags(libs)
    return [
        jvm.java(),
        *sharing,
        *(jvm.SHORT_LIVED if short_lived else ("-Xms256m", "-Xmx768m", "-XX:+UseG1GC")),
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={runtime / 'log4j2.properties'}",
        f"-Dkafka.logs.dir={runtime}",
        "-cp",
        f"{libs}/*",
        main,
        *args,
    ]


def read_running(runtime: Path = DEFAULT_DIR) -> RunningBroker | None:
    """The broker described in ``runtime``, if its process is still alive."""
    try:
        info = json.loads((runtime / "broker.json").read_text())
    except (OSError, ValueError):
        return None
    broker = RunningBroker(**info)
    return broker if alive(broker.pid) else None


def start(
    runtime: Path = DEFAULT_DIR, *, fresh: bool = True, record: Path | None = None
) -> RunningBroker:
    """Start a broker in ``runtime``; ``fresh=False`` reuses its config and data (a restart);
    ``record`` names the file its JVM writes a class-data archive into when it stops."""
    existing = read_running(runtime)
    if existing is not None:
        return existing
    libs = fetch_jars()
    if record is None:
        train_class_archive(libs)
    props = runtime / "server.properties"
    if fresh or not props.exists():
        shutil.rmtree(runtime, ignore_errors=True)
        runtime.mkdir(parents=True)
        port, controller_port = free_port(), free_port()
        props.write_text(server_properties(runtime, port, controller_port))
        (runtime / "log4j2.properties").write_text(LOG4J2.format(log=runtime / "server.log"))
        fmt = java_command(
            libs, runtime, "kafka.tools.StorageTool",
            "format", "--standalone", "-t", cluster_id(), "-c", str(props), short_lived=True,
        )  # fmt: skip
        subprocess.run(fmt, check=True, stdout=subprocess.DEVNULL)
    else:
        port, controller_port = _ports_of(props)
    with open(runtime / "stdout.log", "ab") as out:
        proc = subprocess.Popen(
            java_command(libs, runtime, "kafka.Kafka", str(props), record=record),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # the broker outlives this script; stop() ends its group
        )
    broker = RunningBroker(
        bootstrap=f"127.0.0.1:{port}",
        controller=f"127.0.0.1:{controller_port}",
        pid=proc.pid,
        dir=str(runtime),
    )
    (runtime / "broker.json").write_text(json.dumps(asdict(broker)))
    try:
        wait_ready(broker.bootstrap, proc)
    except BaseException:
        stop(runtime)
        raise
    return broker


def train_class_archive(libs: Path) -> None:
    """Record the class-data archive of the Kafka in ``libs`` if there is none yet: a broker
    that starts, answers and stops (a few seconds, once per cached Kafka and JDK)."""
    with jvm.training(libs) as partial:
        if partial is None:
            return
        with tempfile.TemporaryDirectory(prefix="watukuy-cds-") as scratch:
            start(Path(scratch) / "broker", record=partial)
            stop(Path(scratch) / "broker")


def wait_ready(bootstrap: str, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Ready means a metadata request is answered, not merely that the port is open."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"broker exited with code {proc.returncode}; see its server.log")
        try:
            metadata = admin.list_topics(timeout=2)
            if metadata.brokers:
                return
        except Exception:  # not up yet: the loop retries until the deadline
            time.sleep(0.3)
    raise TimeoutError(f"broker at {bootstrap} did not answer within {READY_TIMEOUT:.0f}s")


def stop(runtime: Path = DEFAULT_DIR, *, keep_data: bool = False) -> bool:
    """Stop the broker (TERM, then KILL after 30 s); True if one was running."""
    try:
        info = json.loads((runtime / "broker.json").read_text())
    except (OSError, ValueError):
        return False
    pid = int(info["pid"])
    was_running = alive(pid)
    if was_running:
        end_group(pid, signal.SIGTERM, 30, step=0.2)
    if keep_data:
        (runtime / "broker.json").unlink(missing_ok=True)
    else:
        shutil.rmtree(runtime, ignore_errors=True)
    return was_running


def restart(runtime: Path = DEFAULT_DIR) -> RunningBroker:
    stop(runtime, keep_data=True)
    return start(runtime, fresh=False)


@contextlib.contextmanager
def shared(
    runtime: Path = DEFAULT_DIR, *, say: Callable[[str], None] = lambda _: None
) -> Iterator[str]:
    """The bootstrap of ``$WATUKUY_BOOTSTRAP``, else of the broker in ``runtime``, started here
    if none runs. Each process using it is recorded in ``<runtime>/users``; the last one out
    stops a broker that one of them started, so a test session ending does not pull the broker
    from under a demo or another session. A broker started by hand (``start``) stays up."""
    external = os.environ.get("WATUKUY_BOOTSTRAP")
    if external:
        yield external
        return
    me = str(os.getpid())
    with _lock(runtime):
        running = read_running(runtime)
        if running is None:
            say("starting a local Kafka broker (the first run fetches Kafka) ...")
            running = start(runtime)
            (runtime / STARTED_FOR_USERS).touch()
            say(f"started the broker (pid {running.pid}) on {running.bootstrap}")
        (runtime / "users").mkdir(exist_ok=True)
        (runtime / "users" / me).touch()
    try:
        yield running.bootstrap
    finally:
        with _lock(runtime):
            (runtime / "users" / me).unlink(missing_ok=True)
            if not _live_users(runtime / "users") and (runtime / STARTED_FOR_USERS).exists():
                stop(runtime)
                say(f"stopped the broker it started (pid {running.pid})")


STARTED_FOR_USERS = "started-for-users"


@contextlib.contextmanager
def _lock(runtime: Path) -> Iterator[None]:
    """Held while a process starts, joins, leaves or stops the broker in ``runtime``."""
    runtime.parent.mkdir(parents=True, exist_ok=True)
    with open(runtime.parent / f"{runtime.name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _live_users(users: Path) -> list[str]:
    """The users still alive; a crashed user's entry is removed."""
    live = []
    for entry in users.iterdir() if users.is_dir() else []:
        if entry.name.isdigit() and alive(int(entry.name)):
            live.append(entry.name)
        else:
            entry.unlink(missing_ok=True)
    return live


def _ports_of(props: Path) -> tuple[int, int]:
    for line in props.read_text().splitlines():
        if line.startswith("listeners="):
            parts = dict(item.split("://", 1) for item in line.split("=", 1)[1].split(","))
            return int(parts["PLAINTEXT"].rsplit(":", 1)[1]), int(
                parts["CONTROLLER"].rsplit(":", 1)[1]
            )
    raise RuntimeError(f"{props} has no listeners line")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["fetch", "start", "stop", "restart", "status"])
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="runtime directory")
    args = parser.parse_args(argv)
    runtime: Path = args.dir.resolve()
    if args.command == "fetch":
        print(fetch_jars())
    elif args.command == "start":
        began = time.monotonic()
        broker = start(runtime)
        print(f"broker: ready in {time.monotonic() - began:.1f}s", file=sys.stderr)
        print(broker.bootstrap)
    elif args.command == "restart":
        print(restart(runtime).bootstrap)
    elif args.command == "stop":
        print("broker: stopped" if stop(runtime) else "broker: was not running", file=sys.stderr)
    else:
        running = read_running(runtime)
        if running is None:
            print("broker: not running")
            return 1
        print(f"broker: running pid={running.pid} bootstrap={running.bootstrap}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
