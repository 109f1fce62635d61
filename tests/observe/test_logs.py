"""``watukuy.logs``: the line formats, the context fields, the rate limit of a failing tenant's
repeated warnings, and the ``log`` section of the runner config."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.clock import ManualClock
from watukuy import logs
from watukuy.cli import main
from watukuy.config import ConfigError, parse_config
from watukuy.config.model import LogSettings

pytestmark = pytest.mark.unit


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """What :func:`watukuy.logs.configure` changes, put back after the test."""
    root = logging.getLogger()
    before = list(root.handlers)
    levels = {name: logging.getLogger(name).level for name in (logs.ROOT, logs.LIBRDKAFKA)}
    yield
    for handler in [h for h in root.handlers if h not in before]:
        root.removeHandler(handler)
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
    logs.set_runner(None)


def configured(log_format: str, level: str = "info", runner: str | None = "r-1") -> io.StringIO:
    out = io.StringIO()
    logs.configure(log_format, level, runner, stream=out)
    return out


# -- formats ------------------------------------------------------------------------------------


def test_a_text_line_ends_with_the_known_fields(restore_logging: None) -> None:
    out = configured("text")
    log = logging.getLogger("watukuy.poll")
    with logs.log_context(poller="invoices", partition="t_42"), logs.log_context(lane="live"):
        log.warning("%s: circuit opened: %s", "invoices/t_42", "VendorError: GET /x -> 500")
    with logs.log_context(poller="single", partition=""):
        log.info("no key", extra={"error_kind": "VendorError"})
    logging.getLogger("watukuy.runner").info("started")

    first, second, third = out.getvalue().splitlines()
    stamp, level, rest = first.split(" ", 2)
    assert stamp.endswith("Z") and "T" in stamp
    assert level == "WARNING"
    assert rest == (
        "watukuy.poll: invoices/t_42: circuit opened: VendorError: GET /x -> 500 "
        "poller=invoices partition=t_42 lane=live runner=r-1"
    )
    # An unpartitioned poller's key '' is shown, quoted; error_kind when given.
    assert second.endswith(
        'watukuy.poll: no key poller=single partition="" runner=r-1 error_kind=VendorError'
    )
    assert third.endswith("watukuy.runner: started runner=r-1")


def test_a_json_line_is_one_object_with_the_known_fields(restore_logging: None) -> None:
    out = configured("json")
    log = logging.getLogger("watukuy.kafka")
    with logs.log_context(generation=7):
        log.info("restored partition %d: %d key(s)", 3, 12)
    with logs.log_context(poller="p", partition='k\n"x', lane="backfill"):
        try:
            raise ValueError("broken")
        except ValueError:
            log.exception("poll failed", extra={"error_kind": "ValueError"})

    lines = out.getvalue().splitlines()
    assert len(lines) == 2  # a traceback stays inside its line
    restored, failed = (json.loads(line) for line in lines)
    assert restored == {
        "time": restored["time"],
        "level": "INFO",
        "logger": "watukuy.kafka",
        "message": "restored partition 3: 12 key(s)",
        "generation": 7,
        "runner": "r-1",
    }
    assert restored["time"].endswith("Z")
    assert failed["partition"] == 'k\n"x'
    assert (failed["poller"], failed["lane"], failed["error_kind"]) == (
        "p",
        "backfill",
        "ValueError",
    )
    assert failed["traceback"].startswith("Traceback (most recent call last):")
    assert failed["traceback"].endswith("ValueError: broken")


def test_the_level_applies_to_watukuy_and_librdkafka_shows_errors_only(
    restore_logging: None,
) -> None:
    out = configured("json", "warning")
    logging.getLogger("watukuy.poll").info("hidden")
    logging.getLogger("watukuy.poll").warning("shown")
    librdkafka = logging.getLogger(logs.LIBRDKAFKA)
    librdkafka.warning("%s [%s] %s", "FAIL", "rdkafka#producer-1", "hidden too")
    # confluent-kafka logs from the thread that polls the client: the runner id goes there too.
    thread = threading.Thread(
        target=librdkafka.error, args=("%s [%s] %s", "FAIL", "rdkafka#producer-1", "broker down")
    )
    thread.start()
    thread.join()

    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(r["logger"], r["message"]) for r in records] == [
        ("watukuy.poll", "shown"),
        (logs.LIBRDKAFKA, "FAIL [rdkafka#producer-1] broker down"),
    ]
    assert records[1]["runner"] == "r-1"


def test_debug_shows_librdkafka_and_configuring_again_replaces_the_handler(
    restore_logging: None,
) -> None:
    first = configured("text")
    second = configured("json", "debug")
    logging.getLogger(logs.LIBRDKAFKA).debug("%s [%s] %s", "INIT", "rdkafka#consumer-2", "hi")
    assert first.getvalue() == ""
    (line,) = second.getvalue().splitlines()
    assert json.loads(line)["message"] == "INIT [rdkafka#consumer-2] hi"
    ours = [h for h in logging.getLogger().handlers if h.get_name() == logs.ROOT]
    assert len(ours) == 1


def test_a_library_warning_comes_out_in_the_same_format(restore_logging: None) -> None:
    out = configured("json")
    logging.getLogger("aiohttp.server").warning("Error handling request")
    logging.getLogger("aiohttp.access").info("not at info")
    (line,) = out.getvalue().splitlines()
    assert json.loads(line)["logger"] == "aiohttp.server"


def test_bad_format_or_level_is_refused() -> None:
    with pytest.raises(ValueError, match="log format must be one of: text, json"):
        logs.configure("yaml")
    with pytest.raises(ValueError, match="log level must be one of: debug, info"):
        logs.configure("text", "verbose")


# -- context ------------------------------------------------------------------------------------


def test_contexts_nest_and_end() -> None:
    assert logs.current_context() == {}
    with logs.log_context(poller="p", partition="k"):
        with logs.log_context(lane="live", partition=None):  # None: left as it is
            assert logs.current_context() == {"poller": "p", "partition": "k", "lane": "live"}
        assert logs.current_context() == {"poller": "p", "partition": "k"}
    assert logs.current_context() == {}
    with pytest.raises(TypeError, match="unknown log context field"), logs.log_context(tenant="x"):
        pass


async def test_two_keys_polled_at_once_keep_their_own_fields(restore_logging: None) -> None:
    out = configured("json")
    log = logging.getLogger("watukuy.poll")
    both_inside = asyncio.Barrier(2)

    async def poll(key: str) -> None:
        with logs.log_context(poller="p", partition=key):
            await both_inside.wait()  # the other key's context is set meanwhile
            log.info("polled %s", key)

    await asyncio.gather(poll("a"), poll("b"))
    log.info("outside")

    records = [json.loads(line) for line in out.getvalue().splitlines()]
    by_message = {r["message"]: r.get("partition") for r in records}
    assert by_message == {"polled a": "a", "polled b": "b", "outside": None}


def test_a_field_given_with_extra_wins() -> None:
    record = logging.LogRecord("watukuy.x", logging.INFO, __file__, 1, "m", (), None)
    record.partition = "explicit"
    with logs.log_context(poller="p", partition="ctx"):
        assert logs.ContextFilter().filter(record)
    assert (record.poller, record.partition) == ("p", "explicit")  # type: ignore[attr-defined]


# -- a failing tenant's repeated warnings --------------------------------------------------------


def _record(
    partition: str | None, msg: str, level: int = logging.WARNING, name: str = "watukuy.poll"
) -> logging.LogRecord:
    record = logging.LogRecord(name, level, __file__, 1, msg, ("x",), None)
    if partition is not None:
        record.poller = "p"
        record.partition = partition
    return record


def test_a_tenants_same_warning_shows_once_per_interval_then_says_how_many() -> None:
    clock = ManualClock(1000.0)
    repeats = logs.KeyRepeatFilter(60.0, clock)
    assert repeats.filter(_record("t_1", "%s: circuit opened"))
    held = 0
    for _ in range(50):
        clock.now += 1.0
        held += not repeats.filter(_record("t_1", "%s: circuit opened"))
    assert held == 50
    # Meanwhile: another tenant, another message, another logger, and info are all shown.
    assert repeats.filter(_record("t_2", "%s: circuit opened"))
    assert repeats.filter(_record("t_1", "%s: commit failed"))
    assert repeats.filter(_record("t_1", "%s: circuit opened", name="watukuy.handlers"))
    assert repeats.filter(_record("t_1", "%s: backing off", logging.INFO))
    assert repeats.filter(_record("t_1", "%s: backing off", logging.INFO))
    # Not a tenant's: never held back.
    assert repeats.filter(_record(None, "transaction failed: %s"))
    assert repeats.filter(_record(None, "transaction failed: %s"))

    clock.now += 10.0  # 60 s since the one shown
    later = _record("t_1", "%s: circuit opened")
    assert repeats.filter(later)
    assert later.getMessage() == "x: circuit opened (50 more like this not shown)"
    clock.now += 61.0
    quiet = _record("t_1", "%s: circuit opened")
    assert repeats.filter(quiet)
    assert quiet.getMessage() == "x: circuit opened"


def test_the_handler_limits_by_the_context_key(restore_logging: None) -> None:
    out = io.StringIO()
    logs.configure("text", "info", None, repeat_interval=3600.0, stream=out)
    log = logging.getLogger("watukuy.poll")
    for key in ("a", "a", "b", "a"):
        with logs.log_context(poller="p", partition=key):
            log.warning("%s: circuit opened", f"p/{key}")
    messages = [line.split(": ", 1)[1] for line in out.getvalue().splitlines()]
    assert messages == [
        "p/a: circuit opened poller=p partition=a",
        "p/b: circuit opened poller=p partition=b",
    ]


# -- the config's log section --------------------------------------------------------------------


def _config(log: object) -> dict[str, object]:
    return {
        "kafka": {"bootstrap.servers": "127.0.0.1:9"},
        "runner": {"id": "r"},
        "log": log,
        "pollers": [{"python": "integration.pollers:invoices"}],
    }


def test_the_log_section() -> None:
    assert parse_config(_config(None)).log == LogSettings("text", "info", 60.0)
    given = {"format": "JSON", "level": "warning", "repeat.interval": "5m"}
    config = parse_config(_config(given))
    assert config.log == LogSettings("json", "warning", 300.0)
    assert config.describe()["log"] == {
        "format": "json",
        "level": "warning",
        "repeat.interval": "5m",
    }


@pytest.mark.parametrize(
    ("log", "path", "message"),
    [
        ({"format": "xml"}, "log.format", "must be one of: text, json; got 'xml'"),
        ({"level": "verbose"}, "log.level", "must be one of: debug, info, warning, error; got"),
        ({"level": 10}, "log.level", "got an int"),
        ({"levl": "info"}, "log.levl", "unknown key; did you mean 'level'?"),
        ({"repeat.interval": 60}, "log.repeat.interval", "a bare number"),
        ("json", "log", "must be a mapping, got a str"),
    ],
)
def test_a_bad_log_setting_names_its_path(log: object, path: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(_config(log))
    assert caught.value.path == path
    assert message in str(caught.value)


def test_cli_errors_stay_one_plain_line_with_a_json_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], restore_logging: None
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "kafka: {bootstrap.servers: '127.0.0.1:9'}\nrunner: {id: r}\nlog: {format: json}\n"
        "pollers: [{python: integration.pollers:invoices}]\n"
    )
    assert main(["validate", "--config", str(config)]) == 0
    assert capsys.readouterr().err == f"watukuy-source: {config} is valid\n"

    config.write_text(config.read_text().replace("format: json", "format: json, level: loud"))
    assert main(["validate", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err == (
        "watukuy-source: log.level: must be one of: debug, info, warning, error; got 'loud'\n"
    )
