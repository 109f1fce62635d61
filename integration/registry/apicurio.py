"""A real Confluent-compatible schema registry (Apicurio Registry) for tests and the demo.

    python -m integration.registry start     # fetch once, start, print the Confluent API URL
    python -m integration.registry status
    python -m integration.registry stop
    python -m integration.registry fetch     # only download (and prepare) the registry

Apicurio Registry comes from Maven Central (``io.apicurio:apicurio-registry-app``, classifier
``all``, a tarball holding a runnable Quarkus application) through the small pom beside this file,
and is cached in ``$WATUKUY_CACHE`` (default ``~/.cache/watukuy``) so only the first run downloads
anything. It runs with its default storage, an in-memory H2 database: every start is empty. Its
Confluent Schema Registry API is at ``<url>/apis/ccompat/v7`` — that is the ``schema.registry.url``
to give a Confluent client. The running registry is described in ``<dir>/registry.json`` (default
dir ``.watukuy/registry`` in the repository), which is where the test fixture finds it.

Apicurio 3.x needs Java 21 or newer; the first suitable JDK of ``$WATUKUY_REGISTRY_JAVA``,
``$JAVA_HOME``, ``java`` on the PATH and ``/usr/lib/jvm/*`` is used. Without one, the last 2.x
release (Java 17) is used instead. ``$WATUKUY_APICURIO_VERSION`` pins a version. On Java 25+ the
first fetch also records an AOT cache (JEP 514) in one training run, which roughly halves later
start times (8 s to 4 s here); ``WATUKUY_REGISTRY_AOT=0`` turns that off.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

from integration.processes import alive, end_group, free_port, signal_group

APICURIO_VERSION = "3.3.3"  # needs Java 21+
FALLBACK_VERSION = "2.6.13.Final"  # runs on Java 17, used when no Java 21+ is found
HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
DEFAULT_DIR = REPO / ".watukuy" / "registry"
CCOMPAT_PATH = "/apis/ccompat/v7"
READY_TIMEOUT = 120.0
STOP_TIMEOUT = 30.0
JVM_OPTIONS = [
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",  # C1 only: faster start; a test registry never gets hot
    "-Djava.awt.headless=true",
]


@dataclass(frozen=True)
class RunningRegistry:
    url: str
    pid: int
    dir: str

    @property
    def confluent_url(self) -> str:
        """The Confluent-compatible API, i.e. what a client takes as ``schema.registry.url``."""
        return self.url + CCOMPAT_PATH

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])


@dataclass(frozen=True)
class Release:
    version: str
    java: str
    java_major: int


def cache_root() -> Path:
    return Path(os.environ.get("WATUKUY_CACHE") or str(Path.home() / ".cache" / "watukuy"))


def cache_dir(version: str) -> Path:
    return cache_root() / f"apicurio-registry-{version}"


def required_java(version: str) -> int:
    return 21 if int(version.split(".", 1)[0]) >= 3 else 17


def java_major(java: str) -> int | None:
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2)) if major == 1 and match.group(2) else major


def _java_candidates() -> list[str]:
    explicit = os.environ.get("WATUKUY_REGISTRY_JAVA")
    if explicit:
        return [explicit]
    found: list[str] = []
    if os.environ.get("JAVA_HOME"):
        found.append(str(Path(os.environ["JAVA_HOME"]) / "bin" / "java"))
    on_path = shutil.which("java")
    if on_path:
        found.append(on_path)
    jvms = Path("/usr/lib/jvm")
    if jvms.is_dir():
        found.extend(str(home / "bin" / "java") for home in sorted(jvms.iterdir(), reverse=True))
    return list(dict.fromkeys(found))


def find_java(minimum: int) -> tuple[str, int] | None:
    """The first candidate JDK whose major version is at least ``minimum``."""
    for java in _java_candidates():
        major = java_major(java)
        if major is not None and major >= minimum:
            return java, major
    return None


def choose_release() -> Release:
    pinned = os.environ.get("WATUKUY_APICURIO_VERSION")
    for version in [pinned] if pinned else [APICURIO_VERSION, FALLBACK_VERSION]:
        found = find_java(required_java(version))
        if found is not None:
            if version != (pinned or APICURIO_VERSION):
                print(
                    f"registry: no Java {required_java(APICURIO_VERSION)}+ found; "
                    f"using Apicurio Registry {version} on Java {found[1]}",
                    file=sys.stderr,
                )
            return Release(version, *found)
    wanted = required_java(pinned or FALLBACK_VERSION)
    raise SystemExit(
        f"registry: Java {wanted}+ is needed to run Apicurio Registry "
        f"(set WATUKUY_REGISTRY_JAVA or JAVA_HOME); tried {', '.join(_java_candidates()) or 'none'}"
    )


def fetch(version: str) -> Path:
    """Download and unpack Apicurio Registry once; returns its cache directory."""
    target = cache_dir(version)
    marker = target / ".complete"
    if marker.exists():
        return target
    if shutil.which("mvn") is None:
        raise SystemExit("registry: Maven (mvn) is needed to fetch Apicurio Registry; install it")
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    download = staging / "download"
    cmd = [
        "mvn", "-q", "-B", "--no-transfer-progress", "-Dstyle.color=never",
        "-f", str(HERE / "pom.xml"),
        f"-Dapicurio.version={version}",
        "dependency:copy-dependencies",
        f"-DoutputDirectory={download}",
    ]  # fmt: skip
    print(f"registry: fetching Apicurio Registry {version} from Maven Central ...", file=sys.stderr)
    subprocess.run(cmd, check=True)
    tarballs = sorted(download.glob("*.tar.gz"))
    if len(tarballs) != 1:
        raise RuntimeError(f"registry: expected one tarball in {download}, found {tarballs}")
    with tarfile.open(tarballs[0]) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(staging / "app", filter="data")
        else:  # Python < 3.11.4
            tar.extractall(staging / "app")
    shutil.rmtree(download)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    marker.write_text(version)
    return target


def launcher(app: Path) -> Path:
    """3.x ships a Quarkus fast-jar (``quarkus-run.jar``), 2.x an uber ``*-runner.jar``."""
    fast = app / "quarkus-run.jar"
    if fast.exists():
        return fast
    runners = sorted(app.glob("*-runner.jar"))
    if not runners:
        raise RuntimeError(f"registry: no quarkus-run.jar or *-runner.jar in {app}")
    return runners[0]


def settings(port: int, management_port: int) -> dict[str, str]:
    return {
        "quarkus.http.host": "127.0.0.1",
        "quarkus.http.port": str(port),
        # 3.x also opens a management interface (health, metrics), by default on 0.0.0.0:9000.
        "quarkus.management.host": "127.0.0.1",
        "quarkus.management.port": str(management_port),
        # Let tests delete what they registered (ccompat DELETE /subjects/...).
        "apicurio.rest.deletion.group.enabled": "true",
        "apicurio.rest.deletion.artifact.enabled": "true",
        "apicurio.rest.deletion.artifact-version.enabled": "true",
        "registry.rest.artifact.deletion.enabled": "true",  # the 2.x name
        "quarkus.otel.sdk.disabled": "true",
    }


def java_command(release: Release, home: Path, port: int, management_port: int) -> list[str]:
    aot = home / "app.aot"
    return [
        release.java,
        *JVM_OPTIONS,
        *([f"-XX:AOTCache={aot}"] if aot.exists() and _aot_wanted(release) else []),
        *(f"-D{key}={value}" for key, value in settings(port, management_port).items()),
        "-jar",
        str(launcher(home / "app")),
    ]


def prepare(release: Release) -> Path:
    """Fetch the release and, on Java 25+, record its AOT cache once (best effort)."""
    home = fetch(release.version)
    if _aot_wanted(release) and not (home / "app.aot").exists() and not (home / ".no-aot").exists():
        _train_aot_cache(release, home)
    return home


def _aot_wanted(release: Release) -> bool:
    return release.java_major >= 25 and os.environ.get("WATUKUY_REGISTRY_AOT", "1") != "0"


def _train_aot_cache(release: Release, home: Path) -> None:
    """Run the registry once with -XX:AOTCacheOutput; the JVM writes the cache as it exits."""
    print("registry: recording an AOT cache for faster starts (once) ...", file=sys.stderr)
    partial = home / "app.aot.partial"
    partial.unlink(missing_ok=True)
    port = free_port()
    cmd = java_command(release, home, port, free_port())
    cmd.insert(1 + len(JVM_OPTIONS), f"-XX:AOTCacheOutput={partial}")
    with open(home / "aot-training.log", "wb") as out:
        proc = subprocess.Popen(
            cmd, cwd=home, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        try:
            url = f"http://127.0.0.1:{port}"
            wait_ready(url, proc)
            _exercise(url + CCOMPAT_PATH)
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=300)  # assembling the cache takes a while
        except BaseException:
            signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
            partial.unlink(missing_ok=True)
            raise
    if partial.exists() and partial.stat().st_size > 0:
        partial.rename(home / "app.aot")
    else:  # don't try again on every start
        (home / ".no-aot").write_text(f"exit code {proc.returncode}; see aot-training.log\n")


def _exercise(api: str) -> None:
    """Register and read back one schema so the cache also covers the Confluent API paths."""
    schema = {"type": "record", "name": "Warmup", "fields": [{"name": "a", "type": "long"}]}
    body = json.dumps({"schema": json.dumps(schema)}).encode()
    request = urllib.request.Request(
        f"{api}/subjects/warmup-value/versions",
        data=body,
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        schema_id = json.loads(response.read())["id"]
    for path in (f"/schemas/ids/{schema_id}", "/subjects/warmup-value/versions/latest"):
        with urllib.request.urlopen(api + path, timeout=30) as response:
            response.read()


def read_running(runtime: Path = DEFAULT_DIR) -> RunningRegistry | None:
    """The registry described in ``runtime``, if its process is still alive."""
    try:
        info = json.loads((runtime / "registry.json").read_text())
    except (OSError, ValueError):
        return None
    registry = RunningRegistry(**info)
    return registry if alive(registry.pid) else None


def start(runtime: Path = DEFAULT_DIR) -> RunningRegistry:
    """Start an empty registry in ``runtime`` (or return the one already running there)."""
    existing = read_running(runtime)
    if existing is not None:
        return existing
    release = choose_release()
    home = prepare(release)
    shutil.rmtree(runtime, ignore_errors=True)
    runtime.mkdir(parents=True)
    port = free_port()
    with open(runtime / "stdout.log", "ab") as out:
        proc = subprocess.Popen(
            java_command(release, home, port, free_port()),
            cwd=runtime,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # the registry outlives this script; stop() ends its group
        )
    registry = RunningRegistry(url=f"http://127.0.0.1:{port}", pid=proc.pid, dir=str(runtime))
    (runtime / "registry.json").write_text(json.dumps(asdict(registry)))
    try:
        wait_ready(registry.url, proc)
    except BaseException:
        stop(runtime)
        raise
    return registry


def wait_ready(url: str, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Ready means the Confluent API lists subjects (HTTP 200), not merely an open port."""
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"registry exited with code {proc.returncode}; see its stdout.log")
        try:
            with urllib.request.urlopen(url + CCOMPAT_PATH + "/subjects", timeout=2) as response:
                if response.status == 200:
                    return
        except (OSError, urllib.error.URLError):  # not up yet: retry until the deadline
            pass
        time.sleep(0.2)
    raise TimeoutError(f"registry at {url} did not answer within {READY_TIMEOUT:.0f}s")


def stop(runtime: Path = DEFAULT_DIR) -> bool:
    """Stop the registry (TERM, then KILL after 30 s) and remove ``runtime``; True if it ran."""
    try:
        info = json.loads((runtime / "registry.json").read_text())
    except (OSError, ValueError):
        return False
    pid = int(info["pid"])
    was_running = alive(pid)
    if was_running:
        end_group(pid, signal.SIGTERM, STOP_TIMEOUT, step=0.2)
    shutil.rmtree(runtime, ignore_errors=True)
    return was_running


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m integration.registry", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument("command", choices=["fetch", "start", "stop", "status"])
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="runtime directory")
    args = parser.parse_args(argv)
    runtime: Path = args.dir.resolve()
    if args.command == "fetch":
        release = choose_release()
        began = time.monotonic()
        home = prepare(release)
        print(f"registry: ready to run in {time.monotonic() - began:.1f}s", file=sys.stderr)
        print(home)
    elif args.command == "start":
        began = time.monotonic()
        registry = start(runtime)
        print(f"registry: ready in {time.monotonic() - began:.1f}s", file=sys.stderr)
        print(registry.confluent_url)
    elif args.command == "stop":
        print(
            "registry: stopped" if stop(runtime) else "registry: was not running", file=sys.stderr
        )
    else:
        running = read_running(runtime)
        if running is None:
            print("registry: not running")
            return 1
        print(
            f"registry: running pid={running.pid} url={running.url} "
            f"confluent_url={running.confluent_url}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
