"""How many copies Kafka keeps of watukuy's records, and which topic settings would lose them.

A production cluster has three or more brokers: watukuy's topics are created there with three
replicas and ``min.insync.replicas=2`` (with ``acks=all``, which transactions force, a record
counts as written once two brokers hold it, so one broker's loss loses nothing and writes go
on). On a smaller cluster they get as many replicas as it has brokers.

An internal topic (state, items, parked, configs, status, schemas) that already exists is
checked before the runner uses it: settings that would lose stored state when a broker dies
stop the start with a :class:`~watukuy.core.errors.ConfigError` saying what to change. One
replica on a cluster of three or more is accepted only when ``topics.replication.factor: 1``
is written out (a deliberate choice, as in a test cluster). Pure: the topic module asks the
cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from watukuy.core.errors import ConfigError

__all__ = ["PRODUCTION_REPLICAS", "Durability", "check_internal", "created_config", "replicas_for"]

PRODUCTION_REPLICAS = 3
MIN_INSYNC = 2


@dataclass(frozen=True, slots=True)
class Durability:
    """What the cluster says of a topic's copies: the fewest replicas any of its partitions
    has, its ``min.insync.replicas`` and ``unclean.leader.election.enable``."""

    replicas: int
    min_insync: int
    unclean_election: bool

    @classmethod
    def of(cls, replicas: int, config: Mapping[str, str]) -> Durability:
        return cls(
            replicas=replicas,
            min_insync=int(config.get("min.insync.replicas", "1")),
            unclean_election=config.get("unclean.leader.election.enable", "false") == "true",
        )


def replicas_for(written: int | None, brokers: int) -> int:
    """The replication factor of the topics watukuy creates: ``written`` (the config's
    ``topics.replication.factor``), else three, or the cluster's broker count if smaller."""
    return written if written is not None else max(1, min(PRODUCTION_REPLICAS, brokers))


def created_config(replicas: int) -> dict[str, str]:
    """Durability settings of a topic created with ``replicas`` replicas."""
    if replicas >= PRODUCTION_REPLICAS:
        return {"min.insync.replicas": str(MIN_INSYNC)}
    return {}


def check_internal(topic: str, found: Durability, written: int | None, brokers: int) -> None:
    """``ConfigError`` if an existing internal topic would lose stored state with a broker."""
    alter = f"kafka-configs.sh --alter --entity-type topics --entity-name {topic} --add-config"
    if found.unclean_election:
        raise ConfigError(
            f"topic '{topic}' has unclean.leader.election.enable=true: a replica that missed "
            f"writes could become leader and drop stored state; set it back "
            f"({alter} unclean.leader.election.enable=false)",
            "topics.prefix",
        )
    if found.replicas == 1 and brokers >= PRODUCTION_REPLICAS and written != 1:
        raise ConfigError(
            f"topic '{topic}' has 1 replica on a cluster of {brokers} brokers: losing its broker "
            f"loses stored state; give it {PRODUCTION_REPLICAS} replicas (a partition "
            "reassignment), or write topics.replication.factor: 1 to run it so",
            "topics.replication.factor",
        )
    if found.replicas >= PRODUCTION_REPLICAS and found.min_insync < MIN_INSYNC:
        raise ConfigError(
            f"topic '{topic}' has {found.replicas} replicas but min.insync.replicas="
            f"{found.min_insync}: a write one broker alone took is lost with it; set it to "
            f"{MIN_INSYNC} ({alter} min.insync.replicas={MIN_INSYNC})",
            "topics.prefix",
        )
