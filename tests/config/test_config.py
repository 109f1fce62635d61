"""The runner config: ``watukuy.config.load_config`` / ``parse_config``.

Every error test asserts the path a user is pointed at and the message they read.
"""

from __future__ import annotations

import socket
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from watukuy.config import (
    ConfigError,
    RestSettings,
    RunnerConfig,
    RunnerSettings,
    TopicsConfig,
    load_config,
    parse_config,
)
from watukuy.config.model import is_sensitive_kafka_key
from watukuy.core.poller import Poller
from watukuy.options.properties import parse_properties
from watukuy.store.kafka.clients import OWNED_PROPERTIES

pytestmark = pytest.mark.unit

POLLER_MODULE = """
from types import SimpleNamespace

from watukuy import define_poller


async def fetch(ctx):
    return {"items": []}


invoices = define_poller(name="invoices", fetch=fetch, identity=lambda item: item["id"])
tickets = define_poller(
    name="tickets", fetch=fetch, identity=lambda item: item["id"], budget="vendor"
)
same_name = define_poller(name="invoices", fetch=fetch, identity=lambda item: item["id"])
holder = SimpleNamespace(poller=invoices)
not_a_poller = fetch
count = 3
"""


class Modules:
    """Writes importable modules under ``directory``, each with a fresh name."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.names: list[str] = []

    def write(self, body: str) -> str:
        name = f"wk_cfg_{uuid.uuid4().hex[:10]}"
        (self.directory / f"{name}.py").write_text(textwrap.dedent(body))
        self.names.append(name)
        return name


@pytest.fixture
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Modules]:
    monkeypatch.setattr(sys, "path", list(sys.path))  # parse_config prepends python_path
    directory = tmp_path / "pollers"
    directory.mkdir()
    made = Modules(directory)
    yield made
    for name in made.names:
        sys.modules.pop(name, None)


@pytest.fixture
def pollers_module(modules: Modules) -> str:
    return modules.write(POLLER_MODULE)


def minimal(module: str, modules: Modules, **sections: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "python_path": [str(modules.directory)],
        "kafka": {"bootstrap.servers": "127.0.0.1:9092"},
        "runner": {"id": "runner-1"},
        "pollers": [{"python": f"{module}:invoices"}],
    }
    config.update(sections)
    return config


def error_of(config: dict[str, Any], base_dir: Path | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as raised:
        parse_config(config, base_dir=base_dir)
    return raised.value


# --- a valid config ---------------------------------------------------------------------------


def test_minimal_file_gets_every_default(
    tmp_path: Path, modules: Modules, pollers_module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "config.yaml").write_text(
        textwrap.dedent(f"""
            python_path: [pollers]      # relative to this file
            kafka:
              bootstrap.servers: 127.0.0.1:9092
            runner:
              id: runner-1
            pollers:
              - python: {pollers_module}:invoices
            """)
    )
    monkeypatch.chdir(Path("/"))  # relative paths follow the file, not the working directory
    cfg = load_config(tmp_path / "config.yaml")

    assert isinstance(cfg, RunnerConfig)
    assert cfg.kafka == {"bootstrap.servers": "127.0.0.1:9092"}
    assert cfg.topics == TopicsConfig(prefix="watukuy", partitions=32, replication_factor=None)
    assert cfg.runner == RunnerSettings(
        id="runner-1",
        group_id="watukuy.runners",
        commit_interval=0.1,
        max_concurrency=256,
        session_timeout=10.0,
        static_membership=True,
    )
    assert cfg.rest == RestSettings(host="127.0.0.1", port=8083)
    assert cfg.budgets == {}
    assert [p.name for p in cfg.pollers] == ["invoices"]
    assert isinstance(cfg.pollers[0], Poller)
    assert cfg.pollers[0] is sys.modules[pollers_module].invoices
    assert cfg.python_path == (modules.directory.resolve(),)
    assert cfg.describe() == {
        "kafka": {"bootstrap.servers": "127.0.0.1:9092"},
        "topics": {"prefix": "watukuy", "partitions": 32, "replication.factor": None},
        "runner": {
            "id": "runner-1",
            "group.id": "watukuy.runners",
            "commit.interval": "100ms",
            "max.concurrency": 256,
            "max.pages.in.flight.per.key": 16,
            "max.pages.in.flight": 1024,
            "session.timeout": "10s",
            "static.membership": True,
            "startup.timeout": "15s",
            "state.dir": None,
            "snapshot.cache.entries": 1000000,
            "standby.replicas": 1,
        },
        "rest": {"listen": "127.0.0.1:8083", "auth": "none"},
        "budgets": {},
        "pollers": [{"python": f"{pollers_module}:invoices", "name": "invoices"}],
        "python_path": [str(modules.directory.resolve())],
    }


def test_every_key_set(modules: Modules, pollers_module: str) -> None:
    cfg = parse_config(
        {
            "python_path": [str(modules.directory)],
            "kafka": {
                "bootstrap.servers": "k1:9092,k2:9092",
                "batch.size": 65536,
                "compression.type": "zstd",
                "socket.keepalive.enable": True,
                "retry.backoff.ms": 100.5,
            },
            "topics": {"prefix": "acme.prod", "partitions": 12, "replication.factor": 3},
            "runner": {
                "id": "runner-2",
                "group.id": "acme-runners",
                "commit.interval": "250ms",
                "max.concurrency": 64,
                "max.pages.in.flight.per.key": 4,
                "max.pages.in.flight": 100,
                "session.timeout": "45s",
                "static.membership": False,
                "startup.timeout": "1m",
            },
            "rest": {"listen": "0.0.0.0:9090", "auth": "none"},
            "budgets": {"vendor": {"rate": "10/s", "burst": 20, "fairness": "weighted"}},
            "pollers": [
                {"python": f"{pollers_module}:invoices"},
                {"python": f"{pollers_module}:tickets"},
            ],
        }
    )
    assert cfg.kafka["batch.size"] == 65536
    assert cfg.kafka["socket.keepalive.enable"] is True
    assert cfg.kafka["retry.backoff.ms"] == 100.5
    assert cfg.topics == TopicsConfig(prefix="acme.prod", partitions=12, replication_factor=3)
    assert cfg.runner == RunnerSettings(
        id="runner-2",
        group_id="acme-runners",
        commit_interval=0.25,
        max_concurrency=64,
        max_pages_in_flight_per_key=4,
        max_pages_in_flight=100,
        session_timeout=45.0,
        static_membership=False,
        startup_timeout=60.0,
    )
    assert cfg.rest == RestSettings(host="0.0.0.0", port=9090)
    assert cfg.budgets == {"vendor": {"rate": "10/s", "burst": 20, "fairness": "weighted"}}
    assert [p.name for p in cfg.pollers] == ["invoices", "tickets"]
    assert cfg.describe()["runner"]["session.timeout"] == "45s"
    assert cfg.describe()["runner"]["startup.timeout"] == "1m"


def test_group_id_defaults_to_prefix_runners(modules: Modules, pollers_module: str) -> None:
    cfg = parse_config(minimal(pollers_module, modules, topics={"prefix": "acme"}))
    assert cfg.runner.group_id == "acme.runners"


def test_runner_id_defaults_to_hostname(
    modules: Modules, pollers_module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(socket, "gethostname", lambda: "node-7.example")
    cfg = parse_config(minimal(pollers_module, modules, runner=None))
    assert cfg.runner.id == "node-7.example"


def test_hostname_that_is_not_a_valid_runner_id(
    modules: Modules, pollers_module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(socket, "gethostname", lambda: "my host")
    error = error_of(minimal(pollers_module, modules, runner={}))
    assert error.path == "runner.id"
    assert str(error) == (
        "runner.id: is not set, and the hostname 'my host' is not a valid id; set runner.id"
    )


def test_empty_sections_read_as_defaults(modules: Modules, pollers_module: str) -> None:
    cfg = parse_config(minimal(pollers_module, modules, topics=None, rest=None, budgets=None))
    assert cfg.topics == TopicsConfig()
    assert cfg.rest == RestSettings()
    assert cfg.budgets == {}


# --- unknown keys -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("section", "given", "path", "message"),
    [
        (None, {"pollerz": []}, "pollerz", "unknown key; did you mean 'pollers'?"),
        (
            None,
            {"settings": {}},
            "settings",
            "unknown key; expected one of: kafka, topics, runner, rest, budgets, schema.registry, "
            "log, metrics, credentials, pollers, python_path",
        ),
        (
            "runner",
            {"id": "r", "comit.interval": "1s"},
            "runner.comit.interval",
            "unknown key; did you mean 'commit.interval'?",
        ),
        (
            "topics",
            {"replication_factor": 3},
            "topics.replication_factor",
            "unknown key; did you mean 'replication.factor'?",
        ),
        ("rest", {"port": 80}, "rest.port", "unknown key; expected one of: listen, auth, tls"),
    ],
)
def test_unknown_keys_are_named_with_a_suggestion(
    modules: Modules,
    pollers_module: str,
    section: str | None,
    given: dict[str, Any],
    path: str,
    message: str,
) -> None:
    config = minimal(pollers_module, modules)
    if section is None:
        config.update(given)
    else:
        config[section] = given
    error = error_of(config)
    assert error.path == path
    assert str(error) == f"{path}: {message}"


def test_section_that_is_not_a_mapping(modules: Modules, pollers_module: str) -> None:
    error = error_of(minimal(pollers_module, modules, topics=["watukuy"]))
    assert str(error) == "topics: must be a mapping, got a list"


# --- kafka ------------------------------------------------------------------------------------


def test_kafka_section_is_required(modules: Modules, pollers_module: str) -> None:
    config = minimal(pollers_module, modules)
    del config["kafka"]
    error = error_of(config)
    assert str(error) == "kafka: is required, with at least bootstrap.servers"


def test_bootstrap_servers_is_required(modules: Modules, pollers_module: str) -> None:
    error = error_of(minimal(pollers_module, modules, kafka={"client.id": "x"}))
    assert error.path == "kafka.bootstrap.servers"
    assert str(error) == "kafka.bootstrap.servers: is required, e.g. '127.0.0.1:9092'"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "must not be empty; e.g. '127.0.0.1:9092'"),
        (9092, "must be a string like '127.0.0.1:9092', got an int"),
    ],
)
def test_bootstrap_servers_must_be_a_non_empty_string(
    modules: Modules, pollers_module: str, value: object, message: str
) -> None:
    error = error_of(minimal(pollers_module, modules, kafka={"bootstrap.servers": value}))
    assert str(error) == f"kafka.bootstrap.servers: {message}"


@pytest.mark.parametrize("name", sorted(OWNED_PROPERTIES))
def test_kafka_properties_watukuy_owns_are_rejected(
    modules: Modules, pollers_module: str, name: str
) -> None:
    kafka = {"bootstrap.servers": "b:9092", name: "x"}
    error = error_of(minimal(pollers_module, modules, kafka=kafka))
    assert error.path == f"kafka.{name}"
    assert str(error) == (
        f"kafka.{name}: is managed by watukuy and cannot be set ({OWNED_PROPERTIES[name]})"
    )


@pytest.mark.parametrize(
    ("name", "names"),
    [
        ("session.timeout.ms", "set runner.session.timeout instead"),
        ("transaction.timeout.ms", "set runner.session.timeout instead"),
        ("heartbeat.interval.ms", "derived from runner.session.timeout"),
        ("group.instance.id", "set runner.id and runner.static.membership instead"),
        ("linger.ms", "fixed at 5ms"),
        ("partitioner", "fixed to murmur2_random"),
        ("fetch.wait.max.ms", "fixed at 50ms"),
        ("fetch.queue.backoff.ms", "fixed at 10ms"),
        ("enable.partition.eof", "fixed on"),
        ("auto.offset.reset", "fixed to earliest"),
    ],
)
def test_an_owned_property_says_what_to_set_instead_or_why_it_is_fixed(
    modules: Modules, pollers_module: str, name: str, names: str
) -> None:
    kafka = {"bootstrap.servers": "b:9092", name: 1}
    assert names in str(error_of(minimal(pollers_module, modules, kafka=kafka)))


@pytest.mark.parametrize(
    ("given", "path", "message"),
    [
        (
            {"linger.msx": 5},
            "kafka.linger.msx",
            "is not a librdkafka property; did you mean 'linger.ms'?",
        ),
        (
            {"sasl.pasword": "x"},
            "kafka.sasl.pasword",
            "is not a librdkafka property; did you mean 'sasl.password'?",
        ),
        ({"zzz.qqq": 1}, "kafka.zzz.qqq", "is not a librdkafka property"),
        ({"batch.size": "big"}, "kafka.batch.size", "librdkafka refuses the value 'big'"),
        # librdkafka names the canonical property (request.required.acks); the path is the user's
        ({"acks": "most"}, "kafka.acks", "librdkafka refuses the value 'most'"),
        (
            {"compression.type": "zip"},
            "kafka.compression.type",
            "librdkafka refuses the value 'zip'",
        ),
        (
            {"security.protocol": "sasl_plain"},
            "kafka.security.protocol",
            "librdkafka refuses the value 'sasl_plain'",
        ),
        (
            {"acks": 0},
            "kafka.acks",
            "librdkafka refuses it: `acks` must be set to `all` when `enable.idempotence` is true "
            "(watukuy sets enable.idempotence; fixed on: transactions need it)",
        ),
        # consumer-only: a producer ignores it, the consumers refuse it
        (
            {"fetch.max.bytes": 1000},
            "kafka.fetch.max.bytes",
            "librdkafka refuses it: `fetch.max.bytes` must be >= `message.max.bytes`",
        ),
        (
            {"max.poll.interval.ms": 9000},
            "kafka.max.poll.interval.ms",
            "librdkafka refuses it: `max.poll.interval.ms`must be >= `session.timeout.ms` "
            "(watukuy sets session.timeout.ms; set runner.session.timeout instead)",
        ),
        (
            {"message.timeout.ms": 30000},
            "kafka.message.timeout.ms",
            "librdkafka refuses it: `message.timeout.ms` must be set <= `transaction.timeout.ms` "
            "(watukuy sets transaction.timeout.ms; set runner.session.timeout instead: a "
            "transaction may last as long as a session)",
        ),
        (
            {"security.protocol": "sasl_ssl", "sasl.mechanism": "PLAIN"},
            "kafka",
            "librdkafka refuses it: sasl.username and sasl.password must be set",
        ),
        (
            {"error_cb": "print"},
            "kafka.error_cb",
            "librdkafka refuses it: expected error_cb property as a callable function",
        ),
    ],
)
def test_librdkafka_checks_the_kafka_properties_at_load(
    modules: Modules, pollers_module: str, given: dict[str, Any], path: str, message: str
) -> None:
    kafka = {"bootstrap.servers": "127.0.0.1:1", **given}
    error = error_of(minimal(pollers_module, modules, kafka=kafka))
    assert error.path == path
    assert str(error) == f"{path}: {message}"


def test_a_refused_secret_value_is_not_echoed(
    modules: Modules, pollers_module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WK_PROTOCOL", "sasl-sekrit-protocol")
    kafka = {"bootstrap.servers": "b:9092", "security.protocol": "${env:WK_PROTOCOL}"}
    error = error_of(minimal(pollers_module, modules, kafka=kafka))
    assert str(error) == "kafka.security.protocol: librdkafka refuses the value [redacted]"


def test_the_max_poll_interval_is_checked_against_the_runner_session_timeout(
    modules: Modules, pollers_module: str
) -> None:
    kafka = {"bootstrap.servers": "b:9092", "max.poll.interval.ms": 5000}
    cfg = parse_config(
        minimal(pollers_module, modules, kafka=kafka, runner={"id": "r", "session.timeout": "5s"})
    )
    assert cfg.kafka["max.poll.interval.ms"] == 5000


def test_properties_users_need_pass(modules: Modules, pollers_module: str) -> None:
    kafka = {
        "bootstrap.servers": "b1:9092,b2:9092",
        "client.id": "acme-watukuy",
        "security.protocol": "sasl_plaintext",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "svc",
        "sasl.password": "pw",
        "ssl.endpoint.identification.algorithm": "https",
        "enable.ssl.certificate.verification": True,
        "socket.keepalive.enable": True,
        "compression.type": "zstd",
        "batch.size": 131072,
        "acks": "all",
        "fetch.max.bytes": 104857600,
        "message.timeout.ms": 10000,
        "statistics.interval.ms": 0,
        "debug": "broker,topic",
    }
    cfg = parse_config(minimal(pollers_module, modules, kafka=kafka))
    assert dict(cfg.kafka) == kafka


def test_group_id_rejection_points_at_the_runner_key(modules: Modules, pollers_module: str) -> None:
    kafka = {"bootstrap.servers": "b:9092", "group.id": "mine"}
    error = error_of(minimal(pollers_module, modules, kafka=kafka))
    assert str(error) == (
        "kafka.group.id: is managed by watukuy and cannot be set (set runner.group.id instead)"
    )


@pytest.mark.parametrize(
    ("value", "got"), [({"key": {"password": "p"}}, "a mapping"), (None, "null"), ([1], "a list")]
)
def test_kafka_values_must_be_scalars(
    modules: Modules, pollers_module: str, value: object, got: str
) -> None:
    kafka = {"bootstrap.servers": "b:9092", "ssl": value}
    error = error_of(minimal(pollers_module, modules, kafka=kafka))
    assert error.path == "kafka.ssl"
    assert str(error) == (
        f"kafka.ssl: must be a string, number or boolean, got {got}; write librdkafka "
        "properties as flat dotted keys, e.g. 'ssl.key.password: ...'"
    )


# --- topics -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("topics", "path", "message"),
    [
        (
            {"prefix": "my topics"},
            "topics.prefix",
            "must be a Kafka topic name of letters, digits, '.', '_' and '-', got 'my topics'",
        ),
        (
            {"prefix": ""},
            "topics.prefix",
            "must be a Kafka topic name of letters, digits, '.', '_' and '-', got ''",
        ),
        ({"prefix": "p" * 201}, "topics.prefix", "must be at most 200 characters, got 201"),
        ({"partitions": 0}, "topics.partitions", "must be a positive integer, got 0"),
        ({"partitions": True}, "topics.partitions", "must be a positive integer, got a bool True"),
        ({"partitions": 2.5}, "topics.partitions", "must be a positive integer, got a float 2.5"),
        (
            {"replication.factor": "3"},
            "topics.replication.factor",
            "must be a positive integer, got a string '3'",
        ),
    ],
)
def test_bad_topics(
    modules: Modules, pollers_module: str, topics: dict[str, Any], path: str, message: str
) -> None:
    error = error_of(minimal(pollers_module, modules, topics=topics))
    assert error.path == path
    assert str(error) == f"{path}: {message}"


def test_prefix_of_200_characters_is_fine(modules: Modules, pollers_module: str) -> None:
    cfg = parse_config(minimal(pollers_module, modules, topics={"prefix": "p" * 200}))
    assert cfg.topics.prefix == "p" * 200


# --- runner -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("runner", "path", "message"),
    [
        (
            {"id": "runner 1"},
            "runner.id",
            "must be 1 to 249 letters, digits, '.', '_' or '-', got 'runner 1'",
        ),
        ({"id": 7}, "runner.id", "must be a string, got an int; quote it"),
        (
            {"id": "r", "commit.interval": "0s"},
            "runner.commit.interval",
            "duration must be positive, got '0s'",
        ),
        (
            {"id": "r", "commit.interval": "soon"},
            "runner.commit.interval",
            "expected a duration like '250ms', '30s', '5m', '2h' or '30d', got 'soon'",
        ),
        (
            {"id": "r", "session.timeout": "500ms"},
            "runner.session.timeout",
            "must be between 1s and 300s, got '500ms'",
        ),
        (
            {"id": "r", "session.timeout": "301s"},
            "runner.session.timeout",
            "must be between 1s and 300s, got '301s'",
        ),
        (
            {"id": "r", "max.concurrency": 0},
            "runner.max.concurrency",
            "must be a positive integer, got 0",
        ),
        (
            {"id": "r", "max.pages.in.flight.per.key": 0},
            "runner.max.pages.in.flight.per.key",
            "must be a positive integer, got 0",
        ),
        (
            {"id": "r", "max.pages.in.flight": "lots"},
            "runner.max.pages.in.flight",
            "must be a positive integer, got a string 'lots'",
        ),
        (
            {"id": "r", "static.membership": "yes"},
            "runner.static.membership",
            "must be true or false, got a str",
        ),
        (
            {"id": "r", "group.id": ""},
            "runner.group.id",
            "must not be empty; e.g. 'watukuy.runners'",
        ),
    ],
)
def test_bad_runner_settings(
    modules: Modules, pollers_module: str, runner: dict[str, Any], path: str, message: str
) -> None:
    error = error_of(minimal(pollers_module, modules, runner=runner))
    assert error.path == path
    assert str(error) == f"{path}: {message}"


@pytest.mark.parametrize("key", ["commit.interval", "session.timeout", "startup.timeout"])
@pytest.mark.parametrize(
    ("value", "like"),
    [
        (1000, "'1000ms' or '1s'"),
        (30000, "'30000ms' or '30s'"),
        (5, "'5ms' or '5s'"),
        (2.5, "'1000ms' or '1s'"),
        (0, "'1000ms' or '1s'"),
    ],
)
def test_a_bare_number_is_not_a_duration(
    modules: Modules, pollers_module: str, key: str, value: object, like: str
) -> None:
    error = error_of(minimal(pollers_module, modules, runner={"id": "r", key: value}))
    assert error.path == f"runner.{key}"
    assert str(error) == (
        f"runner.{key}: must be a duration like {like}, got {value} (a bare number; Connect "
        "users mean milliseconds)"
    )


def test_startup_timeout(modules: Modules, pollers_module: str) -> None:
    cfg = parse_config(
        minimal(pollers_module, modules, runner={"id": "r", "startup.timeout": "2m"})
    )
    assert cfg.runner.startup_timeout == 120.0
    error = error_of(minimal(pollers_module, modules, runner={"id": "r", "startup.timeout": "0s"}))
    assert str(error) == "runner.startup.timeout: duration must be positive, got '0s'"


@pytest.mark.parametrize(("value", "seconds"), [("1s", 1.0), ("300s", 300.0), ("5m", 300.0)])
def test_session_timeout_bounds_are_inclusive(
    modules: Modules, pollers_module: str, value: str, seconds: float
) -> None:
    runner = {"id": "r", "session.timeout": value}
    cfg = parse_config(minimal(pollers_module, modules, runner=runner))
    assert cfg.runner.session_timeout == seconds


def test_state_dir_is_a_directory_this_process_can_write(
    modules: Modules, pollers_module: str, tmp_path: Path
) -> None:
    runner = {"id": "r", "state.dir": str(tmp_path / "state")}
    cfg = parse_config(minimal(pollers_module, modules, runner=runner))
    assert cfg.runner.state_dir == str(tmp_path / "state")

    a_file = tmp_path / "file"
    a_file.write_text("")
    runner = {"id": "r", "state.dir": str(a_file)}
    error = error_of(minimal(pollers_module, modules, runner=runner))
    assert error.path == "runner.state.dir"
    assert "is not a directory" in str(error)

    error = error_of(minimal(pollers_module, modules, runner={"id": "r", "state.dir": ""}))
    assert error.path == "runner.state.dir"


# --- rest -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("listen", "host", "port"),
    [
        ("0.0.0.0:8083", "0.0.0.0", 8083),
        ("localhost:0", "localhost", 0),
        ("[::1]:8083", "::1", 8083),
        ("[::]:65535", "::", 65535),
    ],
)
def test_rest_listen(
    modules: Modules, pollers_module: str, listen: str, host: str, port: int
) -> None:
    rest = {"listen": listen, "auth": "none"}
    cfg = parse_config(minimal(pollers_module, modules, rest=rest))
    assert cfg.rest == RestSettings(host=host, port=port)
    assert cfg.rest.listen == listen


USAGE = "must be 'host:port', e.g. '127.0.0.1:8083' or '[::1]:8083'"


@pytest.mark.parametrize(
    ("listen", "message"),
    [
        (8083, f"{USAGE}, got an int"),
        ("localhost", f"{USAGE}, got 'localhost'"),
        (":8083", f"{USAGE}, got ':8083'"),
        ("localhost:65536", "port must be a number from 0 to 65535, got 'localhost:65536'"),
        ("localhost:http", "port must be a number from 0 to 65535, got 'localhost:http'"),
        ("::1:8083", "write an IPv6 host in brackets, e.g. '[::1]:8083', got '::1:8083'"),
        ("[::1]", f"{USAGE}, got '[::1]'"),
        ("[example]:80", "brackets must hold an IPv6 address, got '[example]:80'"),
    ],
)
def test_bad_rest_listen(
    modules: Modules, pollers_module: str, listen: object, message: str
) -> None:
    error = error_of(minimal(pollers_module, modules, rest={"listen": listen}))
    assert error.path == "rest.listen"
    assert str(error) == f"rest.listen: {message}"


# --- budgets ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("budgets", "path", "message"),
    [
        (
            {"vendor": {"rate": "fast"}},
            "budgets.vendor.rate",
            "invalid rate 'fast': expected '<count>/<unit>' with unit s, m, h or d "
            "(e.g. '10/s', '600/m', '5/h', '100/15s')",
        ),
        ({"vendor": {"burst": 5}}, "budgets.vendor.rate", "is required, e.g. '10/s'"),
        (
            {"vendor": {"rate": "10/s", "fairness": "fifo"}},
            "budgets.vendor.fairness",
            "must be one of round-robin, weighted",
        ),
        (
            {"vendor": {"rate": "10/s", "brust": 5}},
            "budgets.vendor.brust",
            "unknown key; did you mean 'burst'?",
        ),
        (
            {"vendor": "10/s"},
            "budgets.vendor",
            "must be a mapping like {rate: 10/s, burst: 20}, got a str",
        ),
        (["vendor"], "budgets", "must be a mapping, got a list"),
        (
            {"vendor": {"rate": "10/s", "per": "account"}},
            "budgets.vendor.per",
            "must be one of connector, tenant, got 'account'",
        ),
        (
            {"vendor": {"rate": "{partition.data.rate_limit}/m"}},
            "budgets.vendor.rate",
            "a rate that depends on the tenant needs per: tenant",
        ),
        (
            {"vendor": {"rate": "{tenant.key}/m", "per": "tenant"}},
            "budgets.vendor.rate",
            "a rate may name only {partition.data.NAME} (the tenant's plan), not {tenant.key}; "
            "write {{ and }} for literal braces",
        ),
        (
            {"vendor": {"rate": "{cursor}/s", "per": "tenant"}},
            "budgets.vendor.rate",
            "a rate may name only {partition.data.NAME} (the tenant's plan), not {cursor}; "
            "write {{ and }} for literal braces",
        ),
        (
            {"vendor": {"rate": "{partition.data.}/s", "per": "tenant"}},
            "budgets.vendor.rate",
            "name a data field: {partition.data.NAME}",
        ),
        (
            {"vendor": {"rate": "{partition.data.plan", "per": "tenant"}},
            "budgets.vendor.rate",
            "bad template: expected '}' before end of string; write {{ and }} for literal braces",
        ),
        (
            {"vendor": {"rate": "{partition.data.rate}/m", "per": "tenant", "burst": 0}},
            "budgets.vendor.burst",
            "must be a number >= 1, got 0",
        ),
    ],
)
def test_bad_budgets(
    modules: Modules, pollers_module: str, budgets: object, path: str, message: str
) -> None:
    error = error_of(minimal(pollers_module, modules, budgets=budgets))
    assert error.path == path
    assert str(error) == f"{path}: {message}"


def test_budgets_per_tenant_with_a_rate_template_load_as_written(
    modules: Modules, pollers_module: str
) -> None:
    budgets = {
        "vendor": {"rate": "{partition.data.rate_limit}/m", "per": "tenant"},
        "reports": {"rate": "100/15m", "burst": 1, "per": "connector"},
    }
    cfg = parse_config(minimal(pollers_module, modules, budgets=budgets))
    assert cfg.budgets == budgets
    assert cfg.describe()["budgets"] == budgets


def test_a_rate_from_a_secret_is_not_read_as_a_template(
    modules: Modules, pollers_module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WK_RATE", "{partition.key}/s")
    budgets = {"vendor": {"rate": "${env:WK_RATE}", "per": "tenant"}}
    error = error_of(minimal(pollers_module, modules, budgets=budgets))
    assert error.path == "budgets.vendor.rate"
    assert "invalid rate" in str(error) and "partition.key" not in str(error)


def test_poller_budget_must_be_defined(modules: Modules, pollers_module: str) -> None:
    pollers = [{"python": f"{pollers_module}:invoices"}, {"python": f"{pollers_module}:tickets"}]
    error = error_of(minimal(pollers_module, modules, pollers=pollers))
    assert error.path == "pollers[1]"
    assert str(error) == (
        "pollers[1]: poller 'tickets' uses budget 'vendor', which is not under budgets "
        "(none are defined)"
    )


# --- pollers ----------------------------------------------------------------------------------


def python_error(modules: Modules, ref: str) -> ConfigError:
    return error_of(minimal("unused", modules, pollers=[{"python": ref}]))


def test_dotted_attribute(modules: Modules, pollers_module: str) -> None:
    config = minimal(
        pollers_module, modules, pollers=[{"python": f"{pollers_module}:holder.poller"}]
    )
    cfg = parse_config(config)
    assert cfg.pollers[0] is sys.modules[pollers_module].invoices


def test_module_not_found(modules: Modules) -> None:
    error = python_error(modules, "no_such_pkg.pollers:invoices")
    assert error.path == "pollers[0].python"
    assert str(error) == (
        "pollers[0].python: module 'no_such_pkg.pollers' not found; "
        "is it installed or on python_path?"
    )


def test_missing_attribute(modules: Modules, pollers_module: str) -> None:
    error = python_error(modules, f"{pollers_module}:invoicez")
    assert str(error) == (
        f"pollers[0].python: module '{pollers_module}' has no attribute 'invoicez'"
    )


def test_missing_dotted_attribute(modules: Modules, pollers_module: str) -> None:
    error = python_error(modules, f"{pollers_module}:holder.other")
    assert str(error) == f"pollers[0].python: '{pollers_module}:holder' has no attribute 'other'"


@pytest.mark.parametrize(("attr", "kind"), [("not_a_poller", "a function"), ("count", "an int")])
def test_not_a_poller(modules: Modules, pollers_module: str, attr: str, kind: str) -> None:
    error = python_error(modules, f"{pollers_module}:{attr}")
    assert error.path == "pollers[0].python"
    assert str(error) == (
        f"pollers[0].python: '{pollers_module}:{attr}' is {kind}, not a Poller; "
        "create it with watukuy.define_poller(...)"
    )


def test_module_that_raises_while_importing(modules: Modules) -> None:
    name = modules.write('raise RuntimeError("vendor SDK wants\\nan API key")\n')
    error = python_error(modules, f"{name}:invoices")
    assert error.path == "pollers[0].python"
    assert str(error) == (
        f"pollers[0].python: importing '{name}' failed: RuntimeError: vendor SDK wants an API key"
    )
    assert "\n" not in str(error)


def test_module_whose_dependency_is_missing(modules: Modules) -> None:
    name = modules.write("import vendor_sdk_that_is_not_installed\n")
    error = python_error(modules, f"{name}:invoices")
    assert str(error) == (
        f"pollers[0].python: importing '{name}' failed: ModuleNotFoundError: "
        "No module named 'vendor_sdk_that_is_not_installed'"
    )


def test_module_with_a_bad_poller_definition(modules: Modules) -> None:
    name = modules.write(
        "from watukuy import define_poller\n"
        "p = define_poller(name='p', fetch=print, identity=id, schedule={'min': 'often'})\n"
    )
    error = python_error(modules, f"{name}:p")
    assert str(error).startswith(
        f"pollers[0].python: importing '{name}' failed: ConfigError: poller 'p'.schedule.min: "
    )


@pytest.mark.parametrize("ref", ["mypackage.pollers.invoices", "mod:", ":attr", "a:b:c", "1mod:x"])
def test_reference_must_be_module_colon_attribute(modules: Modules, ref: str) -> None:
    error = python_error(modules, ref)
    assert error.path == "pollers[0].python"
    assert str(error) == (
        "pollers[0].python: expected 'module:attribute', e.g. 'mypackage.pollers:invoices', "
        f"got {ref!r}"
    )


def test_duplicate_poller_names(modules: Modules, pollers_module: str) -> None:
    pollers = [{"python": f"{pollers_module}:invoices"}, {"python": f"{pollers_module}:same_name"}]
    error = error_of(minimal(pollers_module, modules, pollers=pollers))
    assert error.path == "pollers[1]"
    assert str(error) == "pollers[1]: duplicate poller name 'invoices' (also pollers[0])"


@pytest.mark.parametrize("pollers", [None, []])
def test_at_least_one_poller(modules: Modules, pollers: object) -> None:
    error = error_of(minimal("unused", modules, pollers=pollers))
    assert error.path == "pollers"
    assert str(error) == (
        "pollers: at least one poller is required: '- name: ...' (declarative) or "
        "'- python: module:attr'"
    )


def test_a_declarative_poller_entry_is_checked_by_its_own_keys(
    modules: Modules, pollers_module: str
) -> None:
    pollers = [{"python": f"{pollers_module}:invoices"}, {"name": "tickets", "url": "https://x"}]
    error = error_of(minimal(pollers_module, modules, pollers=pollers))
    # `url` belongs under `request:`: the declarative compiler names the key it does not know.
    assert error.path == "pollers[1].url"
    assert "unknown key" in str(error)


def test_a_poller_entry_is_declarative_or_python_not_both(
    modules: Modules, pollers_module: str
) -> None:
    pollers = [{"python": f"{pollers_module}:invoices", "name": "tickets"}]
    error = error_of(minimal(pollers_module, modules, pollers=pollers))
    assert error.path == "pollers[0]"
    assert "not both" in str(error)


def test_unknown_key_in_a_poller_entry(modules: Modules, pollers_module: str) -> None:
    pollers = [{"python": f"{pollers_module}:invoices", "pyton": "x"}]
    error = error_of(minimal(pollers_module, modules, pollers=pollers))
    assert str(error) == "pollers[0].pyton: unknown key; did you mean 'python'?"


def test_python_path_directory_must_exist(tmp_path: Path, modules: Modules) -> None:
    config = minimal("unused", modules, python_path=["missing"])
    error = error_of(config, base_dir=tmp_path)
    assert error.path == "python_path[0]"
    assert str(error) == f"python_path[0]: directory '{tmp_path / 'missing'}' does not exist"


def test_python_path_goes_first_on_sys_path(
    tmp_path: Path, modules: Modules, pollers_module: str
) -> None:
    cfg = parse_config(minimal(pollers_module, modules, python_path=["pollers"]), base_dir=tmp_path)
    assert sys.path[0] == str(modules.directory.resolve())
    assert cfg.python_path == (modules.directory.resolve(),)


# --- secrets ----------------------------------------------------------------------------------

PASSWORD = "s3cr3t-Pa55w0rd"
TOKEN = "tok-0a1b2c3d4e"


def assert_hidden(text: str, *values: str) -> None:
    for value in values:
        assert value not in text


def test_env_and_file_references_resolve(
    tmp_path: Path, modules: Modules, pollers_module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WK_SASL_PASSWORD", PASSWORD)
    monkeypatch.setenv("WK_CLIENT", "client-from-env")
    (tmp_path / "token.txt").write_text(TOKEN + "\n")
    (tmp_path / "kafka.properties").write_text(
        "# credentials\nsasl.username = svc-user-17\nsasl.password: from-properties\n"
    )
    kafka = {
        "bootstrap.servers": "b:9092",
        "sasl.password": "${env:WK_SASL_PASSWORD}",
        "sasl.username": "${file:kafka.properties:sasl.username}",
        "sasl.oauthbearer.config": "token=${file:token.txt} extra",
        "client.id": "${env:WK_CLIENT}",
        "ssl.key.password": "literal-key-password",
        "batch.size": 5,
    }
    cfg = parse_config(minimal(pollers_module, modules, kafka=kafka), base_dir=tmp_path)

    assert cfg.kafka["sasl.password"] == PASSWORD
    assert cfg.kafka["sasl.username"] == "svc-user-17"
    assert cfg.kafka["sasl.oauthbearer.config"] == f"token={TOKEN} extra"
    assert cfg.kafka["client.id"] == "client-from-env"
    secret_values = (PASSWORD, TOKEN, "svc-user-17", "client-from-env", "literal-key-password")
    for shown in (repr(cfg), str(cfg), repr(cfg.kafka), str(cfg.kafka), str(cfg.describe())):
        assert_hidden(shown, *secret_values)
    assert cfg.describe()["kafka"] == {
        "bootstrap.servers": "b:9092",
        "sasl.password": "[redacted]",
        "sasl.username": "[redacted]",
        "sasl.oauthbearer.config": "[redacted]",
        "client.id": "[redacted]",
        "ssl.key.password": "[redacted]",
        "batch.size": 5,
    }
    assert {"kafka.sasl.password", "kafka.client.id"} <= cfg.secrets


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("sasl.password", True),
        ("ssl.key.password", True),
        ("ssl.keystore.password", True),
        ("ssl.truststore.password", True),
        ("sasl.oauthbearer.client.secret", True),
        ("sasl.oauthbearer.assertion.private.key.passphrase", True),
        ("sasl.oauthbearer.assertion.private.key.pem", True),
        ("ssl.key.pem", True),
        ("sasl.jaas.config", True),
        ("sasl.oauthbearer.config", True),
        ("basic.auth.user.info", True),
        ("some.future.token", True),
        ("SASL.Password", True),
        ("sasl.username", False),
        ("sasl.mechanism", False),
        ("sasl.mechanisms", False),
        ("security.protocol", False),
        ("sasl.oauthbearer.client.id", False),
        ("sasl.oauthbearer.method", False),
        ("sasl.oauthbearer.token.endpoint.url", False),
        ("sasl.oauthbearer.assertion.private.key.file", False),
        ("sasl.kerberos.keytab", False),
        ("sasl.kerberos.principal", False),
        ("ssl.key.location", False),
        ("ssl.keystore.location", False),
        ("ssl.certificate.location", False),
        ("ssl.certificate.pem", False),
        ("ssl.ca.pem", False),
        ("client.id", False),
        ("bootstrap.servers", False),
    ],
)
def test_which_kafka_properties_are_secrets(name: str, secret: bool) -> None:
    assert is_sensitive_kafka_key(name) is secret


def test_who_and_how_are_shown_the_credentials_are_not(
    modules: Modules, pollers_module: str
) -> None:
    kafka = {
        "bootstrap.servers": "b:9092",
        "security.protocol": "sasl_plaintext",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "svc-watukuy",
        "sasl.password": "pw-canary-1",
        "ssl.key.location": "/etc/kafka/client.key",
        "ssl.key.password": "pw-canary-2",
    }
    cfg = parse_config(minimal(pollers_module, modules, kafka=kafka))
    assert cfg.describe()["kafka"] == {
        "bootstrap.servers": "b:9092",
        "security.protocol": "sasl_plaintext",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "svc-watukuy",
        "sasl.password": "[redacted]",
        "ssl.key.location": "/etc/kafka/client.key",
        "ssl.key.password": "[redacted]",
    }
    assert_hidden(repr(cfg), "pw-canary-1", "pw-canary-2")


def test_secrets_outside_kafka_are_redacted_too(
    modules: Modules, pollers_module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WK_RUNNER_ID", "runner-from-env-42")
    monkeypatch.setenv("WK_LISTEN", "10.9.8.7:7777")
    monkeypatch.setenv("WK_PREFIX", "tenant-prefix-x")
    config = minimal(
        pollers_module,
        modules,
        runner={"id": "${env:WK_RUNNER_ID}"},
        rest={"listen": "${env:WK_LISTEN}", "auth": "none"},
        topics={"prefix": "${env:WK_PREFIX}"},
    )
    cfg = parse_config(config)
    assert cfg.runner.id == "runner-from-env-42"
    assert cfg.runner.group_id == "tenant-prefix-x.runners"
    assert (cfg.rest.host, cfg.rest.port) == ("10.9.8.7", 7777)
    shown = [repr(cfg), repr(cfg.runner), repr(cfg.rest), repr(cfg.topics), str(cfg.describe())]
    for text in shown:
        assert_hidden(text, "runner-from-env-42", "10.9.8.7", "7777", "tenant-prefix-x")
    assert cfg.describe()["runner"]["id"] == "[redacted]"
    assert cfg.describe()["runner"]["group.id"] == "[redacted]"


def test_missing_env_variable_names_path_and_variable(
    modules: Modules, pollers_module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WK_NOT_SET", raising=False)
    kafka = {"bootstrap.servers": "b:9092", "sasl.password": "${env:WK_NOT_SET}"}
    error = error_of(minimal(pollers_module, modules, kafka=kafka))
    assert error.path == "kafka.sasl.password"
    assert str(error) == "kafka.sasl.password: environment variable 'WK_NOT_SET' is not set"


def test_missing_secret_file(tmp_path: Path, modules: Modules, pollers_module: str) -> None:
    kafka = {"bootstrap.servers": "b:9092", "sasl.password": "${file:nope.txt}"}
    error = error_of(minimal(pollers_module, modules, kafka=kafka), base_dir=tmp_path)
    assert str(error) == f"kafka.sasl.password: secret file '{tmp_path / 'nope.txt'}' not found"


def test_missing_properties_key(tmp_path: Path, modules: Modules, pollers_module: str) -> None:
    (tmp_path / "p.properties").write_text(f"other={PASSWORD}\n")
    kafka = {"bootstrap.servers": "b:9092", "sasl.password": "${file:p.properties:password}"}
    error = error_of(minimal(pollers_module, modules, kafka=kafka), base_dir=tmp_path)
    assert str(error) == (
        f"kafka.sasl.password: key 'password' not found in properties file "
        f"'{tmp_path / 'p.properties'}'"
    )
    assert_hidden(str(error), PASSWORD)


def test_unknown_provider(modules: Modules, pollers_module: str) -> None:
    kafka = {"bootstrap.servers": "b:9092", "sasl.password": "${vault:kv/kafka}"}
    error = error_of(minimal(pollers_module, modules, kafka=kafka))
    assert str(error) == (
        "kafka.sasl.password: unknown config provider 'vault'; "
        "use ${env:NAME}, ${file:PATH} or ${file:PATH:KEY}"
    )


@pytest.mark.parametrize(
    ("section", "value", "path"),
    [
        ("topics", {"prefix": "${env:WK_SECRET}"}, "topics.prefix"),
        ("runner", {"id": "${env:WK_SECRET}"}, "runner.id"),
        ("runner", {"id": "r", "session.timeout": "${env:WK_SECRET}"}, "runner.session.timeout"),
        ("rest", {"listen": "${env:WK_SECRET}"}, "rest.listen"),
        ("budgets", {"vendor": {"rate": "${env:WK_SECRET}"}}, "budgets.vendor.rate"),
        ("pollers", [{"python": "${env:WK_SECRET}"}], "pollers[0].python"),
    ],
)
def test_invalid_secret_values_are_not_echoed(
    modules: Modules,
    pollers_module: str,
    monkeypatch: pytest.MonkeyPatch,
    section: str,
    value: object,
    path: str,
) -> None:
    secret = "not valid: hunter2 !"
    monkeypatch.setenv("WK_SECRET", secret)
    error = error_of(minimal(pollers_module, modules, **{section: value}))
    assert error.path == path
    assert "[redacted]" in str(error)
    assert_hidden(str(error), secret, "hunter2")
    assert_hidden(repr(error), secret, "hunter2")


def test_file_content_keeps_inner_newlines(
    tmp_path: Path, modules: Modules, pollers_module: str
) -> None:
    (tmp_path / "ca.pem").write_text("line1\nline2\n\n")
    kafka = {"bootstrap.servers": "b:9092", "ssl.ca.pem": "${file:ca.pem}"}
    cfg = parse_config(minimal(pollers_module, modules, kafka=kafka), base_dir=tmp_path)
    assert cfg.kafka["ssl.ca.pem"] == "line1\nline2\n"


def test_load_config_resolves_files_next_to_it(
    tmp_path: Path, modules: Modules, pollers_module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "password").write_text(PASSWORD + "\n")
    (tmp_path / "config.yaml").write_text(
        textwrap.dedent(f"""
            python_path: [pollers]
            kafka:
              bootstrap.servers: b:9092
              sasl.password: ${{file:secrets/password}}
            runner: {{id: r1}}
            pollers: [{{python: "{pollers_module}:invoices"}}]
            """)
    )
    monkeypatch.chdir(Path("/"))
    cfg = load_config(str(tmp_path / "config.yaml"))
    assert cfg.kafka["sasl.password"] == PASSWORD
    assert_hidden(repr(cfg), PASSWORD)


# --- the file ---------------------------------------------------------------------------------


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(tmp_path / "nope.yaml")
    assert raised.value.path == "--config"
    assert str(raised.value) == f"--config: config file '{tmp_path / 'nope.yaml'}' not found"


def test_yaml_syntax_error_names_file_line_and_column(tmp_path: Path) -> None:
    file = tmp_path / "config.yaml"
    file.write_text("kafka:\n  bootstrap.servers: b:9092\n runner: {id: r1}\n")
    with pytest.raises(ConfigError) as raised:
        load_config(file)
    assert raised.value.path == str(file)
    assert str(raised.value).startswith(f"{file}: invalid YAML at line 3, column 2: ")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- kafka\n- runner\n", "the top level must be a mapping of keys, got a list"),
        ("", "the config file is empty; expected kafka, runner and pollers"),
    ],
)
def test_top_level_must_be_a_mapping(tmp_path: Path, text: str, message: str) -> None:
    file = tmp_path / "config.yaml"
    file.write_text(text)
    with pytest.raises(ConfigError) as raised:
        load_config(file)
    assert str(raised.value) == f"{file}: {message}"


def test_the_python_example_loads_the_simulator_poller() -> None:
    config = load_config(Path(__file__).parents[2] / "config" / "python.yaml")
    assert [p.name for p in config.pollers] == ["invoices"]


# --- .properties files ------------------------------------------------------------------------


def test_properties_format() -> None:
    text = (
        "# comment\n"
        "! also a comment\n"
        "a=1\n"
        "b : two words \n"
        "c 3\n"
        "   d=indented\n"
        "long = first \\\n"
        "       second\n"
        "esc=tab\\there\\u0041\\\\\n"
        "key\\=with\\:seps = v\n"
        "empty=\n"
        "a=overridden\n"
    )
    assert parse_properties(text) == {
        "a": "overridden",
        "b": "two words ",
        "c": "3",
        "d": "indented",
        "long": "first second",
        "esc": "tab\there" + "A\\",
        "key=with:seps": "v",
        "empty": "",
    }


def test_schema_registry_settings_keep_the_credentials_out_of_sight() -> None:
    config = parse_config(
        {
            "kafka": {"bootstrap.servers": "127.0.0.1:9092"},
            "runner": {"id": "r1"},
            "schema.registry": {"url": "http://registry:8081", "basic.auth.user.info": "u:pw-9x7"},
            "pollers": [{"python": "integration.pollers:invoices"}],
        }
    )
    assert config.schema_registry.url == "http://registry:8081"
    assert config.schema_registry.basic_auth == "u:pw-9x7"
    assert "pw-9x7" not in repr(config) + str(config.describe())


@pytest.mark.parametrize(
    ("registry", "path"),
    [
        ({"ur": "http://x"}, "schema.registry.ur"),
        ({"url": "registry:8081"}, "schema.registry.url"),
        ({"basic.auth.user.info": "u:p"}, "schema.registry.basic.auth.user.info"),
        (
            {"url": "http://x", "basic.auth.user.info": "nopassword"},
            "schema.registry.basic.auth.user.info",
        ),
    ],
)
def test_bad_schema_registry_settings_name_the_field(registry: dict[str, str], path: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(
            {
                "kafka": {"bootstrap.servers": "127.0.0.1:9092"},
                "runner": {"id": "r1"},
                "schema.registry": registry,
                "pollers": [{"python": "integration.pollers:invoices"}],
            }
        )
    assert raised.value.path == path
