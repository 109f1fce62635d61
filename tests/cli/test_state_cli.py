"""``watukuy-source state info|wipe`` on a store written with LocalState in a tmp dir: no
broker (Kafka at a closed port, or the end offsets given). The broker tier is
tests/integration/test_state_cli_kafka.py."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from watukuy.cli import main
from watukuy.config import load_config
from watukuy.store.kafka.local import LocalIdentity, LocalState, state_path
from watukuy.store.kafka.topics import TopicLayout

pytestmark = pytest.mark.unit

PREFIX, RUNNER = "wk", "runner-7"
LAYOUT = TopicLayout(PREFIX, 4, 1)
STATE, ITEMS, PARKED = LAYOUT.state, LAYOUT.items, LAYOUT.parked
IDENTITY = LocalIdentity(PREFIX, ("id-s", "id-i", "id-p"), 4)
NOW_MS = 1_800_000_000_000


def _config(tmp_path: Path, *, state_dir: str | None = "state", **runner: Any) -> Path:
    settings: dict[str, Any] = {"id": RUNNER, "startup.timeout": "1s", **runner}
    if state_dir is not None:
        settings["state.dir"] = str(tmp_path / state_dir)
    config = {
        "kafka": {"bootstrap.servers": "127.0.0.1:1", "sasl.password": "${env:STATE_CLI_PW}"},
        "topics": {"prefix": PREFIX, "partitions": 4},
        "runner": settings,
        "pollers": [{"python": "integration.pollers:invoices"}],
    }
    path = tmp_path / "runner.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(autouse=True)
def _secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STATE_CLI_PW", "canary-pw-5517")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Path]:
    """A store with partitions 1 (two keys) and 3 (one key), written at ``NOW_MS``; closed."""
    path = state_path(tmp_path / "state", PREFIX, RUNNER)
    local = LocalState.open(path, LAYOUT, IDENTITY)
    for partition, tenants in ((1, ("t1", "t2")), (3, ("t3",))):
        puts = []
        for tenant in tenants:
            puts += [
                (STATE, f"inv/{tenant}".encode(), b"state", 1234),
                (ITEMS, f"inv/{tenant}/a".encode(), b"item", 0),
                (ITEMS, f"inv/{tenant}/b".encode(), b"item", 0),
            ]
        puts.append((PARKED, b"inv/" + tenants[0].encode() + b"/x", b"parked", 0))
        local.write(partition, puts, {STATE: 10 * partition, ITEMS: 20, PARKED: 1}, now_ms=NOW_MS)
    local.close()
    yield path


def _ends(found: Mapping[tuple[str, int], int]) -> Any:
    def ends(
        kafka: Mapping[str, Any], wanted: Sequence[tuple[str, int]], timeout: float
    ) -> dict[tuple[str, int], int]:
        return {where: found.get(where, 0) for where in wanted}

    return ends


def _partitions(path: Path) -> list[int]:
    local = LocalState.inspect(path, LAYOUT)
    try:
        return [p.kafka_partition for p in local.info().partitions]
    finally:
        local.close()


# -- info ---------------------------------------------------------------------------------------


def test_info_without_kafka_prints_the_local_part_and_says_the_lag_is_unknown(
    tmp_path: Path, store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["state", "info", "--config", str(_config(tmp_path))]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0] == f"local state store {store}"
    assert lines[1].startswith("size on disk: ")
    assert lines[2] == "PARTITION  KEYS  RECORDS  STATE  ITEMS  PARKED  LAG  LAST WRITE"
    one, three = (line.split()[:7] for line in lines[3:])
    assert one == ["1", "2", "7", "10", "20", "1", "?"]  # 2 states, 4 items, 1 parked
    assert three == ["3", "1", "4", "30", "20", "1", "?"]
    assert "lag unknown: cannot reach Kafka at 127.0.0.1:1 within 1s" in err
    assert "canary-pw-5517" not in out + err


def test_info_as_json_with_the_topics_ends(tmp_path: Path, store: Path) -> None:
    from io import StringIO

    from watukuy.state_cli import info

    config = load_config(_config(tmp_path))
    out = StringIO()
    ends = _ends({(STATE, 1): 14, (ITEMS, 1): 20, (PARKED, 1): 1, (STATE, 3): 30})
    info(config, fmt="json", out=out, clock=lambda: NOW_MS / 1000 + 90, ends=ends)
    shown = json.loads(out.getvalue())
    assert shown["path"] == str(store) and shown["exists"] and shown["lag_known"]
    assert shown["bytes_on_disk"] > 0
    first = shown["partitions"][0]
    assert first["partition"] == 1 and first["keys"] == 2 and first["records"] == 7
    assert first["offsets"] == {STATE: 10, ITEMS: 20, PARKED: 1}
    assert first["lag"] == {STATE: 4, ITEMS: 0, PARKED: 0}
    assert first["age_seconds"] == 90.0
    assert shown["partitions"][1]["lag"] == {STATE: 0, ITEMS: 0, PARKED: 0}


def test_info_text_shows_each_topics_lag_and_the_age(tmp_path: Path, store: Path) -> None:
    from io import StringIO

    from watukuy.state_cli import info

    out = StringIO()
    ends = _ends({(STATE, 1): 14, (ITEMS, 1): 20, (PARKED, 1): 1, (STATE, 3): 30})
    config = load_config(_config(tmp_path))
    info(config, out=out, clock=lambda: NOW_MS / 1000 + 185, ends=ends)
    rows = out.getvalue().splitlines()[3:]
    assert rows[0].split() == ["1", "2", "7", "10+4", "20", "1", "4", "3m05s", "ago"]
    assert rows[1].split() == ["3", "1", "4", "30", "20", "1", "0", "3m05s", "ago"]


def test_info_redacts_a_path_segment_that_came_from_a_reference(
    tmp_path: Path, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from io import StringIO

    from watukuy.state_cli import info

    monkeypatch.setenv("POD", RUNNER)
    config = load_config(_config(tmp_path, id="${env:POD}"))
    out = StringIO()
    report = info(config, fmt="json", out=out, ends=_ends({}))
    assert report.exists and len(report.partitions) == 2  # the store was found by its real path
    assert json.loads(out.getvalue())["path"] == str(store.parent / "[redacted]")


def test_info_of_a_store_not_built_yet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["state", "info", "--config", str(_config(tmp_path))]) == 0
    out, err = capsys.readouterr()
    assert out.endswith(": none\n")
    assert "no local state store at" in err and "built at the next start" in err


@pytest.mark.parametrize("action", [["info"], ["wipe"], ["wipe", "--partition", "1"]])
def test_without_a_state_dir_both_commands_name_the_setting_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], action: list[str]
) -> None:
    code = main(["state", *action, "--config", str(_config(tmp_path, state_dir=None))])
    assert code == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("watukuy-source: runner.state.dir: is not set")


def test_options_go_before_the_state_action_too(
    tmp_path: Path, store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = str(_config(tmp_path))
    assert main(["--config", config, "state", "info", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["path"] == str(store)


def test_state_needs_an_action(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["state", "--config", "c.yaml"])
    assert exited.value.code == 2
    assert "ACTION" in capsys.readouterr().err


# -- wipe ---------------------------------------------------------------------------------------


def test_wipe_deletes_the_store(
    tmp_path: Path, store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["state", "wipe", "--config", str(_config(tmp_path))]) == 0
    assert not store.exists()
    assert "wiped the local state store at" in capsys.readouterr().err
    assert main(["state", "wipe", "--config", str(_config(tmp_path))]) == 0  # nothing left
    assert "nothing to wipe" in capsys.readouterr().err


def test_wipe_of_one_partition_leaves_the_others(
    tmp_path: Path, store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = str(_config(tmp_path))
    assert main(["state", "wipe", "--config", config, "--partition", "3"]) == 0
    assert "wiped partition(s) 3 of the local state store" in capsys.readouterr().err
    assert _partitions(store) == [1]
    local = LocalState.open(store, LAYOUT, IDENTITY)  # what was kept is whole
    try:
        resumed = local.resume(
            1, {t: (0, 100) for t in (STATE, ITEMS, PARKED)}, now_ms=NOW_MS, max_age_ms=10**9
        )
    finally:
        local.close()
    assert resumed is not None and len(resumed[1]) == 7


def test_wipe_is_refused_while_a_runner_has_the_store_open(
    tmp_path: Path, store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = str(_config(tmp_path))
    running = LocalState.open(store, LAYOUT, IDENTITY)
    try:
        for extra in ([], ["--partition", "1"]):
            assert main(["state", "wipe", "--config", config, *extra]) == 2
            err = capsys.readouterr().err.splitlines()
            assert len(err) == 1
            assert "is open in another process" in err[0] and "stop that runner first" in err[0]
        # info reads it all the same (read-only)
        assert main(["state", "info", "--config", config]) == 0
        assert f"local state store {store}" in capsys.readouterr().out
    finally:
        running.close()
    assert _partitions(store) == [1, 3]


def test_wipe_refuses_a_partition_the_topics_do_not_have(
    tmp_path: Path, store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["state", "wipe", "--config", str(_config(tmp_path)), "--partition", "4"]) == 2
    assert capsys.readouterr().err == (
        "watukuy-source: --partition: 4 is not a partition of the topics (topics.partitions is 4)\n"
    )
    assert _partitions(store) == [1, 3]
