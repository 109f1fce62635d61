"""The class-data archive the harness's Kafka JVMs share: only an archive a JVM can map is put
in place, a JVM given the flags always starts, and ``WATUKUY_KAFKA_CDS=0`` turns it off.

These run a real JVM (``java -version``, a tenth of a second), not Kafka."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from integration.kafka import jvm

pytestmark = pytest.mark.unit


@pytest.fixture
def libs(tmp_path: Path) -> Path:
    folder = tmp_path / "kafka-x" / "libs"
    folder.mkdir(parents=True)
    return folder


def _java(libs: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [jvm.java(), *flags, "-cp", f"{libs}/*", "-version"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_a_recorded_archive_is_put_in_place_and_then_mapped(libs: Path) -> None:
    assert jvm.sharing_flags(libs) == []  # nothing trained yet: JVMs start as before

    with jvm.training(libs) as partial:
        assert partial is not None
        assert _java(libs, *jvm.recording_flags(partial)).returncode == 0

    archive = jvm.archive_path(libs)
    assert archive.exists()
    assert [path.name for path in archive.parent.glob("*.partial")] == []
    flags = jvm.sharing_flags(libs)
    assert f"-XX:SharedArchiveFile={archive}" in flags
    assert _java(libs, *flags, "-Xshare:on").returncode == 0  # on: fail rather than fall back
    with jvm.training(libs) as again:
        assert again is None  # trained once per Kafka and JDK


def test_a_truncated_recording_is_thrown_away(libs: Path) -> None:
    # A JVM killed while writing leaves such a file; mapping one crashes the JVM (SIGBUS).
    with jvm.training(libs) as partial:
        assert partial is not None
        assert _java(libs, *jvm.recording_flags(partial)).returncode == 0
        whole = partial.read_bytes()
        partial.chmod(0o644)
        partial.write_bytes(whole[: len(whole) // 2])

    assert not jvm.archive_path(libs).exists()
    assert list(jvm.archive_path(libs).parent.glob("*.partial")) == []
    assert jvm.sharing_flags(libs) == []


def test_an_archive_of_another_class_path_falls_back_quietly(libs: Path, tmp_path: Path) -> None:
    other = tmp_path / "other" / "libs"
    other.mkdir(parents=True)
    with jvm.training(other) as partial:
        assert partial is not None
        _java(other, *jvm.recording_flags(partial))
    archive = jvm.archive_path(other)
    assert archive.exists()

    started = _java(libs, f"-XX:SharedArchiveFile={archive}", "-Xshare:auto", jvm._QUIET)

    assert started.returncode == 0
    assert "warning" not in started.stderr.lower()


def test_off_switch(libs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with jvm.training(libs) as partial:
        assert partial is not None
        _java(libs, *jvm.recording_flags(partial))
    assert jvm.sharing_flags(libs) != []

    monkeypatch.setenv("WATUKUY_KAFKA_CDS", "0")

    assert jvm.sharing_flags(libs) == []
    with jvm.training(libs) as partial:
        assert partial is None
