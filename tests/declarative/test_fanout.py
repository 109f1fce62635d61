"""``fanout`` (issue 43): one partition per value of a list, static or from each tenant's data,
keyed ``<tenant>/<value>``, ``{fanout.NAME}`` in templates; a value that leaves the list is
paused and deleted after ``retain``, as a child partition is. Run by the engine on the memory
store against the scripted transport."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.declarative.helpers import API, WHERE
from watukuy import Engine, FakeClock, MemoryStore, Partition
from watukuy.core.errors import ConfigError
from watukuy.declarative import compile_connector_entry
from watukuy.declarative.templates import Scope
from watukuy.http import HttpClient, ScriptedTransport
from watukuy.options.flat import flatten, unflatten

RETAIN = "1d"


def boards(tmp_path: Path, tenants: dict[str, list[Any]]) -> None:
    listed = [{"key": k, "data": {"board_ids": v, "token": f"tok-{k}"}} for k, v in tenants.items()]
    (tmp_path / "tenants.yaml").write_text(yaml.safe_dump(listed))


def entry(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": "mail",
        "partitions": {"file": "tenants.yaml", "refresh": "1m"},
        "request": {
            "url": API + "/{tenant.key}/boards/{fanout.board}/{fanout.folder}",
            "auth": {"bearer": "{partition.data.token}"},
        },
        "records": "data",
        "identity": "id",
        "fanout": [
            {"name": "board", "values": "{partition.data.board_ids}"},
            {"name": "folder", "values": ["inbox", "sent"]},
        ],
        "retain": RETAIN,
    }
    base.update(overrides)
    return base


def compiled(tmp_path: Path, **overrides: Any) -> Any:
    (poller,) = compile_connector_entry(entry(**overrides), where=WHERE, base_dir=tmp_path)
    return poller


async def test_each_tenants_partitions_are_the_product_of_the_values(tmp_path: Path) -> None:
    boards(tmp_path, {"acme": [7, "b2"], "globex": []})
    poller = compiled(tmp_path)
    listed = await poller.partitions()
    assert [p.key for p in listed] == [
        "acme/7/inbox",
        "acme/7/sent",
        "acme/b2/inbox",
        "acme/b2/sent",
    ]
    assert listed[1].parents == ("sent", "7")
    assert listed[1].data == {"board_ids": [7, "b2"], "token": "tok-acme"}  # the tenant's
    assert poller.fanout == ("board", "folder")


async def test_the_engine_polls_every_value_and_pauses_then_deletes_one_that_left(
    tmp_path: Path,
) -> None:
    boards(tmp_path, {"acme": [1, 2]})
    transport, clock, store = ScriptedTransport(), FakeClock(), MemoryStore()
    for board in (1, 2, 3):
        for folder in ("inbox", "sent"):
            url = f"{API}/acme/boards/{board}/{folder}"
            transport.add("GET", url, json={"data": [{"id": f"{board}-{folder}"}]})
    poller = compiled(tmp_path)
    engine = Engine([poller], store=store, clock=clock, http=HttpClient(transport=transport))
    async with engine:
        await engine.tick()
        polled = sorted(str(r.url) for r in transport.requests)
        assert polled == [f"{API}/acme/boards/{b}/{f}" for b in (1, 2) for f in ("inbox", "sent")]
        assert all(r.headers["Authorization"] == "Bearer tok-acme" for r in transport.requests)

        boards(tmp_path, {"acme": [2, 3]})  # board 1 left, board 3 came
        clock.advance(61)
        await engine.tick()
        assert store.states["mail/acme/1/inbox"].paused == "removed"
        assert "mail/acme/3/sent" in store.states
        clock.advance(86400)
        await engine.partitions.list("mail")
        assert "mail/acme/1/inbox" not in store.states  # deleted after retain
        assert store.states["mail/acme/2/inbox"].paused is None


def test_fanout_values_render_in_templates() -> None:
    from watukuy.declarative.templates import compile_template

    template = compile_template(
        "/{tenant.key}/{fanout.board}/{fanout.folder}",
        "t",
        partitioned=True,
        cursor=False,
        fanout=("board", "folder"),
    )
    partition = Partition("acme/7/inbox", {}, ("inbox", "7"))
    assert template.render(Scope(partition=partition)) == "/acme/7/inbox"


@pytest.mark.parametrize(
    ("overrides", "path", "says"),
    [
        ({"partitions": None}, "pollers[0].fanout", "needs partitions"),
        ({"fanout": []}, "pollers[0].fanout", "non-empty list"),
        ({"fanout": [{"name": "a b", "values": [1]}]}, "pollers[0].fanout[0].name", "must match"),
        ({"fanout": [{"name": "f", "values": ["x/y"]}]}, "pollers[0].fanout[0].values[0]", "'/'"),
        (
            {"fanout": [{"name": "f", "values": "{partition.key}"}]},
            "pollers[0].fanout[0].values",
            "partition.data",
        ),
        (
            {"fanout": [{"name": "f", "values": [1]}, {"name": "f", "values": [2]}]},
            "pollers[0].fanout[1].name",
            "given twice",
        ),
        (
            {"request": {"url": API + "/{fanout.folders}"}},
            "pollers[0].request.url",
            "no such fanout entry",
        ),
    ],
)
def test_a_fanout_mistake_names_its_field(
    tmp_path: Path, overrides: dict[str, Any], path: str, says: str
) -> None:
    boards(tmp_path, {"acme": [1]})
    given = {k: v for k, v in entry(**overrides).items() if v is not None}
    with pytest.raises(ConfigError) as raised:
        compile_connector_entry(given, where=WHERE, base_dir=tmp_path)
    assert raised.value.path == path
    assert says in str(raised.value)


def test_a_fan_out_stream_is_no_parent_and_a_child_does_not_fan_out(tmp_path: Path) -> None:
    boards(tmp_path, {"acme": [1]})
    streams = {
        "name": "mail",
        "partitions": {"file": "tenants.yaml"},
        "defaults": {"records": "data", "identity": "id"},
        "streams": [
            {
                "name": "messages",
                "request": {"url": API + "/{fanout.folder}"},
                "fanout": [{"name": "folder", "values": ["inbox"]}],
            },
            {
                "name": "attachments",
                "parent": {"stream": "messages", "key": "id"},
                "request": {"url": API + "/a/{parent.key}"},
            },
        ],
    }
    with pytest.raises(ConfigError) as raised:
        compile_connector_entry(streams, where=WHERE, base_dir=tmp_path)
    assert raised.value.path == "pollers[0].streams[1].parent.stream"


def test_fanout_round_trips_through_connects_flat_form() -> None:
    nested = entry()
    assert unflatten(flatten(nested, "http")) == ("http", nested)
