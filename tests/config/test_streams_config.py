"""A connector with ``streams:`` in the runner's config file and over REST: one poller per
stream wherever a connector entry is compiled, and the applier runs, replaces and removes
all of a REST connector's streams together."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from watukuy import Engine, FakeClock, MemoryStore
from watukuy.config import parse_config
from watukuy.control.applier import ConfigApplier
from watukuy.control.connectors import compile_connector
from watukuy.core.errors import ConfigError
from watukuy.core.lifecycle import Target

CANARY = "cnry-41d2e8a0c3b7"


def tracker(*streams: str, **changes: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "partitions": {"static": [{"key": "acme", "data": {"slug": "acme"}}]},
        "defaults": {
            "request": {"base": "http://127.0.0.1:9/{partition.data.slug}"},
            "records": "data",
            "identity": "id",
        },
        "streams": [{"name": name, "request": {"path": name}} for name in streams],
    }
    return config | changes


def runner_config(*entries: Any, **sections: Any) -> dict[str, Any]:
    return {
        "kafka": {"bootstrap.servers": "127.0.0.1:9092"},
        "runner": {"id": "runner-1"},
        "pollers": list(entries),
        **sections,
    }


def test_the_config_file_compiles_each_stream_and_shows_the_entry_once() -> None:
    single = {"name": "tickets", "request": {"url": "http://127.0.0.1:9/t"}, "identity": "id"}
    cfg = parse_config(runner_config({"name": "tracker", **tracker("issues", "users")}, single))
    assert [p.name for p in cfg.pollers] == ["tracker.issues", "tracker.users", "tickets"]
    shown = cfg.describe()["pollers"]
    assert [entry["name"] for entry in shown] == ["tracker", "tickets"]
    sources = cfg.file_pollers()  # by connector: its streams are one entry
    assert list(sources) == ["tracker", "tickets"]
    assert sources["tracker"]["streams"][1]["name"] == "users"  # type: ignore[index]
    assert sources["tickets"] == single


def test_the_config_file_names_the_entry_of_a_streams_bad_budget() -> None:
    single = {"name": "tickets", "request": {"url": "http://127.0.0.1:9/t"}, "identity": "id"}
    config = tracker("issues", "users")
    config["defaults"]["budget"] = "nope"
    with pytest.raises(ConfigError) as raised:
        parse_config(runner_config(single, {"name": "tracker", **config}))
    assert raised.value.path == "pollers[1]"
    assert "poller 'tracker.issues' uses budget 'nope'" in str(raised.value)


def test_two_entries_cannot_make_one_poller_name() -> None:
    clash = {"name": "tracker.users", "request": {"url": "http://127.0.0.1:9/t"}, "identity": "id"}
    with pytest.raises(ConfigError) as raised:
        parse_config(runner_config({"name": "tracker", **tracker("users")}, clash))
    assert (
        str(raised.value) == "pollers[1]: duplicate poller name 'tracker.users' (also pollers[0])"
    )


def test_a_rest_connector_with_streams_is_a_poller_per_stream() -> None:
    pollers = compile_connector("tracker", tracker("issues", "users"), Path("."))
    assert [p.name for p in pollers] == ["tracker.issues", "tracker.users"]


@pytest.mark.parametrize(
    ("where", "path"),
    [("defaults", "defaults.schedule.min"), ("stream", "streams[0].schedule.min")],
)
def test_a_rest_connectors_stream_error_is_relative_and_scrubbed(
    monkeypatch: pytest.MonkeyPatch, where: str, path: str
) -> None:
    monkeypatch.setenv("WATUKUY_TEST_SECRET", CANARY)
    config = tracker("issues")
    bad = {"min": "${env:WATUKUY_TEST_SECRET}"}
    if where == "defaults":
        config["defaults"]["schedule"] = bad
    else:
        config["streams"][0]["schedule"] = bad
    with pytest.raises(ConfigError) as raised:
        compile_connector("tracker", config, Path("."))
    assert raised.value.path == path
    assert CANARY not in str(raised.value)


async def test_the_applier_runs_replaces_and_removes_every_stream() -> None:
    engine = Engine([], store=MemoryStore(), clock=FakeClock())
    applier = ConfigApplier(engine, [], Path("."))
    try:
        await applier.apply("tracker", tracker("issues", "users"), Target.RUNNING)
        first = sorted(engine.pollers)
        await applier.apply("tracker", tracker("issues"), Target.PAUSED)  # users dropped
        second = {name: engine.target(name) for name in engine.pollers}
        await applier.apply("tracker", tracker("issues"), Target.RUNNING)
        third = {name: engine.target(name) for name in engine.pollers}
        solo = {"request": {"url": "http://127.0.0.1:9/s"}, "identity": "id"}
        await applier.apply("solo", solo, Target.RUNNING)  # one poller, as before streams
        await applier.apply("tracker", None, None)  # deleted
        last = sorted(engine.pollers)
    finally:
        await engine.close()

    assert first == ["tracker.issues", "tracker.users"]
    assert second == {"tracker.issues": "PAUSED"}
    assert third == {"tracker.issues": "RUNNING"}
    assert last == ["solo"]
