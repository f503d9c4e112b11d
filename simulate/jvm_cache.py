"""Class data sharing for the Spark driver's JVM (AppCDS): an archive of the classes a driver
loads, which later drivers map instead of loading and verifying thousands of classes from
Spark's jars, so the JVM and its first jobs start in about half the time
(bench/results/bench_simulate.jsonl).

A driver records such an archive when its JVM exits, which takes it half a minute and more, so
a simulation never records one itself: when `kreassign simulate` finds none, it starts
`python -m kreassign.simulate.jvm_recorder` in the background once it is done (at low priority;
one at a time), which runs a tiny simulation with a recording driver, and the next simulation
uses the archive. The archive lives under $XDG_CACHE_HOME/kreassign/spark-cds (~/.cache/...;
about 200 MB), keyed by the java executable and pyspark's version and jars; the JVM checks it
against its class path itself and ignores one that does not match. Its CDS messages, which it
prints on stdout, are turned off. KREASSIGN_SPARK_CDS=0 turns all of this off.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from kreassign.cluster.processes import pid_alive

ENV = "KREASSIGN_SPARK_CDS"
QUIET = "-Xlog:cds*=off"
LOCK = "recording.pid"
_FINISH_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class JvmCache:
    """The archive a driver JVM uses (`recording` None) or records (into `recording`, then
    renamed to `archive`)."""

    archive: Path
    recording: Path | None = None

    @property
    def java_options(self) -> str:
        if self.recording is not None:
            return f"-XX:ArchiveClassesAtExit={self.recording} {QUIET}"
        return f"-XX:SharedArchiveFile={self.archive} {QUIET}"


_recording: tuple[JvmCache, subprocess.Popen[bytes]] | None = None
"""the archive this process's driver JVM records, and that JVM (a process has one driver)"""


def enabled(env: dict[str, str] | None = None) -> bool:
    env = dict(os.environ) if env is None else env
    return env.get(ENV, "1").strip().lower() not in ("0", "off", "false", "no")


def cache_dir(env: dict[str, str] | None = None) -> Path:
    env = dict(os.environ) if env is None else env
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kreassign" / "spark-cds"


def archive_path(java: str, env: dict[str, str] | None = None, jars: Path | None = None) -> Path:
    """Where the archive for drivers started with `java` lives: the name changes with the java
    executable (a JDK upgrade replaces it) and with pyspark's version and its jars (`jars`:
    pyspark's own by default), each by path, size and modification time. The JVM refuses an
    archive whose class path names other files, silently (its CDS messages are off), so two
    virtualenvs, or one moved or made again, each need their own: keyed by the jars' names
    alone, a second virtualenv found the first one's archive and never used or replaced it."""
    from pyspark import __version__

    if jars is None:
        from pyspark.find_spark_home import _find_spark_home

        jars = Path(_find_spark_home()) / "jars"
    real = Path(java).resolve()
    stat = real.stat()
    parts = [str(real), str(stat.st_size), str(int(stat.st_mtime)), __version__]
    for jar in sorted(jars.resolve().glob("*.jar")):
        info = jar.stat()
        parts.append(f"{jar}:{info.st_size}:{int(info.st_mtime)}")
    return cache_dir(env) / f"spark-{hashlib.sha256(chr(10).join(parts).encode()).hexdigest()[:16]}.jsa"


def plan(java: str, *, record: bool = False, env: dict[str, str] | None = None) -> JvmCache | None:
    """The archive a driver JVM started with `java` uses, if it exists; with `record`, the one
    it records when none does. None when turned off or the cache dir cannot be used."""
    if not enabled(env):
        return None
    try:
        archive = archive_path(java, env)
        if archive.is_file():
            return JvmCache(archive)
        if not record:
            return None
        archive.parent.mkdir(parents=True, exist_ok=True)
        for stale in archive.parent.glob("spark-*.jsa.*.tmp"):  # left by a recorder that was killed
            if not pid_alive(int(stale.suffixes[-2].lstrip("."))):
                stale.unlink(missing_ok=True)
    except (OSError, ValueError):
        return None
    return JvmCache(archive, archive.with_name(f"{archive.name}.{os.getpid()}.tmp"))


def start_recording(cache: JvmCache | None, proc: subprocess.Popen[bytes] | None) -> None:
    """Remember that this process's driver JVM `proc` records `cache`'s archive."""
    global _recording
    if cache is not None and cache.recording is not None and proc is not None:
        _recording = (cache, proc)


def finish_recording(stop_jvm: object) -> None:
    """After the session stopped: let the recording driver JVM exit (`stop_jvm()`), wait for it
    to write the archive and put the archive in place; other archives in the cache dir (of
    other Java or pyspark versions) are removed. Nothing to do when no JVM records."""
    global _recording
    if _recording is None:
        return
    cache, proc = _recording
    _recording = None
    assert cache.recording is not None
    try:
        if callable(stop_jvm):
            stop_jvm()
        code = proc.wait(timeout=_FINISH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        code = None
    try:
        if code == 0 and cache.recording.is_file() and cache.recording.stat().st_size > 0:
            os.replace(cache.recording, cache.archive)
            for other in cache.archive.parent.glob("spark-*.jsa"):
                if other != cache.archive:
                    other.unlink(missing_ok=True)
        else:
            cache.recording.unlink(missing_ok=True)
    except OSError:
        pass


def record_in_background(java: str, env: dict[str, str] | None = None) -> bool:
    """Start the recorder (`jvm_recorder`) detached when no archive exists for
    `java` and no recorder runs; True if one was started."""
    env = dict(os.environ) if env is None else env
    if not enabled(env):
        return False
    try:
        archive = archive_path(java, env)
        if archive.is_file():
            return False
        archive.parent.mkdir(parents=True, exist_ok=True)
        lock = archive.parent / LOCK
        try:
            if pid_alive(int(lock.read_text().strip() or 0)):
                return False
        except (OSError, ValueError):
            pass
        with open(archive.parent / "recording.log", "ab") as log:
            proc = subprocess.Popen([sys.executable, "-m", "kreassign.simulate.jvm_recorder"], env=env,
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True, close_fds=True)
        lock.write_text(str(proc.pid))
    except OSError:
        return False
    return True
