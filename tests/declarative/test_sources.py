"""``partitions:`` of a declarative poller: static, file and python sources, ``refresh``, the
errors a user sees at load, and a tenants file re-read while an engine runs."""

from __future__ import annotations

import json
import logging
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from watukuy import ConfigError, Engine, FakeClock, MemoryStore, Partition, define_poller
from watukuy.declarative.sources import parse_partitions

WHERE = "pollers[0].partitions"
TOKEN = "tok-canary-4b1d"  # a tenant secret: must never show in a message or a log line


async def evaluate(raw: Any, base_dir: Path) -> list[Any]:
    loader, _ = parse_partitions(raw, where=WHERE, base_dir=base_dir)
    assert loader is not None
    returned = loader()
    if hasattr(returned, "__await__"):
        returned = await returned
    return list(returned)


def write(path: Path, entries: Any) -> Path:
    path.write_text(yaml.safe_dump(entries))
    return path


# -- load-time errors -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "path", "message"),
    [
        ("tenants.yaml", WHERE, "must be a mapping with exactly one of static, file, http, python"),
        ({}, WHERE, "needs exactly one of static, file, http, python"),
        ({"refresh": "1m"}, WHERE, "needs exactly one of static, file, http, python"),
        (
            {"static": [], "file": "t.yaml"},
            WHERE,
            "needs exactly one of static, file, http, python; got static and file",
        ),
        ({"statik": []}, f"{WHERE}.statik", "did you mean 'static'? partitions take exactly one"),
        ({"static": [], "every": "5m"}, f"{WHERE}.every", "exactly one of static, file, http"),
        (
            {"static": [], "refresh": 300},
            f"{WHERE}.refresh",
            "a bare number; Connect users mean milliseconds",
        ),
        (
            {"static": [], "refresh": 1.5},
            f"{WHERE}.refresh",
            "a bare number; Connect users mean milliseconds",
        ),
        ({"static": [], "refresh": "soon"}, f"{WHERE}.refresh", "expected a duration"),
        ({"static": [], "refresh": "0s"}, f"{WHERE}.refresh", "must be positive"),
        ({"static": {"key": "a"}}, f"{WHERE}.static", "must be a list of {key, data}"),
        ({"static": ["acme"]}, f"{WHERE}.static[0]", "must be a mapping {key, data}, got a str"),
        ({"static": [{"data": {}}]}, f"{WHERE}.static[0].key", "non-empty string, got null"),
        ({"static": [{"key": 7}]}, f"{WHERE}.static[0].key", "non-empty string, got an int"),
        ({"static": [{"key": " "}]}, f"{WHERE}.static[0].key", "got an empty string"),
        (
            {"static": [{"key": "a"}, {"key": "b"}, {"key": "a"}]},
            f"{WHERE}.static[2].key",
            "duplicate key 'a' (also [0])",
        ),
        (
            {"static": [{"key": "a", "data": [TOKEN]}]},
            f"{WHERE}.static[0].data",
            "must be a mapping, got a list",
        ),
        (
            {"static": [{"key": "a", "dta": {}}]},
            f"{WHERE}.static[0].dta",
            "an entry has only key and data",
        ),
        ({"file": 3}, f"{WHERE}.file", "must be the path of a YAML or JSON file, got an int"),
        ({"file": ""}, f"{WHERE}.file", "got an empty string"),
        ({"file": "missing.yaml"}, f"{WHERE}.file", "missing.yaml' not found"),
        ({"python": 3}, f"{WHERE}.python", "expected 'module:attribute'"),
        ({"python": "no_colon"}, f"{WHERE}.python", "expected 'module:attribute'"),
        ({"python": "no_such_mod_xyz:load"}, f"{WHERE}.python", "module 'no_such_mod_xyz' not"),
        ({"python": "json:NOPE"}, f"{WHERE}.python", "module 'json' has no attribute 'NOPE'"),
        ({"python": "json:__name__"}, f"{WHERE}.python", "is a str, not a callable returning"),
    ],
)
def test_a_bad_partitions_mapping_names_the_field(
    tmp_path: Path, raw: Any, path: str, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_partitions(raw, where=WHERE, base_dir=tmp_path)

    assert caught.value.path == path
    assert message in str(caught.value)
    assert TOKEN not in str(caught.value)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"tenants": []}', "must be a list of {key, data}, got a mapping"),
        ("", "must be a list of {key, data}, got null"),
        (f"- key: a\n  data: {{token: {TOKEN}}}\n- key: a\n", "[1].key: duplicate key 'a'"),
        (f"- key: ''\n  data: {{token: {TOKEN}}}\n", "[0].key: must be a non-empty string"),
        (f"- key: a\n  data: {TOKEN}\n", "[0].data: must be a mapping, got a str"),
        (f"- key: a\n  data: {{token: {TOKEN}\n", "not valid YAML or JSON at line 3, column 1"),
        (f'[{{"key": "a", "data": {{"token": "{TOKEN}"}}}}\n', "not valid YAML or JSON at line 2"),
        (b"\xff\xfe- key: a", "is not UTF-8 text"),
    ],
    ids=["mapping", "empty", "duplicate", "empty-key", "data-str", "yaml", "json", "binary"],
)
def test_a_bad_tenants_file_is_a_config_error_naming_the_file_not_its_content(
    tmp_path: Path, content: str | bytes, message: str
) -> None:
    file = tmp_path / "tenants.yaml"
    if isinstance(content, bytes):
        file.write_bytes(content)
    else:
        file.write_text(content)

    with pytest.raises(ConfigError) as caught:
        parse_partitions({"file": "tenants.yaml"}, where=WHERE, base_dir=tmp_path)

    assert caught.value.path == f"{WHERE}.file"
    assert f"partitions file '{file}'" in str(caught.value)
    assert message in str(caught.value)
    assert TOKEN not in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_directory_is_not_a_tenants_file(tmp_path: Path) -> None:
    (tmp_path / "tenants").mkdir()

    with pytest.raises(ConfigError, match="is a directory") as caught:
        parse_partitions({"file": "tenants"}, where=WHERE, base_dir=tmp_path)

    assert caught.value.path == f"{WHERE}.file"


# -- what each source gives ---------------------------------------------------------------------


async def test_static_entries_become_partitions_and_refresh_defaults_to_5m(tmp_path: Path) -> None:
    raw = {"static": [{"key": "acme", "data": {"slug": "acme", "token": TOKEN}}, {"key": "beta"}]}

    loader, refresh = parse_partitions(raw, where=WHERE, base_dir=tmp_path)

    assert refresh == 300.0
    assert loader is not None
    first, second = loader(), loader()
    assert (
        first
        == second
        == [
            Partition("acme", {"slug": "acme", "token": TOKEN}),
            Partition("beta", None),
        ]
    )
    first.clear()  # what the engine gets is its own list
    assert len(loader()) == 2


@pytest.mark.parametrize(("written", "seconds"), [("250ms", 0.25), ("30s", 30.0), ("2h", 7200.0)])
def test_refresh_is_a_duration(tmp_path: Path, written: str, seconds: float) -> None:
    _, refresh = parse_partitions(
        {"static": [], "refresh": written}, where=WHERE, base_dir=tmp_path
    )

    assert refresh == seconds


async def test_a_json_file_relative_to_the_config_is_read(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    entries = [{"key": "acme", "data": {"slug": "acme", "nested": {"n": 1}}}, {"key": "beta"}]
    (tmp_path / "conf" / "tenants.json").write_text(json.dumps(entries))

    listed = await evaluate({"file": "tenants.json"}, tmp_path / "conf")

    assert listed == [Partition("acme", {"slug": "acme", "nested": {"n": 1}}), Partition("beta")]


async def test_an_absolute_file_path_is_used_as_is(tmp_path: Path) -> None:
    file = write(tmp_path / "tenants.yaml", [{"key": "acme"}])

    listed = await evaluate({"file": str(file)}, Path("/nonexistent"))

    assert listed == [Partition("acme")]


async def test_a_python_source_is_the_callable_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "tenant_loader_mod.py").write_text(
        textwrap.dedent(
            """
            async def load():
                return [{"key": "acme", "data": {"slug": "acme"}}]

            class Holder:
                @staticmethod
                def sync():
                    return ["not", "checked", "here"]
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))

    assert await evaluate({"python": "tenant_loader_mod:load"}, tmp_path) == [
        {"key": "acme", "data": {"slug": "acme"}}
    ]
    # The engine checks what it returns, as for any Python API partitions callable.
    assert await evaluate({"python": " tenant_loader_mod:Holder.sync "}, tmp_path) == [
        "not",
        "checked",
        "here",
    ]


# -- a tenants file while the engine runs -------------------------------------------------------


class TinyVendor:
    """A fetch that returns one item per tenant and counts the polls each tenant got."""

    def __init__(self) -> None:
        self.polls: dict[str, int] = {}
        self.seen_data: dict[str, Any] = {}

    async def fetch(self, ctx: Any) -> dict[str, Any]:
        key = ctx.partition.key
        self.polls[key] = self.polls.get(key, 0) + 1
        self.seen_data[key] = ctx.partition.data
        return {"items": [{"id": f"{key}-1"}], "cursor": None}


def file_engine(tmp_path: Path, vendor: TinyVendor, clock: FakeClock) -> tuple[Engine, MemoryStore]:
    loader, refresh = parse_partitions(
        {"file": "tenants.yaml", "refresh": "1m"}, where=WHERE, base_dir=tmp_path
    )
    poller = define_poller(
        name="tickets",
        partitions=loader,
        partitions_refresh=refresh,
        identity=lambda item: item["id"],
        fetch=vendor.fetch,
        schedule={"min": "30s", "max": "15m"},
    )
    store = MemoryStore()
    return Engine([poller], store=store, clock=clock), store


async def test_the_file_is_read_again_at_each_refresh(tmp_path: Path) -> None:
    tenants = tmp_path / "tenants.yaml"
    write(tenants, [{"key": "acme", "data": {"token": "a1"}}, {"key": "beta"}])
    vendor, clock = TinyVendor(), FakeClock()
    engine, store = file_engine(tmp_path, vendor, clock)
    async with engine:
        await engine.tick()
        assert vendor.polls == {"acme": 1, "beta": 1}

        write(tenants, [{"key": "acme", "data": {"token": "a2"}}, {"key": "gamma"}])
        clock.advance(59)
        await engine.tick()
        assert sorted(i.partition for i in engine.inspect()) == ["acme", "beta"]  # not yet read
        beta_polls = vendor.polls["beta"]

        clock.advance(1)  # partitions_refresh (1m) elapsed: the file is read again
        await engine.tick()

        assert sorted(i.partition for i in engine.inspect()) == ["acme", "gamma"]
        assert vendor.polls["gamma"] == 1  # added: due at once
        assert store.states["tickets/beta"].paused == "removed"  # removed: paused, state kept

        clock.advance(900)
        await engine.tick()
        assert vendor.polls["beta"] == beta_polls  # never polled again while it is gone
        assert vendor.seen_data["acme"] == {"token": "a2"}  # data follows the file


async def test_a_broken_file_at_refresh_keeps_the_list_and_logs_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tenants = tmp_path / "tenants.yaml"
    write(tenants, [{"key": "acme", "data": {"token": TOKEN}}, {"key": "beta"}])
    vendor, clock = TinyVendor(), FakeClock()
    engine, _ = file_engine(tmp_path, vendor, clock)
    async with engine:
        await engine.tick()
        tenants.write_text(f"- key: acme\n  data: {{token: {TOKEN}\n- key: gamma\n")
        clock.advance(60)

        with caplog.at_level(logging.DEBUG):
            await engine.tick()

        assert sorted(i.partition for i in engine.inspect()) == ["acme", "beta"]
        failures = [r for r in caplog.records if "partitions() failed" in r.getMessage()]
        assert len(failures) == 1
        line = failures[0].getMessage()
        assert line.startswith(
            "poller 'tickets': partitions() failed, keeping the previous 2 partition(s): "
            f"ConfigError: {WHERE}.file: partitions file '{tenants}' is not valid YAML or JSON "
            "at line 3"
        )
        assert "\n" not in line
        for record in caplog.records:
            assert TOKEN not in record.getMessage()
            assert record.exc_info is None

        tenants.unlink()  # a vanished file: the same, a line naming it
        clock.advance(60)
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            await engine.tick()
        assert f"partitions file '{tenants}' not found" in caplog.text
        assert sorted(i.partition for i in engine.inspect()) == ["acme", "beta"]
