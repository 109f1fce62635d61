"""Which partitions a runner keeps warm for others (standby replicas), from the group's
assignment: a pure rule, so every runner computes the same answer from the same view.

The runners of the group, sorted by ``runner.id``, stand in a ring. With ``replicas`` = r,
each runner keeps a copy in its local state store of the partitions owned by the r runners
after it in the ring. So every partition has r warm copies on r other runners (fewer when
the group has fewer than r + 1 runners), and each runner carries about r times its own share.

What that buys at a failover depends on where the group's assignor moves the dead runner's
partitions. With two runners the survivor takes them all, and it is the one that kept them
warm: the failover replays only what was written since. With three or more, the assignor
(cooperative-sticky) spreads them over the survivors, and only the share that lands on the
runner before the dead one in the ring is warm; the rest is restored from the topics as
without standbys (from the start, or from an older copy the runner kept from an earlier
lease). Kafka Streams moves a task only once a warm copy exists (KIP-441, its own assignor);
watukuy keeps Kafka's assignor, so a standby raises the odds of a warm takeover, and
``runner.standby.replicas`` equal to the number of runners minus one makes every takeover warm.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["standby_partitions"]


def standby_partitions(me: str, owned: Mapping[str, set[int]], replicas: int) -> set[int]:
    """The partitions ``me`` keeps warm: those of the ``replicas`` runners after it in the
    ring of ``owned`` (runner id -> the partitions it owns), none of its own."""
    if replicas <= 0 or me not in owned:
        return set()
    ring = sorted(owned)
    at = ring.index(me)
    after = [ring[(at + step) % len(ring)] for step in range(1, min(replicas, len(ring) - 1) + 1)]
    kept: set[int] = set()
    for runner in after:
        kept |= owned[runner]
    return kept - owned[me]
