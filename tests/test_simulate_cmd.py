"""`kreassign simulate` without a JVM: option handling, the summary table, starting Spark."""
from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import KREASSIGN, Kreassign
from simulate_helpers import outcome
from rich.console import Console

from kreassign.cli.simulate_cmd import render_summary
from kreassign.simulate.request import SimulationResult
from kreassign.simulate.local_cluster import STATE_FILE, LocalCluster, free_port
from kreassign.simulate.errors import SparkUnavailable
from kreassign.simulate.session import (
    check_java,
    check_master,
    missing_connect_modules,
    parse_java_version,
)


def test_summary_table_fits_100_columns_and_marks_what_never_finishes() -> None:
    result = SimulationResult(
        outcomes=(outcome(), outcome(scenario_id=1, name="unthrottled, 2/broker, writes x1.5, broker 7 fails @ 30m00s",
                                       throttle_bps=None, moves_per_broker=2,
                                       write_multiplier=1.5, failed_broker=7, failed_at_s=1800.0,
                                       makespan_s=float("inf"), stalled_moves=3,
                                       max_client_throttle_ms=10500.0, timed_out_requests=1234.0)),
        scenarios=(), output_dir="out", files=(), brokers=40, partitions=9000, headroom_target=0.2,
    )
    console = Console(file=io.StringIO(), width=100, color_system=None)
    console.print(render_summary(result))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    lines = [line.rstrip() for line in text.splitlines()]
    assert max(len(line) for line in lines) <= 100
    assert lines == [
        "40 brokers, 9000 partitions, 1200 moves (3.3 TB)",
        "                                            lower     client  min < 20%  brokers  produce  timed-out",
        "#  scenario                       makespan  bound   throttle   headroom  at risk   remote   requests",
        "─" * 100,
        "0  50.0 MB/s                         2h01m  1h56m       0 ms       12.5        3    10 ms          0",
        "1  unthrottled,             never finishes  1h56m  10,500 ms       12.5        3    10 ms      1,234",
        "   2/broker, writes     (stalled moves: 3)",
        "   x1.5, broker 7",
        "   fails @ 30m00s",
    ]


def test_the_summary_gives_the_plan_in_the_units_asked_for() -> None:
    result = SimulationResult(outcomes=(outcome(name="47.7 MiB/s"),), scenarios=(), output_dir="out", files=(),
                              brokers=40, partitions=9000, headroom_target=0.2, units="binary")
    console = Console(file=io.StringIO(), width=100, color_system=None)
    console.print(render_summary(result))
    lines = [line.rstrip() for line in console.file.getvalue().splitlines()]  # type: ignore[attr-defined]
    assert lines[0] == "40 brokers, 9000 partitions, 1200 moves (3.0 TiB)"
    assert lines[4].startswith("0  47.7 MiB/s ")
    assert result.to_dict()["units"] == "binary" and result.to_dict()["scenarios"][0]["name"] == "47.7 MiB/s"


def test_outcome_json_has_no_infinity() -> None:
    assert outcome(makespan_s=float("inf")).to_dict()["makespan_s"] is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["simulate"], "exactly one of --snapshot FILE or --synthetic SPEC"),
        (["simulate", "--snapshot", "x.json", "--synthetic", "brokers=3"], "exactly one of"),
        (["simulate", "--synthetic", "brokers=3", "--throttle", "fast"], "Invalid value for '--throttle'"),
        (["simulate", "--synthetic", "brokers=3", "--fail", "7"], "Invalid value for '--fail'"),
        (["simulate", "--synthetic", "brokers=3", "--moves-per-broker", "-1"], "'--moves-per-broker'"),
        (["simulate", "--synthetic", "brokers=3", "--conf", "nonsense"], "is not KEY=VALUE"),
    ],
)
def test_usage_errors_exit_2(args: list[str], message: str, kreassign: Kreassign) -> None:
    ran = kreassign.run(*args)
    assert ran.exit_code == 2
    assert message in ran.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["simulate", "--synthetic", "brokers=3,colour=red"], "is not a synthetic-cluster setting"),
        (["simulate", "--synthetic", "brokers=3", "--reassignment-json-file", "p.json"],
         "makes its own plan"),
        (["simulate", "--snapshot", "x.json"], "a snapshot needs a plan"),
        (["simulate", "--synthetic", "brokers=3", "--headroom-target", "120%"], "headroom target"),
    ],
)
def test_input_errors_exit_1_with_one_line(args: list[str], message: str, kreassign: Kreassign) -> None:
    ran = kreassign.run(*args)
    assert ran.exit_code == 1
    err = ran.stderr
    assert err.startswith("Error: ") and message in err and "Traceback" not in err


def test_missing_java_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(SparkUnavailable, match=r"Java was not found \(looked in PATH\).*JAVA_HOME.*--remote"):
        check_java({"PATH": str(tmp_path)})
    with pytest.raises(SparkUnavailable, match="looked in JAVA_HOME"):
        check_java({"JAVA_HOME": str(tmp_path / "nowhere"), "PATH": os.environ.get("PATH", "")})


def test_old_java_is_refused(tmp_path: Path) -> None:
    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.write_text('#!/bin/sh\necho \'java version "1.8.0_392"\' >&2\n')
    java.chmod(0o755)
    with pytest.raises(SparkUnavailable, match="is Java 8. Spark needs Java 17"):
        check_java({"JAVA_HOME": str(tmp_path)})


@pytest.mark.parametrize(
    ("text", "major"),
    [('openjdk version "17.0.15" 2025-04-15', 17), ('java version "1.8.0_392"', 8),
     ('openjdk version "21" 2023-09-19', 21), ("no version here", None)],
)
def test_parse_java_version(text: str, major: int | None) -> None:
    assert parse_java_version(text) == major


@pytest.mark.parametrize("master", ["local", "local[*]", "local[2]", "local[4,2]", "spark://h:7077", "yarn",
                                    "k8s://https://h:6443"])
def test_masters_accepted(master: str) -> None:
    check_master(master)


@pytest.mark.parametrize("master", ["local[x]", "localhost", "spark:/h", ""])
def test_masters_refused(master: str) -> None:
    with pytest.raises(SparkUnavailable, match="is not a Spark master"):
        check_master(master)


def test_the_cli_does_not_import_pyspark() -> None:
    code = ("import sys, kreassign.cli.main, kreassign.cli.simulate_cmd, kreassign.simulate.request; "
            "assert 'pyspark' not in sys.modules, 'pyspark imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def _simulate(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`kreassign simulate` on a tiny synthetic cluster in its own process (a process holds one
    Spark driver; in this one the tests' session would be joined). The timeout only guards
    against a hang: the runs below end in seconds."""
    return KREASSIGN.subprocess("simulate", "--synthetic", "brokers=6,racks=2,partitions=60,add=2", "--no-plots",
                                "--out", os.devnull, *args, timeout=120,
                                env={"PYSPARK_PYTHON": sys.executable, **(env or {})})


def _one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("Error: ")]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr and "\tat " not in stderr and "Exception" not in stderr, stderr
    return lines[0]


@pytest.mark.parametrize(("option", "url", "what"), [
    ("--master", "spark://127.0.0.1:{port}", "Spark master"),
    ("--remote", "sc://127.0.0.1:{port}", "Spark Connect server"),
])
def test_an_address_with_nothing_behind_it_fails_in_one_line(option: str, url: str, what: str) -> None:
    address = url.format(port=free_port())
    run = _simulate(option, address)
    assert run.returncode == 1
    line = _one_error_line(run.stderr)
    assert line.startswith(f"Error: no {what} answers at {address} (connection refused): ")
    assert "`kreassign spark status`" in line


def test_spark_local_cluster_runs_on_the_address_spark_start_recorded(tmp_path: Path) -> None:
    port = free_port()
    LocalCluster(f"spark://127.0.0.1:{port}", "http://127.0.0.1:1", None, {"master": os.getpid()}, str(tmp_path),
                 "2026-01-01T00:00:00+00:00").write(tmp_path / STATE_FILE)
    run = _simulate("--spark-local-cluster", "--spark-state-dir", str(tmp_path))
    assert run.returncode == 1
    assert _one_error_line(run.stderr).startswith(f"Error: no Spark master answers at spark://127.0.0.1:{port} ")
    run = _simulate("--spark-local-cluster", "connect", "--spark-state-dir", str(tmp_path))
    assert _one_error_line(run.stderr) == (
        f"Error: the Spark cluster running from {tmp_path} has no Connect server: restart it with `kreassign spark "
        "stop` and `kreassign spark start --connect`, or use --spark-local-cluster master")
    (tmp_path / STATE_FILE).unlink()
    run = _simulate("--spark-local-cluster", "--spark-state-dir", str(tmp_path))
    assert _one_error_line(run.stderr) == (
        f"Error: no Spark cluster is running from {tmp_path}: start one with `kreassign spark start` (or run "
        "embedded without --spark-local-cluster)")


@pytest.mark.parametrize("args", [["--spark-local-cluster", "--master", "local[2]"],
                                  ["--spark-local-cluster", "--remote", "sc://h:1"],
                                  ["--spark-state-dir", "/tmp"]])
def test_spark_local_cluster_is_one_way_of_choosing_where(args: list[str], kreassign: Kreassign) -> None:
    ran = kreassign.run("simulate", "--synthetic", "brokers=3", *args)
    assert ran.exit_code == 2
    assert "--spark-local-cluster" in ran.stderr


@pytest.mark.spark
@pytest.mark.slow
def test_a_master_that_never_registers_the_app_fails_in_one_line(silent_port: int) -> None:
    """A port that takes the driver's connection and never answers (a master that ignores the
    application, or another service): the driver JVM starts, then gives up after the
    registration deadline instead of Spark's 60 s of retries and a py4j stack trace."""
    try:
        check_java()
    except SparkUnavailable as exc:
        pytest.skip(str(exc))
    address = f"spark://127.0.0.1:{silent_port}"
    run = _simulate("--master", address)
    assert run.returncode == 1
    line = _one_error_line(run.stderr)  # the wait stretches with the machine's load (from 8 s)
    assert re.fullmatch(
        f"Error: the Spark master at {re.escape(address)} took the connection but did not register this application "
        r"within \d+ s: is it a Spark 4 master and not another port\? check the address with `kreassign spark status`",
        line), line


def test_a_connect_address_that_is_not_spark_fails_in_one_line(silent_port: int) -> None:
    if missing_connect_modules():
        pytest.skip("the Spark Connect client is not installed: pip install 'kreassign[connect]'")
    address = f"sc://127.0.0.1:{silent_port}"
    run = _simulate("--remote", address)
    assert run.returncode == 1
    assert _one_error_line(run.stderr) == (
        f"Error: {address} takes connections but is not a Spark Connect server (no gRPC handshake within 3 s): "
        "check the address with `kreassign spark status`")
