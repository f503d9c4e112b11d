"""The balance commands end to end on a snapshot file: files written, summary, JSON, errors."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kreassign.cli.boundary import run_guarded
from kreassign.cli.main import cli
from kreassign.cluster.snapshot import write_snapshot
from kreassign.simulate.synthetic_state import synthetic_cluster


@pytest.fixture()
def snap(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.json"
    write_snapshot(synthetic_cluster(brokers=6, partitions=60, rf=3, rack_sizes=[2, 2, 2],
                                     new_brokers=3, seed=4), path)
    return path


def invoke(args: list[str]) -> tuple[int, str, str]:
    """Run the CLI as `main` does: errors become one message and an exit code."""
    runner = CliRunner(env={"COLUMNS": "160"})
    with runner.isolation() as (out, err, _):
        code = run_guarded(lambda: cli.main(args=args, prog_name="kreassign", standalone_mode=False))
        sys.stdout.flush()
        sys.stderr.flush()
        return code, out.getvalue().decode(), err.getvalue().decode()


def test_rebalance_writes_plan_and_rollback(snap: Path, tmp_path: Path) -> None:
    plan_file = tmp_path / "plan.json"
    code, out, err = invoke(["rebalance", "--snapshot", str(snap), "--write-plan", str(plan_file)])
    assert code == 0, err
    proposed = json.loads(plan_file.read_text())
    rollback = json.loads((tmp_path / "plan.rollback.json").read_text())
    assert proposed["version"] == 1 and proposed["partitions"]
    assert [p["partition"] for p in proposed["partitions"]] == [p["partition"] for p in rollback["partitions"]]
    assert all(p["log_dirs"] == ["any"] * len(p["replicas"]) for p in proposed["partitions"])
    assert "per-broker load" in out and "lower bound" in out
    assert "Wrote" in err


def test_json_output_is_the_plan(snap: Path) -> None:
    code, out, _ = invoke(["add-brokers", "--snapshot", str(snap), "--brokers", "7,8,9", "--output", "json"])
    assert code == 0
    doc = json.loads(out)
    assert doc["command"] == "add-brokers"
    assert doc["replica_moves"] >= doc["lower_bounds"]["replica_moves"]
    assert len(doc["reassignment"]["partitions"]) == doc["partitions_changed"]
    assert {b["broker"] for b in doc["after"]["brokers"] if b["replicas"]} >= {7, 8, 9}


def test_decommission_and_leaders_and_set_rf(snap: Path) -> None:
    code, out, _ = invoke(["decommission", "--snapshot", str(snap), "--brokers", "2", "-o", "json"])
    assert code == 0
    assert next(b for b in json.loads(out)["after"]["brokers"] if b["broker"] == 2)["replicas"] == 0
    code, out, _ = invoke(["leaders", "--snapshot", str(snap), "-o", "json"])
    assert code == 0 and json.loads(out)["bytes_moved"] == 0
    code, out, _ = invoke(["set-rf", "--snapshot", str(snap), "--topic", "topic-00000", "--rf", "2", "-o", "json"])
    assert code == 0
    assert all(len(p["replicas"]) == 2 for p in json.loads(out)["reassignment"]["partitions"])


def test_user_errors_are_one_line(snap: Path) -> None:
    code, _, err = invoke(["decommission", "--snapshot", str(snap), "--brokers", "42"])
    assert code == 1 and "Error: broker(s) 42 are not in the cluster" in err
    code, _, err = invoke(["rebalance", "--snapshot", str(snap), "--goals", "rack,speed"])
    assert code == 1 and "unknown goal 'speed'" in err
    code, _, err = invoke(["rebalance", "--snapshot", str(snap), "--pin", "nope"])
    assert code == 1 and "TOPIC:PARTITION:BROKER" in err
