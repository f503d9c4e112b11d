"""`kreassign simulate` without a JVM: option handling, the summary table, starting Spark."""
from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from simulate_helpers import outcome
from rich.console import Console

from kreassign.cli.main import main
from kreassign.cli.simulate_cmd import render_summary
from kreassign.simulate.request import SimulationResult
from kreassign.simulate.session import SparkUnavailable, check_java, check_master, parse_java_version


def test_summary_table_fits_100_columns_and_marks_what_never_finishes() -> None:
    result = SimulationResult(
        outcomes=(outcome(), outcome(scenario_id=1, throttle_bps=None, moves_per_broker=2,
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
        "40 brokers, 9000 partitions, 1200 moves (3.0 TiB)",
        "                                            lower     client  min < 20%  brokers  produce  timed-out",
        "#  scenario                       makespan  bound   throttle   headroom  at risk   remote   requests",
        "─" * 100,
        "0  50.0 MB/s, all at                 2h01m  1h56m       0 ms       12.5        3    10 ms          0",
        "   once, writes x1",
        "1  unthrottled,             never finishes  1h56m  10,500 ms       12.5        3    10 ms      1,234",
        "   2/broker, writes     (stalled moves: 3)",
        "   x1.5, broker 7",
        "   fails @ 30m00s",
    ]


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
def test_usage_errors_exit_2(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


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
def test_input_errors_exit_1_with_one_line(args: list[str], message: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
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
