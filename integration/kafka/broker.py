"""A real single-node Apache Kafka broker (KRaft) for tests, benchmarks and the demo.

    python -m integration.kafka.broker start     # fetch once, format, start, print bootstrap
    python -m integration.kafka.broker status
    python -m integration.kafka.broker restart   # same ports and data, e.g. for fault tests
    python -m integration.kafka.broker stop

The broker jars come from Maven Central through the small pom beside this file and are cached
in ``$WATUKUY_CACHE`` (default ``~/.cache/watukuy``) so only the first run downloads anything.
The release is ``$WATUKUY_KAFKA_VERSION`` (default :data:`KAFKA_VERSION`); what differs between
Kafka's lines is in :mod:`integration.kafka.versions`.
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

# KAFKA_VERSION is the default release, kafka_version() the one to run.
from integration.kafka.versions import KAFKA_VERSION as KAFKA_VERSION
from integration.kafka.versions import kafka_line
from integration.kafka.versions import kafka_version as kafka_version
from integration.processes import alive, end_group, free_port

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
    version: str = ""  # the Kafka release; "" in a broker.json written before it was recorded

    @property
    def port(self) -> int:
        return int(self.bootstrap.rsplit(":", 1)[1])


def cache_dir() -> Path:
    """Where the jars of :func:`kafka_version` are cached: one directory per release."""
    root = os.environ.get("WATUKUY_CACHE") or str(Path.home() / ".cache" / "watukuy")
    return Path(root) / f"kafka-{kafka_version()}"


def fetch_jars() -> Path:
    """Resolve the broker and its runtime dependencies once; later calls reuse the cache."""
    version, line = kafka_version(), kafka_line()
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
        f"-Dkafka.version={version}", f"-Dkafka.logging={line.logging}",
        "dependency:copy-dependencies", "-DincludeScope=runtime",
        f"-DoutputDirectory={staging / 'libs'}",
    ]  # fmt: skip
    print(f"broker: fetching Apache Kafka {version} from Maven Central ...", file=sys.stderr)
    # Maven's output goes to stderr: `start` prints the bootstrap on stdout, and mvn -q still
    # writes colour resets there, which a caller reading the address took for part of it.
    if subprocess.run(cmd, check=False, stdout=sys.stderr).returncode != 0:
        # A well-formed release of a supported line may still not exist (3.9.7, say).
        raise SystemExit(
            f"broker: Maven could not fetch Apache Kafka {version} (its output is above); "
            "is it a release on Maven Central?"
        )
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    marker.write_text(version)
    return libs


def server_properties(data_dir: Path, port: int, controller_port: int) -> str:
    return properties_text(node_settings(data_dir, port, controller_port))


def properties_text(settings: dict[str, str]) -> str:
    return "".join(f"{key}={value}\n" for key, value in settings.items())


def node_settings(data_dir: Path, port: int, controller_port: int) -> dict[str, str]:
    """One node's settings, as a single node; :mod:`integration.kafka.cluster` overrides the
    identity, the quorum and the replication of Kafka's own topics for a cluster."""
    line = kafka_line()
    settings = {
        "process.roles": "broker,controller",
        "node.id": "1",
        **line.quorum_settings(1, f"127.0.0.1:{controller_port}"),
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
    if line.share_groups:
        settings["share.coordinator.state.topic.replication.factor"] = "1"
        settings["share.coordinator.state.topic.min.isr"] = "1"
    return settings


def write_log_config(runtime: Path, log: Path) -> Path:
    """Write the logging config :func:`java_command` points the JVM at, in the syntax of the
    release's backend, sending the node's log to ``log``; the file written."""
    line = kafka_line()
    path = runtime / line.log_file
    path.write_text(line.log_config(log))
    return path


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
        kafka_line().log_property(runtime),
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
        return same_version(existing)
    libs = fetch_jars()
    if record is None:
        train_class_archive(libs)
    props = runtime / "server.properties"
    if fresh or not props.exists():
        shutil.rmtree(runtime, ignore_errors=True)
        runtime.mkdir(parents=True)
        port, controller_port = free_port(), free_port()
        props.write_text(server_properties(runtime, port, controller_port))
        write_log_config(runtime, runtime / "server.log")
        fmt = java_command(
            libs, runtime, "kafka.tools.StorageTool",
            *kafka_line().format_args(cluster_id(), props), short_lived=True,
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
        version=kafka_version(),
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


def same_version(running: RunningBroker) -> RunningBroker:
    """``running``, if it runs :func:`kafka_version`: tests that passed on another release than
    the one asked for would say nothing of it. (A broker.json of before the release was
    recorded is taken as it is.)"""
    wanted = kafka_version()
    if running.version and running.version != wanted:
        raise SystemExit(
            f"broker: the broker in {running.dir} runs Kafka {running.version}, but "
            f"WATUKUY_KAFKA_VERSION asks for {wanted}: stop it first "
            f"(python -m integration.kafka.broker stop --dir {running.dir})"
        )
    return running


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
    kafka_version()  # a bad WATUKUY_KAFKA_VERSION stops the caller now, not a later private broker
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
        same_version(running)
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
    kafka_version()  # a bad WATUKUY_KAFKA_VERSION fails every command at once
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
        kafka = running.version or "?"
        print(f"broker: running pid={running.pid} bootstrap={running.bootstrap} kafka={kafka}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
