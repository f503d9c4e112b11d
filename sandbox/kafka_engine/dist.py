"""Where a real Apache Kafka comes from: the jars `fetch` copies from Maven Central into a cache
outside git, or an operator's own unpacked distribution (`--kafka-home DIR`), and the Java that
runs them.

Kafka is fetched as Maven artifacts by the pom kept beside this module (never a tarball). The
cache is `$KREASSIGN_KAFKA_CACHE`, else `$XDG_CACHE_HOME/kreassign/kafka`, else
`~/.cache/kreassign/kafka`, with one folder per version holding `libs/` and a manifest written
last, so a fetch cut short is never taken for a complete one.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kreassign.cluster.errors import InputError
from kreassign.cluster.java import find_java, java_version

DEFAULT_VERSION = "4.4.0"
"""the release `sandbox start --engine kafka` runs and the live tests judge against by default"""
MATRIX: tuple[str, ...] = (DEFAULT_VERSION, "3.9.2")
"""the releases `make test` runs: the newest 4.x that works, and 3.9 (before the KIP-896 removals)"""
ENV_CACHE = "KREASSIGN_KAFKA_CACHE"
MANIFEST = "kafka.json"
POM = Path(__file__).with_name("pom.xml")
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
JMX_EXPORTER_VERSION = "1.0.1"
"""io.prometheus.jmx:jmx_prometheus_javaagent, the newest on Maven Central"""
JMX_EXPORTER_POM = Path(__file__).with_name("jmx-exporter-pom.xml")
JMX_EXPORTER_RULES = Path(__file__).with_name("jmx_exporter.yaml")
JMX_EXPORTER_DIR = "jmx-exporter"
JMX_EXPORTER_JAR = f"jmx_prometheus_javaagent-{JMX_EXPORTER_VERSION}.jar"
CLIENT_TELEMETRY_DIR = "client-telemetry"
CLIENT_TELEMETRY_JAR = "kreassign-client-telemetry.jar"
CLIENT_TELEMETRY_SOURCE = Path(__file__).with_name("telemetry")
"""the KIP-714 receiver's Maven project (pom.xml and its one Java class), built into the cache"""
CLIENT_TELEMETRY_CLASS = "kreassign.telemetry.PrometheusClientTelemetry"
CLIENT_TELEMETRY_PORT = "kreassign.telemetry.port"
"""the broker setting the receiver reads its /metrics port from"""
_VERSION = re.compile(r"^\d+\.\d+\.\d+$")
_BROKER_JAR = re.compile(r"^kafka_2\.1[23]-(\d+\.\d+\.\d+)\.jar$")


def check_version(version: str) -> str:
    """A Kafka release number as Maven names it (`4.1.2`), checked.

    Raises:
        InputError: not MAJOR.MINOR.PATCH, or older than 3.9.
    """
    if not _VERSION.match(version):
        raise InputError(f"'{version}' is not a Kafka release: give MAJOR.MINOR.PATCH, e.g. {DEFAULT_VERSION}")
    if _key(version) < (3, 9):
        raise InputError(f"Kafka {version} is too old for the kafka engine: it runs KRaft clusters of Kafka 3.9 "
                         "and later")
    return version


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def java_needed(version: str) -> int:
    """The oldest Java that runs a Kafka release's brokers (Kafka 4.0 moved brokers to Java 17)."""
    return 17 if _key(version) >= (4, 0) else 11


def cache_root() -> Path:
    explicit = os.environ.get(ENV_CACHE)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kreassign" / "kafka"


@dataclass(frozen=True)
class KafkaDist:
    """The jars of one Kafka release and where they came from."""

    version: str
    libs: Path
    origin: str
    """`fetched` (the Maven cache) or the --kafka-home folder"""

    @property
    def classpath(self) -> str:
        return str(self.libs / "*")

    @property
    def log4j2(self) -> bool:
        """True when the jars log through Log4j 2 (Kafka 4.x); else reload4j (Kafka 3.9)."""
        return any(self.libs.glob("log4j-slf4j*-impl-*.jar")) or (
            any(self.libs.glob("log4j-core-*.jar")) and not any(self.libs.glob("slf4j-reload4j-*.jar")))

    @property
    def min_java(self) -> int:
        return java_needed(self.version)


def from_kafka_home(home: Path) -> KafkaDist:
    """An unpacked Kafka distribution (`kafka_2.13-4.1.2/`, with `libs/`), as operators have.

    Raises:
        InputError: no such folder, or no Kafka broker jar in its libs/.
    """
    libs = home / "libs"
    if not libs.is_dir():
        raise InputError(f"--kafka-home {home}: no libs/ folder there; give the folder a Kafka release unpacks "
                         "into (it holds bin/, config/ and libs/)")
    versions = sorted({m.group(1) for p in libs.iterdir() if (m := _BROKER_JAR.match(p.name))})
    if len(versions) != 1:
        found = "none" if not versions else ", ".join(versions)
        raise InputError(f"--kafka-home {home}: expected one kafka_2.13-<version>.jar in libs/, found {found}")
    return KafkaDist(check_version(versions[0]), libs, str(home))


def cached(version: str, root: Path | None = None) -> KafkaDist:
    """The jars `fetch` left for `version`.

    Raises:
        InputError: that version was never fetched (or its fetch did not finish).
    """
    folder = (root or cache_root()) / check_version(version)
    if not (folder / MANIFEST).is_file():
        raise InputError(f"the jars of Kafka {version} are not fetched yet: run `make kafka` (or `kreassign sandbox "
                         f"fetch-kafka --kafka-version {version}`), or give --kafka-home with an unpacked Kafka")
    return KafkaDist(version, folder / "libs", "fetched")


def locate(kafka_home: str | os.PathLike[str] | None, version: str | None) -> KafkaDist:
    """--kafka-home when given, else the fetched jars of `version` (default: DEFAULT_VERSION)."""
    if kafka_home:
        dist = from_kafka_home(Path(kafka_home))
        if version and version != dist.version:
            raise InputError(f"--kafka-home holds Kafka {dist.version}, not the --kafka-version {version} asked for")
        return dist
    return cached(version or DEFAULT_VERSION)


def find_java_for(version_needed: int) -> str:
    """The `java` to run Kafka with: `$JAVA_HOME/bin/java`, else the one on PATH.

    Raises:
        InputError: none found, or it is older than `version_needed`.
    """
    java = find_java()
    if java is None:
        home = os.environ.get("JAVA_HOME")
        where = f"JAVA_HOME={home} has no bin/java" if home else "no java on PATH"
        raise InputError(f"Java {version_needed}+ is needed to run Kafka and {where}: install a JDK (Debian: "
                         f"apt-get install openjdk-{max(version_needed, 17)}-jdk-headless) or set JAVA_HOME")
    found = java_version(java)
    if found is None or found < version_needed:
        raise InputError(f"{java} is Java {found or 'of an unknown version'}, but Kafka needs Java "
                         f"{version_needed}+: set JAVA_HOME to a newer JDK")
    return java


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)


def fetch(version: str, root: Path | None = None, *,
          run: Callable[[Sequence[str]], subprocess.CompletedProcess[str]] = _run, force: bool = False) -> KafkaDist:
    """Copy the runtime jars of Kafka `version` from Maven Central into the cache (a no-op when
    they are there already, unless `force`).

    Raises:
        InputError: Maven or Java missing, or Maven could not resolve the release.
    """
    check_version(version)
    folder = (root or cache_root()) / version
    if (folder / MANIFEST).is_file() and not force:
        return cached(version, root)
    folder.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=folder.parent))
    try:
        _maven_copy(POM, [f"-Dkafka.version={version}", *(["-Pkafka4"] if _key(version) >= (4, 0) else [])],
                    scratch / "libs", f"Kafka {version}", run)
        jars = sorted(p.name for p in (scratch / "libs").glob("*.jar"))
        (scratch / MANIFEST).write_text(json.dumps({"version": version, "source": "Maven Central", "jars": jars},
                                                   indent=1))
        if folder.exists():
            shutil.rmtree(folder)
        scratch.rename(folder)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return cached(version, root)


def _maven_copy(pom: Path, options: Sequence[str], out: Path, what: str,
                run: Callable[[Sequence[str]], subprocess.CompletedProcess[str]]) -> None:
    """`pom`'s runtime dependencies copied into `out` by Maven.

    Raises:
        InputError: Maven or Java missing, or Maven could not resolve them.
    """
    mvn = shutil.which("mvn")
    if mvn is None:
        raise InputError(f"Maven (mvn) is needed to fetch {what} from Maven Central and is not on PATH: install "
                         "it (Debian: apt-get install maven), or give --kafka-home with an unpacked Kafka")
    find_java_for(11)  # Maven itself needs a JDK; the broker's own need is checked at start
    argv = [mvn, "-B", "-q", "--no-transfer-progress", "-Dstyle.color=never", "-f", str(pom), *options,
            f"{DEPENDENCY_PLUGIN}:copy-dependencies", "-DincludeScope=runtime", f"-DoutputDirectory={out}"]
    done = run(argv)
    if done.returncode != 0:
        raise InputError(f"Maven could not fetch {what}: {_maven_error(done.stdout + done.stderr)}")


def jmx_exporter_jar(root: Path | None = None) -> Path:
    """The Prometheus JMX exporter's agent jar `fetch_jmx_exporter` left.

    Raises:
        InputError: not fetched yet.
    """
    jar = (root or cache_root()) / JMX_EXPORTER_DIR / JMX_EXPORTER_VERSION / JMX_EXPORTER_JAR
    if not jar.is_file():
        raise InputError(f"the Prometheus JMX exporter {JMX_EXPORTER_VERSION} is not fetched yet: run `make kafka` "
                         "(or `kreassign sandbox fetch-kafka`)")
    return jar


def fetch_jmx_exporter(root: Path | None = None, *,
                       run: Callable[[Sequence[str]], subprocess.CompletedProcess[str]] = _run,
                       force: bool = False) -> Path:
    """Copy the Prometheus JMX exporter's java agent from Maven Central into the cache, by
    jmx-exporter-pom.xml (a no-op when it is there, unless `force`); returns the jar.

    Raises:
        InputError: Maven or Java missing, or Maven could not resolve it.
    """
    folder = (root or cache_root()) / JMX_EXPORTER_DIR / JMX_EXPORTER_VERSION
    if (folder / JMX_EXPORTER_JAR).is_file() and not force:
        return folder / JMX_EXPORTER_JAR

    def fill(scratch: Path) -> None:
        _maven_copy(JMX_EXPORTER_POM, [f"-Djmx.exporter.version={JMX_EXPORTER_VERSION}"], scratch,
                    f"the Prometheus JMX exporter {JMX_EXPORTER_VERSION}", run)
        if not (scratch / JMX_EXPORTER_JAR).is_file():
            raise InputError(f"Maven did not leave {JMX_EXPORTER_JAR}: see {JMX_EXPORTER_POM}")

    _install(folder, f".{JMX_EXPORTER_VERSION}-", fill)
    return folder / JMX_EXPORTER_JAR


def _install(folder: Path, prefix: str, fill: Callable[[Path], None]) -> None:
    """`fill` a scratch folder beside `folder`, then put it in `folder`'s place (a fill cut short
    leaves no half-made folder behind)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=prefix, dir=folder.parent))
    try:
        fill(scratch)
        if folder.exists():
            shutil.rmtree(folder)
        scratch.rename(folder)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _client_telemetry_sources(source: Path) -> list[Path]:
    return sorted(p for p in source.rglob("*") if p.is_file() and (p.name == "pom.xml" or p.suffix == ".java"))


def _client_telemetry_folder(root: Path | None, source: Path) -> Path:
    """The cache folder of the receiver built from `source` as it is now (a digest of its files,
    so an edited source is built again)."""
    digest = hashlib.sha256()
    for path in _client_telemetry_sources(source):
        digest.update(str(path.relative_to(source)).encode() + b"\0" + path.read_bytes() + b"\0")
    return (root or cache_root()) / CLIENT_TELEMETRY_DIR / digest.hexdigest()[:16]


def client_telemetry_jar(root: Path | None = None, source: Path = CLIENT_TELEMETRY_SOURCE) -> Path:
    """The KIP-714 receiver's jar `build_client_telemetry` left for the current source.

    Raises:
        InputError: not built yet (or built from another version of the source).
    """
    jar = _client_telemetry_folder(root, source) / CLIENT_TELEMETRY_JAR
    if not jar.is_file():
        raise InputError("kreassign's KIP-714 client-telemetry receiver for real brokers is not built yet: run "
                         "`make kafka` (or `kreassign sandbox fetch-kafka`)")
    return jar


def build_client_telemetry(root: Path | None = None, source: Path = CLIENT_TELEMETRY_SOURCE, *,
                           run: Callable[[Sequence[str]], subprocess.CompletedProcess[str]] = _run,
                           force: bool = False) -> Path:
    """Compile the KIP-714 receiver (telemetry/pom.xml: PrometheusClientTelemetry against the
    kafka-clients of Maven Central) into the cache, building in a scratch folder there, never in
    the source tree (a no-op when the jar of this source is there, unless `force`); returns the jar.

    Raises:
        InputError: Maven or a JDK missing, or the build failed.
    """
    folder = _client_telemetry_folder(root, source)
    if (folder / CLIENT_TELEMETRY_JAR).is_file() and not force:
        return folder / CLIENT_TELEMETRY_JAR
    mvn = shutil.which("mvn")
    if mvn is None:
        raise InputError("Maven (mvn) is needed to build the KIP-714 client-telemetry receiver and is not on PATH: "
                         "install it (Debian: apt-get install maven)")
    find_java_for(11)

    def fill(scratch: Path) -> None:
        target = scratch / "target"
        done = run([mvn, "-B", "-q", "--no-transfer-progress", "-Dstyle.color=never", "-f", str(source / "pom.xml"),
                    f"-Dkreassign.build.dir={target}", "package"])
        if done.returncode != 0:
            raise InputError(f"Maven could not build the KIP-714 client-telemetry receiver: "
                             f"{_maven_error(done.stdout + done.stderr)}")
        if not (target / CLIENT_TELEMETRY_JAR).is_file():
            raise InputError(f"Maven did not leave {CLIENT_TELEMETRY_JAR}: see {source / 'pom.xml'}")
        (target / CLIENT_TELEMETRY_JAR).rename(scratch / CLIENT_TELEMETRY_JAR)
        shutil.rmtree(target)  # the classes and Maven's bookkeeping: only the jar is kept

    _install(folder, ".build-", fill)
    return folder / CLIENT_TELEMETRY_JAR


def _maven_error(output: str) -> str:
    """The first [ERROR] line Maven printed (the rest is its advice on re-running with -e)."""
    for line in output.splitlines():
        line = line.strip()
        if line.startswith("[ERROR]") and len(line) > len("[ERROR] "):
            return line[len("[ERROR] "):][:400]
    return (output.strip().splitlines() or ["no output"])[-1][:400]
