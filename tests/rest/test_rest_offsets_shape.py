"""``GET /connectors/{name}/offsets`` answers KIP-875's shape, one entry per key with the
lanes' cursors under ``offset``; it wrapped each entry twice (``"offset": {"partition",
"offset"}``), so Connect's "GET the offsets, edit them, PATCH them back" sent a shape PATCH
refuses. Over the real RunnerControl, with the state topics and the engine stood in for."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from tests.rest.support import rest_client, runner_control
from watukuy.control.configs import Connector
from watukuy.core.schedule import KeySchedule
from watukuy.core.state import LaneState, PartitionState

LANES = ("live", "backfill", "reconcile")


class StoppedConfigs:
    """The configs topic's view: ``orders`` is written and STOPPED."""

    def get(self, name: str) -> Connector | None:
        return Connector(name, {"request": {}}, "STOPPED", 1) if name == "orders" else None


class Stored:
    """The state topics: each key's state, as the stand-in engine leaves it."""

    def __init__(self, states: dict[str, PartitionState]) -> None:
        self.states_by_key = states

    async def states(self, name: str) -> dict[str, PartitionState]:
        return dict(self.states_by_key) if name == "orders" else {}


class Engine:
    """Applies ``alter_offsets`` to the stored states as the key's owner would."""

    def __init__(self, stored: Stored) -> None:
        self.stored = stored
        self.pollers = {"orders": type("Poller", (), {"partitioned": True})()}
        self.altered: list[tuple[str | None, Any]] = []

    def listed(self, name: str) -> list[str]:
        return sorted(self.stored.states_by_key)

    async def operate(
        self, operation: str, poller: str, *, partition: str | None = None, args: Any = None
    ) -> None:
        assert operation == "alter_offsets"
        assert partition is not None
        self.altered.append((partition, args["offset"]))
        state = self.stored.states_by_key[partition]
        for lane, cursor in args["offset"].items():
            lane_state = getattr(state, lane)
            state = replace(state, **{lane: replace(lane_state, cursor=cursor)})
        self.stored.states_by_key[partition] = state


def state(key: str, live: Any, backfill: Any = None, reconcile: Any = None) -> PartitionState:
    return PartitionState(
        "orders",
        key,
        LaneState(cursor=live),
        KeySchedule(30.0, 0.0),
        backfill=LaneState(cursor=backfill),
        reconcile=LaneState(cursor=reconcile),
    )


async def test_offsets_are_kip_875s_shape_and_patch_back_unchanged(tmp_path: Path) -> None:
    stored = Stored(
        {
            "globex": state("globex", None),
            "acme": state("acme", "tok-9", backfill={"page": 3}, reconcile=7),
        }
    )
    engine = Engine(stored)
    control = runner_control(engine, tmp_path, configs=StoppedConfigs(), stored=stored)
    async with rest_client(control) as client:  # type: ignore[arg-type]
        got = await client.get("/connectors/orders/offsets")
        assert got.status == 200
        offsets = await got.json()
        assert offsets == {
            "offsets": [
                {
                    "partition": {"key": "acme"},
                    "offset": {"live": "tok-9", "backfill": {"page": 3}, "reconcile": 7},
                },
                {
                    "partition": {"key": "globex"},
                    "offset": {"live": None, "backfill": None, "reconcile": None},
                },
            ]
        }
        for entry in offsets["offsets"]:
            assert set(entry) == {"partition", "offset"}
            assert set(entry["offset"]) == set(LANES)

        back = await client.patch("/connectors/orders/offsets", json=offsets)
        assert back.status == 200, await back.text()
        assert await back.json() == {"message": "the offsets of connector orders were altered"}
        assert engine.altered == [
            ("acme", {"live": "tok-9", "backfill": {"page": 3}, "reconcile": 7}),
            ("globex", {"live": None, "backfill": None, "reconcile": None}),
        ]
        again = await client.get("/connectors/orders/offsets")
        assert await again.json() == offsets
