"""`kreassign spark` without a JVM: options, state files, loopback drivers, the Connect client check."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kreassign.cluster.errors import InputError
from kreassign.simulate import session
from kreassign.simulate.local_cluster import STATE_FILE, ClusterOptions, LocalCluster, read_status, spark_home
from kreassign.simulate.errors import SparkUnavailable
from kreassign.simulate.session import SparkOptions, start_session

from cli_helpers import Kreassign


def test_pip_pyspark_has_spark_class_and_the_connect_server_jar() -> None:
    home = spark_home()
    assert os.access(home / "bin" / "spark-class", os.X_OK)
    assert list((home / "jars").glob("spark-connect_*.jar"))


def test_options_need_a_worker_with_a_core() -> None:
    assert ClusterOptions().cores_per_worker == (os.cpu_count() or 1)
    with pytest.raises(InputError, match="at least one worker"):
        ClusterOptions(workers=0)


def test_status_without_a_cluster_exits_1(tmp_path: Path, kreassign: Kreassign) -> None:
    run = kreassign.run("spark", "status", "--state-dir", str(tmp_path), "--output", "json")
    assert run.code == 1
    assert json.loads(run.out) == {"running": False, "state_dir": str(tmp_path)}
    stopped = kreassign.run("spark", "stop", "--state-dir", str(tmp_path))
    assert (stopped.code, stopped.err.strip()) == (0, f"No Spark cluster is running from {tmp_path}.")
    stopped = kreassign.run("spark", "stop", "--state-dir", str(tmp_path), "--output", "json")
    assert (stopped.code, json.loads(stopped.out)) == (0, {"stopped": False, "state_dir": str(tmp_path)})


def test_a_state_file_whose_processes_are_gone_is_removed(tmp_path: Path) -> None:
    dead = 2**22 + 12345  # above the default pid_max: no such process
    LocalCluster("spark://127.0.0.1:1", "http://127.0.0.1:2", None, {"master": dead}, str(tmp_path),
                 "2026-01-01T00:00:00+00:00").write(tmp_path / STATE_FILE)
    assert read_status(tmp_path) is None
    assert not (tmp_path / STATE_FILE).exists()


def test_a_damaged_state_file_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / STATE_FILE).write_text("{")
    with pytest.raises(InputError, match="damaged"):
        read_status(tmp_path)


@pytest.mark.parametrize(("master", "loopback"), [
    ("spark://127.0.0.1:7077", True), ("spark://localhost:7077", True), ("spark://10.0.0.5:7077", False),
    ("local[*]", False), ("yarn", False), ("k8s://https://127.0.0.1:6443", False),
])
def test_a_driver_on_a_loopback_master_binds_loopback(master: str, loopback: bool) -> None:
    assert SparkOptions(master=master).is_loopback is loopback


def test_remote_without_the_connect_client_says_which_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session, "missing_connect_modules", lambda: ["grpc", "zstandard"])
    with pytest.raises(SparkUnavailable) as info:
        start_session(SparkOptions(remote="sc://127.0.0.1:15002"))
    assert str(info.value) == ("--remote needs the Spark Connect client (grpc, zstandard not installed): "
                               "pip install 'kreassign[connect]' (or run embedded with --master local[*])")
