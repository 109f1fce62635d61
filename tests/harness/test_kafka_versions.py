"""``WATUKUY_KAFKA_VERSION`` picks the Kafka release of the test harness: a bad value stops every
entry point at once with a message naming the variable and the supported lines, and each line
is fetched, formatted and logged as its release needs (integration/kafka/versions.py). No
broker is started here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from pathlib import Path

import pytest

from integration.faults.report import Result
from integration.faults.report import table as report_table
from integration.kafka import broker, matrix, tools
from integration.kafka.versions import (
    KAFKA_VERSION,
    LINES,
    UnsupportedKafkaVersion,
    kafka_line,
    kafka_version,
    matrix_versions,
)

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
OLDEST = LINES[0].matrix
SUPPORTED = "supported: 3.7.x-3.8.x, 3.9.x, 4.0.x-4.4.x"


Release = Callable[[str], None]


@pytest.fixture
def release(monkeypatch: pytest.MonkeyPatch) -> Release:
    """Set ``WATUKUY_KAFKA_VERSION`` for one test: ``release("3.9.1")``."""

    def use(version: str) -> None:
        monkeypatch.setenv("WATUKUY_KAFKA_VERSION", version)

    return use


def test_unset_or_empty_runs_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WATUKUY_KAFKA_VERSION", raising=False)
    assert kafka_version() == KAFKA_VERSION == "4.4.0"
    monkeypatch.setenv("WATUKUY_KAFKA_VERSION", " ")
    assert kafka_version() == "4.4.0"


@pytest.mark.parametrize("version", ["3.7.0", "3.8.1", "3.9.1", "4.0.0", "4.4.0"])
def test_a_release_of_a_supported_line_is_taken(release: Release, version: str) -> None:
    release(version)
    assert kafka_version() == version
    assert kafka_line().covers(version)


@pytest.mark.parametrize("version", ["2.8.2", "3.6.2", "4.5.0", "5.0.0"])
def test_an_unsupported_release_is_refused_naming_the_variable_and_the_lines(
    release: Release,
    version: str,
) -> None:
    release(version)
    with pytest.raises(UnsupportedKafkaVersion) as refused:
        kafka_version()
    message = str(refused.value)
    assert f"WATUKUY_KAFKA_VERSION={version}" in message
    assert "not supported" in message and SUPPORTED in message


@pytest.mark.parametrize("version", ["4.4", "latest", "v4.4.0", "4.4.0-rc1", "4.4.0.1", "4.x"])
def test_a_malformed_release_is_refused_with_the_form_it_wants(
    release: Release, version: str
) -> None:
    release(version)
    with pytest.raises(UnsupportedKafkaVersion) as refused:
        kafka_version()
    message = str(refused.value)
    assert f"WATUKUY_KAFKA_VERSION={version!r}" in message
    assert "MAJOR.MINOR.PATCH" in message and SUPPORTED in message


def test_the_refusal_is_an_exit_with_the_message_alone() -> None:
    """Uncaught, a command prints the message and exits 1, with no traceback and before it
    fetches or starts anything."""
    env = dict(os.environ, WATUKUY_KAFKA_VERSION="3.6.2")
    done = subprocess.run(
        [sys.executable, "-m", "integration.kafka.broker", "status"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.startswith("WATUKUY_KAFKA_VERSION=3.6.2: Kafka 3.6.2 is not supported")
    assert "Traceback" not in done.stderr


def test_a_test_session_with_a_bad_release_stops_before_its_first_test() -> None:
    env = dict(os.environ, WATUKUY_KAFKA_VERSION="4.4")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/harness/test_broker_cluster_id.py"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == pytest.ExitCode.USAGE_ERROR
    assert "WATUKUY_KAFKA_VERSION='4.4' is not a Kafka release" in done.stderr
    assert "passed" not in done.stdout


# -- what each line is run with -------------------------------------------------------------


def test_3_9_logs_through_log4j_1_with_its_own_config(release: Release, tmp_path: Path) -> None:
    release("3.9.1")
    written = broker.write_log_config(tmp_path, tmp_path / "server.log")
    command = broker.java_command(tmp_path / "libs", tmp_path, "kafka.Kafka", "server.properties")

    assert written == tmp_path / "log4j.properties"
    assert f"log4j.appender.file.File={tmp_path / 'server.log'}" in written.read_text()
    assert f"-Dlog4j.configuration=file:{written}" in command
    assert not any("log4j2" in arg for arg in command)


def test_4_x_logs_through_log4j2(release: Release, tmp_path: Path) -> None:
    release("4.4.0")
    written = broker.write_log_config(tmp_path, tmp_path / "server.log")
    command = broker.java_command(tmp_path / "libs", tmp_path, "kafka.Kafka", "server.properties")

    assert written == tmp_path / "log4j2.properties"
    assert f"appender.file.fileName = {tmp_path / 'server.log'}" in written.read_text()
    assert f"-Dlog4j2.configurationFile={written}" in command
    assert command[-3:] == [f"{tmp_path / 'libs'}/*", "kafka.Kafka", "server.properties"]


@pytest.mark.parametrize("version", ["3.9.1", "4.4.0"])
def test_a_single_node_is_formatted_standalone_and_a_cluster_with_static_voters(
    release: Release,
    version: str,
    tmp_path: Path,
) -> None:
    release(version)
    props = tmp_path / "server.properties"
    single = kafka_line().format_args("id", props)
    settings = broker.node_settings(tmp_path, 9092, 9093)

    assert single == ["format", "--standalone", "-t", "id", "-c", str(props)]
    cluster = kafka_line().format_args("id", props, single=False)
    assert cluster == ["format", "-t", "id", "-c", str(props)]
    assert settings["controller.quorum.bootstrap.servers"] == "127.0.0.1:9093"
    assert "controller.quorum.voters" not in settings


@pytest.mark.parametrize("version", ["3.7.2", "3.8.1"])
def test_before_kip_853_even_a_single_node_names_its_static_voter(
    release: Release, version: str, tmp_path: Path
) -> None:
    """3.7 and 3.8's storage tool rejects ``--standalone``."""
    release(version)
    props = tmp_path / "server.properties"
    settings = broker.node_settings(tmp_path, 9092, 9093)

    assert kafka_line().format_args("id", props) == ["format", "-t", "id", "-c", str(props)]
    assert settings["controller.quorum.voters"] == "1@127.0.0.1:9093"
    assert "controller.quorum.bootstrap.servers" not in settings


def test_share_group_settings_only_where_the_broker_knows_them(
    release: Release, tmp_path: Path
) -> None:
    release("3.9.1")
    on_3 = broker.node_settings(tmp_path, 9092, 9093)
    release("4.4.0")
    on_4 = broker.node_settings(tmp_path, 9092, 9093)

    assert not any(key.startswith("share.") for key in on_3)
    assert on_4["share.coordinator.state.topic.replication.factor"] == "1"
    # Everything else a test relies on is the same on both lines.
    assert {k: v for k, v in on_4.items() if not k.startswith("share.")} == on_3


def test_the_pom_has_a_profile_for_every_lines_logging_binding() -> None:
    """broker.py fetches with ``-Dkafka.logging=<binding>``; a binding without its profile
    would fetch a broker that runs but logs nothing."""
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    pom = ElementTree.parse(REPO / "integration" / "kafka" / "pom.xml").getroot()
    activated = {
        profile.findtext("m:id", namespaces=ns): profile.findtext(
            "m:activation/m:property/m:value", namespaces=ns
        )
        for profile in pom.iterfind("m:profiles/m:profile", ns)
    }
    for line in LINES:
        assert activated.get(line.logging) == line.logging, line.name


# -- where each release lives ---------------------------------------------------------------


def test_each_release_has_a_cache_dir_of_its_own(
    release: Release, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("WATUKUY_CACHE", str(tmp_path))
    release("3.9.1")
    old = broker.cache_dir()
    (old / "tools").mkdir(parents=True)
    (old / "tools" / "kafka-tools-3.9.1.jar").touch()
    (old / "libs").mkdir()
    (old / ".complete").write_text("3.9.1")
    release("4.4.0")

    assert old == tmp_path / "kafka-3.9.1"
    assert broker.cache_dir() == tmp_path / "kafka-4.4.0"
    release("3.9.1")
    # Fetched once: the cached release is used without Maven.
    assert broker.fetch_jars() == old / "libs"
    assert tools.tools_jar() == old / "tools" / "kafka-tools-3.9.1.jar"


def test_a_running_broker_of_another_release_is_refused(release: Release, tmp_path: Path) -> None:
    """Tests run on a broker left up by a demo of another release would say nothing of the
    release asked for."""
    running = {"bootstrap": "127.0.0.1:1", "controller": "127.0.0.1:2", "pid": os.getpid()}
    running |= {"dir": str(tmp_path), "version": "4.4.0"}  # this process stands in for it
    (tmp_path / "broker.json").write_text(json.dumps(running))
    release("3.9.1")

    refusal = r"runs Kafka 4\.4\.0, but WATUKUY_KAFKA_VERSION asks for 3\.9\.1"
    with pytest.raises(SystemExit, match=refusal):
        broker.start(tmp_path)
    release("4.4.0")
    assert broker.start(tmp_path).version == "4.4.0"  # the same release is reused as before


# -- the matrix -----------------------------------------------------------------------------


def test_the_matrix_runs_the_oldest_supported_line_and_the_default() -> None:
    assert matrix_versions() == ["3.7.2", "4.4.0"]


def test_a_matrix_run_gets_its_release_and_only_its_own_broker(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("WATUKUY_BOOTSTRAP", "elsewhere:9092")
    env = matrix.suite_env("3.9.1", "127.0.0.1:4242")
    assert env["WATUKUY_KAFKA_VERSION"] == "3.9.1"
    assert env["WATUKUY_BOOTSTRAP"] == "127.0.0.1:4242"
    assert "WATUKUY_BOOTSTRAP" not in matrix.suite_env("3.9.1", None)
    faults = matrix.suite_command("faults", tmp_path)
    assert faults[-2:] == ["--workdir", str(tmp_path / "faults")]


def test_the_matrix_refuses_a_bad_release_before_it_runs_anything(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedKafkaVersion, match=r"--versions=3\.6\.2: Kafka 3\.6\.2"):
        matrix.main(["--versions", f"{OLDEST},3.6.2", "--workdir", str(tmp_path)])
    assert not any(tmp_path.iterdir())


def test_the_matrix_table_counts_the_fault_suites_scenarios(tmp_path: Path) -> None:
    """Read from the table ``python -m integration.faults`` prints, as it prints it."""
    rows = [
        Result("zombie", 1, 120, 0, 0, 3, 2.5, True),
        Result("broker-outage", 1, 80, 0, 2, 0, None, False, ["2 events lost"]),
    ]
    (tmp_path / "output.log").write_text("faults: zombie ...\n" + report_table(rows) + "\n")

    detail, failed = matrix.summary("faults", tmp_path, 1)

    assert (detail, failed) == ("1 of 2 scenarios ok", ["broker-outage"])
    assert matrix.summary("faults", tmp_path, None) == ("timed out", [])
