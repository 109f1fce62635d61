"""A real Apache Kafka cluster of N KRaft nodes on loopback, for tests that need what one node
cannot show: replicated topics, leaders that move, a transaction coordinator that fails over.

    python -m integration.kafka.cluster start [--nodes 3]   # format, start, print bootstrap
    python -m integration.kafka.cluster status
    python -m integration.kafka.cluster bounce 2 [--hard]   # stop node 2 (SIGKILL) and start it
    python -m integration.kafka.cluster stop

Each node is broker and controller, with a static quorum of all nodes, its own ports, data and
``server.log`` under ``<dir>/node-<id>`` (default dir ``.watukuy/cluster``), from the jars the
single broker uses (:mod:`integration.kafka.broker`). Kafka's own topics (consumer offsets,
transaction state) get three replicas with two in sync, as in production. The running cluster
is described in ``<dir>/cluster.json``.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient

from integration.kafka.broker import (
    REPO,
    cluster_id,
    fetch_jars,
    java_command,
    node_settings,
    properties_text,
    train_class_archive,
    wait_ready,
    write_log_config,
)
from integration.kafka.tools import transactions
from integration.kafka.versions import kafka_line, kafka_version
from integration.processes import alive, end_group, free_port, signal_group

DEFAULT_DIR = REPO / ".watukuy" / "cluster"
STOP_TIMEOUT = 30.0


@dataclass(frozen=True)
class Node:
    id: int
    port: int
    controller_port: int
    pid: int
    dir: str

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"


@dataclass(frozen=True)
class RunningCluster:
    nodes: tuple[Node, ...]
    dir: str

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    def node(self, node_id: int) -> Node:
        for node in self.nodes:
            if node.id == node_id:
                return node
        raise KeyError(f"no node {node_id} in the cluster at {self.dir}")


def _settings(node: Node, voters: str, size: int) -> dict[str, str]:
    settings = node_settings(Path(node.dir), node.port, node.controller_port)
    # Every line takes a static quorum of all nodes; a single node's dynamic one is dropped.
    settings.pop("controller.quorum.bootstrap.servers", None)
    in_sync = str(min(2, size))
    replicas = str(min(3, size))
    settings.update(
        {
            "node.id": str(node.id),
            "controller.quorum.voters": voters,
            "offsets.topic.replication.factor": replicas,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": in_sync,
            "default.replication.factor": replicas,
            # A follower that stops fetching leaves the in-sync set soon (a paused broker).
            "replica.lag.time.max.ms": "10000",
        }
    )
    if kafka_line().share_groups:
        settings["share.coordinator.state.topic.replication.factor"] = replicas
        settings["share.coordinator.state.topic.min.isr"] = in_sync
    return settings


def start(runtime: Path = DEFAULT_DIR, *, nodes: int = 3) -> RunningCluster:
    """Format and start a fresh cluster of ``nodes`` in ``runtime`` (replacing what was there)."""
    stop(runtime)
    shutil.rmtree(runtime, ignore_errors=True)
    runtime.mkdir(parents=True)
    libs = fetch_jars()
    train_class_archive(libs)
    planned = [
        Node(i, free_port(), free_port(), 0, str(runtime / f"node-{i}"))
        for i in range(1, nodes + 1)
    ]
    voters = ",".join(f"{n.id}@127.0.0.1:{n.controller_port}" for n in planned)
    identity = cluster_id()
    for node in planned:
        home = Path(node.dir)
        home.mkdir()
        (home / "server.properties").write_text(properties_text(_settings(node, voters, nodes)))
        write_log_config(home, home / "server.log")
        fmt = java_command(
            libs, home, "kafka.tools.StorageTool",
            *kafka_line().format_args(identity, home / "server.properties", single=False),
            short_lived=True,
        )  # fmt: skip
        subprocess.run(fmt, check=True, stdout=subprocess.DEVNULL)
    # All at once: a node waits for a quorum of controllers before it serves.
    cluster = RunningCluster(tuple(_launch(libs, node) for node in planned), str(runtime))
    _write(cluster)
    try:
        for node in cluster.nodes:
            wait_ready(node.bootstrap)
        _wait_brokers(cluster, nodes)
    except BaseException:
        stop(runtime)
        raise
    return cluster


def _launch(libs: Path, node: Node) -> Node:
    home = Path(node.dir)
    with open(home / "stdout.log", "ab") as out:
        proc = subprocess.Popen(
            java_command(libs, home, "kafka.Kafka", str(home / "server.properties")),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    return replace(node, pid=proc.pid)


def _write(cluster: RunningCluster) -> None:
    Path(cluster.dir, "cluster.json").write_text(json.dumps(asdict(cluster)))


def read_running(runtime: Path = DEFAULT_DIR) -> RunningCluster | None:
    """The cluster described in ``runtime`` (some of its nodes may be down)."""
    try:
        raw = json.loads((runtime / "cluster.json").read_text())
    except (OSError, ValueError):
        return None
    return RunningCluster(tuple(Node(**n) for n in raw["nodes"]), raw["dir"])


def _wait_brokers(cluster: RunningCluster, count: int, timeout: float = 120.0) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if len(admin.list_topics(timeout=2).brokers) >= count:
                return
        except Exception:  # a node still starting: the loop retries until the deadline
            pass
        time.sleep(0.3)
    raise TimeoutError(f"the cluster at {cluster.bootstrap} did not show {count} brokers")


def stop_node(cluster: RunningCluster, node_id: int, *, hard: bool) -> None:
    """SIGKILL (``hard``) or SIGTERM, waiting for a clean stop (then SIGKILL); data kept."""
    pid = cluster.node(node_id).pid
    if not alive(pid):
        return
    end_group(pid, signal.SIGKILL if hard else signal.SIGTERM, STOP_TIMEOUT)


def start_node(cluster: RunningCluster, node_id: int) -> RunningCluster:
    """Start a stopped node again on its ports and data; the cluster with its new pid."""
    node = cluster.node(node_id)
    if alive(node.pid):
        return cluster
    started = _launch(fetch_jars(), node)
    cluster = replace(
        cluster, nodes=tuple(started if n.id == node_id else n for n in cluster.nodes)
    )
    _write(cluster)
    wait_ready(started.bootstrap)
    return cluster


def bounce(
    cluster: RunningCluster, node_id: int, *, hard: bool, down: float = 0.0
) -> RunningCluster:
    """Stop one node (SIGKILL if ``hard``), wait ``down`` seconds, start it again."""
    stop_node(cluster, node_id, hard=hard)
    time.sleep(down)
    return start_node(cluster, node_id)


def leader_of(cluster: RunningCluster, topic: str, partition: int) -> int:
    """The node leading ``partition`` of ``topic`` now."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    found = admin.describe_topics(TopicCollection([topic]))[topic].result(timeout=30)
    return int(found.partitions[partition].leader.id)


_COORDINATOR = re.compile(r"^\s*(\d+)\s", re.MULTILINE)


def coordinator_of(cluster: RunningCluster, transactional_id: str) -> int:
    """The node coordinating ``transactional_id``'s transactions (``kafka-transactions.sh
    describe``: librdkafka does not say)."""
    text = transactions(cluster.bootstrap, "describe", "--transactional-id", transactional_id)
    lines = text.strip().splitlines()
    if len(lines) < 2:
        raise RuntimeError(f"kafka-transactions.sh describe said nothing of {transactional_id}")
    header, row = lines[0].split(), lines[1].split()
    return int(row[header.index("CoordinatorId")])


def stop(runtime: Path = DEFAULT_DIR) -> bool:
    """Stop every node (TERM, then KILL); True if one was running. Data is removed."""
    cluster = read_running(runtime)
    if cluster is None:
        return False
    was_running = any(alive(node.pid) for node in cluster.nodes)
    for node in cluster.nodes:
        if alive(node.pid):
            signal_group(node.pid, signal.SIGTERM)
    for node in cluster.nodes:
        stop_node(cluster, node.id, hard=False)
    shutil.rmtree(runtime, ignore_errors=True)
    return was_running


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["start", "stop", "status", "bounce"])
    parser.add_argument("node", nargs="?", type=int, help="the node to bounce")
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--hard", action="store_true", help="bounce with SIGKILL")
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="runtime directory")
    args = parser.parse_args(argv)
    kafka_version()  # a bad WATUKUY_KAFKA_VERSION fails every command at once
    runtime: Path = args.dir.resolve()
    if args.command == "start":
        began = time.monotonic()
        cluster = start(runtime, nodes=args.nodes)
        print(
            f"cluster: {args.nodes} nodes ready in {time.monotonic() - began:.1f}s", file=sys.stderr
        )
        print(cluster.bootstrap)
        return 0
    if args.command == "stop":
        print("cluster: stopped" if stop(runtime) else "cluster: was not running", file=sys.stderr)
        return 0
    found = read_running(runtime)
    if found is None:
        print("cluster: not running")
        return 1
    cluster = found
    if args.command == "bounce":
        if args.node is None:
            parser.error("bounce needs the node id")
        cluster = bounce(cluster, args.node, hard=args.hard)
    for node in cluster.nodes:
        state = "up" if alive(node.pid) else "down"
        print(f"node {node.id}: {state} pid={node.pid} bootstrap={node.bootstrap}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
