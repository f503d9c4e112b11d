"""The Spark driver's class-data archive (`simulate.jvm_cache`, `simulate.jvm_recorder`)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import KREASSIGN

from kreassign.simulate import jvm_cache
from kreassign.simulate.jvm_cache import JvmCache, archive_path, finish_recording, plan, record_in_background
from kreassign.simulate.errors import SparkUnavailable
from kreassign.simulate.session import check_java, find_java

DEAD = 2**22 + 12345  # above the default pid_max: no such process


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"XDG_CACHE_HOME": str(tmp_path), jvm_cache.ENV: "1"}


@pytest.fixture
def java() -> str:
    found = find_java()
    if found is None:
        pytest.skip("no java on PATH")
    return found


def test_an_archive_is_used_once_there_and_recorded_only_when_asked(java: str, env: dict[str, str]) -> None:
    archive = archive_path(java, env)
    assert archive.parent == Path(env["XDG_CACHE_HOME"]) / "kreassign" / "spark-cds"
    assert plan(java, env=env) is None
    recording = plan(java, record=True, env=env)
    assert recording == JvmCache(archive, archive.with_name(f"{archive.name}.{os.getpid()}.tmp"))
    assert recording.java_options == f"-XX:ArchiveClassesAtExit={recording.recording} -Xlog:cds*=off"
    archive.write_bytes(b"x")
    assert plan(java, env=env) == plan(java, record=True, env=env) == JvmCache(archive)
    assert JvmCache(archive).java_options == f"-XX:SharedArchiveFile={archive} -Xlog:cds*=off"
    assert plan(java, env={**env, jvm_cache.ENV: "0"}) is None


def test_each_copy_of_sparks_jars_has_its_own_archive(java: str, env: dict[str, str], tmp_path: Path) -> None:
    # the JVM refuses an archive recorded with jars at other paths or of other dates: another
    # virtualenv (or this one made again) must not find this one's archive
    first, second = tmp_path / "venv-a" / "jars", tmp_path / "venv-b" / "jars"
    for jars in (first, second):
        jars.mkdir(parents=True)
        for name in ("spark-core.jar", "scala-library.jar"):
            (jars / name).write_bytes(b"jar")
            os.utime(jars / name, (1_700_000_000, 1_700_000_000))
    names = {archive_path(java, env, jars) for jars in (first, second)}
    assert len(names) == 2
    assert archive_path(java, env, first) == archive_path(java, env, first)
    os.utime(first / "spark-core.jar", (1_700_000_100, 1_700_000_100))  # the virtualenv made again
    assert archive_path(java, env, first) not in names


def test_a_killed_recorders_file_is_removed(java: str, env: dict[str, str]) -> None:
    archive = archive_path(java, env)
    archive.parent.mkdir(parents=True)
    stale, live = archive.with_name(f"{archive.name}.{DEAD}.tmp"), archive.with_name(f"{archive.name}.1.tmp")
    stale.write_bytes(b"x")
    live.write_bytes(b"x")
    plan(java, record=True, env=env)
    assert not stale.exists() and live.exists()


class _Exited:
    def __init__(self, code: int) -> None:
        self.code = code

    def wait(self, timeout: float) -> int:
        return self.code


def test_a_recorded_archive_replaces_older_ones(tmp_path: Path) -> None:
    older, archive = tmp_path / "spark-old.jsa", tmp_path / "spark-new.jsa"
    recording = tmp_path / "spark-new.jsa.7.tmp"
    older.write_bytes(b"old")
    recording.write_bytes(b"new")
    stopped: list[bool] = []
    jvm_cache.start_recording(JvmCache(archive, recording), _Exited(0))  # type: ignore[arg-type]
    finish_recording(lambda: stopped.append(True))
    assert stopped == [True] and archive.read_bytes() == b"new"
    assert not recording.exists() and not older.exists()
    finish_recording(lambda: stopped.append(True))  # nothing records any more
    assert stopped == [True]


def test_a_failed_recording_leaves_nothing(tmp_path: Path) -> None:
    archive, recording = tmp_path / "spark-new.jsa", tmp_path / "spark-new.jsa.7.tmp"
    recording.write_bytes(b"half")
    jvm_cache.start_recording(JvmCache(archive, recording), _Exited(1))  # type: ignore[arg-type]
    finish_recording(None)
    assert not recording.exists() and not archive.exists()


def test_one_recorder_at_a_time_and_none_when_turned_off(java: str, env: dict[str, str]) -> None:
    directory = archive_path(java, env).parent
    directory.mkdir(parents=True)
    (directory / jvm_cache.LOCK).write_text(str(os.getpid()))  # a recorder runs
    assert not record_in_background(java, env)
    assert not record_in_background(java, {**env, jvm_cache.ENV: "off"})
    assert not (directory / "recording.log").exists()


@pytest.mark.spark
@pytest.mark.slow
def test_the_recorder_makes_an_archive_that_simulate_then_uses(tmp_path: Path) -> None:
    """The recorder's tiny simulation leaves an archive; a simulation on it prints clean JSON
    (the JVM's CDS messages, which go to stdout, are off) and starts no recorder."""
    try:
        check_java()
    except SparkUnavailable as exc:
        pytest.skip(str(exc))
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), jvm_cache.ENV: "1", "PYSPARK_PYTHON": sys.executable}
    recorder = subprocess.run([sys.executable, "-m", "kreassign.simulate.jvm_recorder"], env=env,
                              capture_output=True, text=True, timeout=900, check=False)
    assert recorder.returncode == 0, recorder.stderr[-3000:]
    directory = tmp_path / "kreassign" / "spark-cds"
    assert [p.name for p in directory.glob("spark-*")] == [archive_path(find_java() or "java", env).name]
    assert not (directory / jvm_cache.LOCK).exists()
    run = KREASSIGN.subprocess("simulate", "--synthetic", "brokers=6,racks=2,partitions=60,add=2", "--no-plots",
                               "--out", str(tmp_path / "out"), "-o", "json", env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(run.stdout)["scenarios"][0]["stalled_moves"] == 0
    assert not (directory / jvm_cache.LOCK).exists()
