"""`kreassign spark start --connect`, then the same sweep through the standalone master and
through Spark Connect, each compared exactly with the embedded session; `spark stop` at the end.

One cluster (master, one 2-core worker, a Connect server) serves the module; the two simulations
run the real CLI in subprocesses (a process holds one Spark driver); the reference runs on the
shared local session. Inputs are tiny: the cost is the JVM start-ups, not the model.
"""
from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from cli_helpers import KREASSIGN
from pyspark.sql import SparkSession

from kreassign.simulate.local_cluster import read_status
from kreassign.simulate.pipeline import run_simulation
from kreassign.simulate.request import SimulationRequest
from kreassign.simulate.scenarios import ScenarioAxes, parse_failure
from kreassign.simulate.session import check_java, missing_connect_modules
from kreassign.simulate.synthetic import parse_synthetic

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.e2e]

SPEC = "brokers=6,racks=2,partitions=60,rf=3,add=2,seed=5"
SWEEP = ["--throttle", "20MB/s,none", "--fail", "none,random@50%", "--seed", "3"]
TIMEOUT_S = 300


def _kreassign(*args: str) -> subprocess.CompletedProcess[str]:
    return KREASSIGN.subprocess(*args, env={"PYSPARK_PYTHON": sys.executable}, timeout=TIMEOUT_S)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    try:
        check_java()
    except Exception as exc:  # noqa: BLE001 - the reason is the message
        pytest.skip(f"no usable Java for a Spark cluster: {exc}")
    state = tmp_path_factory.mktemp("spark-state")
    started = _kreassign("spark", "start", "--connect", "--workers", "1", "--cores", "2", "--memory", "2g",
                         "--state-dir", str(state), "--output", "json")
    assert started.returncode == 0, started.stderr
    doc = json.loads(started.stdout)
    try:
        yield doc
    finally:
        stopped = _kreassign("spark", "stop", "--state-dir", str(state))
        assert stopped.returncode == 0, stopped.stderr
        assert read_status(state) is None
        assert not (state / "spark.json").exists()


@pytest.fixture(scope="module")
def sweeps(cluster: dict[str, Any], spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The sweep through the master and through Connect (two CLI processes at once, which
    overlaps their start-ups) and, meanwhile, on the embedded local session."""
    out = tmp_path_factory.mktemp("sweeps")
    where = {"master": ["--master", cluster["master_url"]]}
    if not missing_connect_modules():
        where["connect"] = ["--remote", cluster["connect_url"]]
    procs = {
        name: KREASSIGN.start("simulate", "--synthetic", SPEC, *SWEEP, "--timeline-points", "10", "--no-plots",
                              "--driver-memory", "512m", "--conf", "spark.executor.memory=512m", "--out", str(out / name),
                              "--output", "json", *args, env={"PYSPARK_PYTHON": sys.executable})
        for name, args in where.items()
    }
    axes = ScenarioAxes(throttles=(20e6, None), failures=(None, parse_failure("random@50%")), seeds=(3,))
    request = SimulationRequest(cluster=parse_synthetic(SPEC), output_dir=str(out / "local"), axes=axes,
                                plots=False, timeline_points=10)
    results: dict[str, Any] = {"local": [o.to_dict() for o in run_simulation(request, spark=spark).outcomes]}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
        assert proc.returncode == 0, f"{name}: {stderr[-3000:]}"
        results[name] = json.loads(stdout)["scenarios"]
    return results


def test_the_cluster_listens_on_loopback_only(cluster: dict[str, Any]) -> None:
    assert cluster["master_url"].startswith("spark://127.0.0.1:")
    assert cluster["master_ui"].startswith("http://127.0.0.1:")
    assert cluster["connect_url"].startswith("sc://127.0.0.1:")
    assert set(cluster["pids"]) == {"master", "worker-1", "connect"}
    status = _kreassign("spark", "status", "--state-dir", cluster["state_dir"], "--output", "json")
    assert status.returncode == 0
    assert json.loads(status.stdout)["alive"] == {"master": True, "worker-1": True, "connect": True}


def test_a_sweep_on_the_standalone_master_is_the_local_one(sweeps: dict[str, Any]) -> None:
    assert len(sweeps["local"]) == 4 and any(s["makespan_s"] is None for s in sweeps["local"])
    assert sweeps["master"] == sweeps["local"]


def test_a_sweep_through_spark_connect_is_the_local_one(sweeps: dict[str, Any]) -> None:
    if "connect" not in sweeps:
        pytest.skip(f"the Spark Connect client is not installed ({', '.join(missing_connect_modules())}): "
                    "pip install 'kreassign[connect]'")
    assert sweeps["connect"] == sweeps["local"]
