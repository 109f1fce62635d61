"""A Kafka cluster of a fault scenario's own: :class:`PrivateCluster`, three KRaft nodes
(:mod:`integration.kafka.cluster`) in the scenario's work directory, which it may bounce,
SIGKILL and SIGSTOP without hurting anyone else. Its nodes' server logs stay in the work
directory when it stops, for what they say about the scenario."""

from __future__ import annotations

import shutil
import signal
from dataclasses import dataclass
from pathlib import Path

from integration.kafka import cluster as kafka_cluster
from integration.kafka.tools import transactions
from integration.processes import alive, signal_group


@dataclass
class PrivateCluster:
    runtime: Path
    size: int = 3
    _running: kafka_cluster.RunningCluster | None = None

    def start(self) -> PrivateCluster:
        self._running = kafka_cluster.start(self.runtime, nodes=self.size)
        return self

    @property
    def running(self) -> kafka_cluster.RunningCluster:
        if self._running is None:
            raise RuntimeError(f"the cluster in {self.runtime} was not started")
        return self._running

    @property
    def started(self) -> bool:
        return self._running is not None

    @property
    def bootstrap(self) -> str:
        return self.running.bootstrap

    @property
    def node_ids(self) -> list[int]:
        return [node.id for node in self.running.nodes]

    def bounce(self, node_id: int, *, hard: bool, down: float) -> None:
        """Stop node ``node_id`` (SIGKILL if ``hard``, else a controlled shutdown), wait
        ``down`` seconds, start it again on its ports and data."""
        self._running = kafka_cluster.bounce(self.running, node_id, hard=hard, down=down)

    def pause(self, node_id: int) -> None:
        """SIGSTOP the node: it neither answers nor fetches nor heartbeats its controller,
        the closest this machine comes to a broker cut off by the network."""
        signal_group(self.running.node(node_id).pid, signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        signal_group(self.running.node(node_id).pid, signal.SIGCONT)

    def leader_of(self, topic: str, partition: int) -> int:
        return kafka_cluster.leader_of(self.running, topic, partition)

    def coordinator_of(self, transactional_prefix: str) -> int:
        """The node coordinating the newest transactional id that starts with
        ``transactional_prefix`` (a runner's producers get ``<group>.<runner.id>.<random>``)."""
        rows = [line.split() for line in transactions(self.bootstrap, "list").splitlines()[1:]]
        live = [r for r in rows if len(r) >= 3 and r[0].startswith(transactional_prefix)]
        if not live:
            raise RuntimeError(f"no transactional id starts with {transactional_prefix}")
        newest = max(live, key=lambda row: int(row[2]))  # producer ids grow
        return int(newest[1])

    def log_lines(self, needle: str) -> list[str]:
        """The lines of every node's server log that contain ``needle``."""
        found = []
        for log in sorted(self.runtime.glob("node-*/server.log")):
            with open(log, encoding="utf-8", errors="replace") as lines:
                found += [f"{log.parent.name}: {ln.rstrip()}" for ln in lines if needle in ln]
        return found

    def close(self) -> None:
        """Keep the nodes' logs beside the runtime and end the cluster. Its data goes with it,
        so the nodes are SIGKILLed: a controlled shutdown of three would only cost time."""
        if self._running is not None:
            for node in self._running.nodes:
                if alive(node.pid):
                    signal_group(node.pid, signal.SIGKILL)
        for log in self.runtime.glob("node-*/server.log"):
            kept = self.runtime.with_name(f"{self.runtime.name}-{log.parent.name}.log")
            shutil.copyfile(log, kept)
        kafka_cluster.stop(self.runtime)
