"""The balance commands end to end on a snapshot file: files written, summary, JSON, errors."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import Kreassign

from kreassign.cluster.snapshot import write_snapshot
from kreassign.simulate.synthetic_state import synthetic_cluster


@pytest.fixture()
def snap(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.json"
    write_snapshot(synthetic_cluster(brokers=6, partitions=60, rf=3, rack_sizes=[2, 2, 2],
                                     new_brokers=3, seed=4), path)
    return path


def test_rebalance_writes_plan_and_rollback(snap: Path, tmp_path: Path, kreassign: Kreassign) -> None:
    plan_file = tmp_path / "plan.json"
    code, out, err = kreassign.run("rebalance", "--snapshot", str(snap), "--write-plan", str(plan_file),
                                   columns=160)
    assert code == 0, err
    proposed = json.loads(plan_file.read_text())
    rollback = json.loads((tmp_path / "plan.rollback.json").read_text())
    assert proposed["version"] == 1 and proposed["partitions"]
    assert [p["partition"] for p in proposed["partitions"]] == [p["partition"] for p in rollback["partitions"]]
    assert all(p["log_dirs"] == ["any"] * len(p["replicas"]) for p in proposed["partitions"])
    assert "per-broker load" in out and "lower bound" in out
    assert "Wrote" in err


def test_json_output_is_the_plan(snap: Path, kreassign: Kreassign) -> None:
    code, out, _ = kreassign.run("add-brokers", "--snapshot", str(snap), "--brokers", "7,8,9", "--output", "json",
                                 columns=160)
    assert code == 0
    doc = json.loads(out)
    assert doc["command"] == "add-brokers"
    assert doc["replica_moves"] >= doc["lower_bounds"]["replica_moves"]
    assert len(doc["reassignment"]["partitions"]) == doc["partitions_changed"]
    assert {b["broker"] for b in doc["after"]["brokers"] if b["replicas"]} >= {7, 8, 9}


def test_decommission_and_leaders_and_set_rf(snap: Path, kreassign: Kreassign) -> None:
    code, out, _ = kreassign.run("decommission", "--snapshot", str(snap), "--brokers", "2", "-o", "json",
                                 columns=160)
    assert code == 0
    assert next(b for b in json.loads(out)["after"]["brokers"] if b["broker"] == 2)["replicas"] == 0
    code, out, _ = kreassign.run("leaders", "--snapshot", str(snap), "-o", "json", columns=160)
    assert code == 0 and json.loads(out)["bytes_moved"] == 0
    code, out, _ = kreassign.run("set-rf", "--snapshot", str(snap), "--topic", "topic-00000", "--rf", "2", "-o",
                                 "json", columns=160)
    assert code == 0
    assert all(len(p["replicas"]) == 2 for p in json.loads(out)["reassignment"]["partitions"])


def test_user_errors_are_one_line(snap: Path, kreassign: Kreassign) -> None:
    code, _, err = kreassign.run("decommission", "--snapshot", str(snap), "--brokers", "42", columns=160)
    assert code == 1 and "Error: broker(s) 42 are not in the cluster" in err
    code, _, err = kreassign.run("rebalance", "--snapshot", str(snap), "--goals", "rack,speed", columns=160)
    assert code == 1 and "unknown goal 'speed'" in err
    code, _, err = kreassign.run("rebalance", "--snapshot", str(snap), "--pin", "nope", columns=160)
    assert code == 1 and "TOPIC:PARTITION:BROKER" in err


def rackless_rf3(tmp_path: Path) -> Path:
    from kreassign.cluster.model import Broker, ClusterState, PartitionInfo

    parts = [PartitionInfo("orders", p, (1 + p % 4, 1 + (p + 1) % 4, 1 + (p + 2) % 4), size_bytes=10)
             for p in range(4)]
    path = tmp_path / "four.json"
    write_snapshot(ClusterState.from_partitions([Broker(i) for i in (1, 2, 3, 4)], parts), path)
    return path


def test_an_infeasible_plan_exits_6_and_writes_nothing(tmp_path: Path, kreassign: Kreassign) -> None:
    snap, plan_file = rackless_rf3(tmp_path), tmp_path / "plan.json"
    code, out, err = kreassign.run("decommission", "--snapshot", str(snap), "--brokers", "1,2", "--write-plan",
                                   str(plan_file), columns=160)
    assert code == 6
    assert err.strip() == (
        "Error: decommission: 4 replica(s) of 4 partition(s) (orders-0, orders-1, orders-2, orders-3) "
        "have no broker: replication factor 3 is larger than the 2 broker(s) that may hold it; nothing "
        "was written. Keep more brokers or relax the constraint, or give --allow-partial to write the rest")
    assert out == "" and not plan_file.exists() and not (tmp_path / "plan.rollback.json").exists()


def test_allow_partial_writes_what_can_be_placed(tmp_path: Path, kreassign: Kreassign) -> None:
    snap, plan_file = rackless_rf3(tmp_path), tmp_path / "plan.json"
    code, _, err = kreassign.run("decommission", "--snapshot", str(snap), "--brokers", "1,2", "--write-plan",
                                 str(plan_file), "--allow-partial", columns=160)
    assert code == 0
    assert "Warning: 4 replica(s) of 4 partition(s)" in err
    assert "Warning: broker(s) 1, 2 still hold replicas after the plan" in err
    # orders-0 (1,2,3) and orders-3 (4,1,2) each got one replica onto the free broker; orders-1
    # only changed its preferred leader (leaders are balanced too).
    moved = {p["partition"]: p["replicas"] for p in json.loads(plan_file.read_text())["partitions"]}
    assert moved == {0: [4, 2, 3], 1: [3, 2, 4], 3: [4, 3, 2]}


def test_add_brokers_keeps_what_the_named_brokers_already_hold_unless_asked() -> None:
    from cli_helpers import SAMPLE

    from kreassign.cluster.snapshot import read_snapshot
    from kreassign.planner.balance import add_brokers

    state = read_snapshot(SAMPLE)
    held = {(p.topic, p.partition) for p in state.iter_partitions() if 1 in p.replicas}
    kept = add_brokers(state, [1, 7])
    assert kept.warnings[0] == (f"broker(s) 1 already hold {len(held)} replica(s) (101.7 GB): they stay where they "
                                "are; give --move-existing to let the plan move them too")
    for target in kept.targets:
        if (target.topic, target.partition) in held:
            assert 1 in target.replicas, f"{target} moved a replica off broker 1"
    moved = add_brokers(state, [1, 7], move_existing=True)
    assert moved.warnings[0].endswith("the plan may move them like any other (--move-existing)")
    assert any((t.topic, t.partition) in held and 1 not in t.replicas for t in moved.targets)
    assert not any("already hold" in w for w in add_brokers(state, [7, 8, 9]).warnings)  # new brokers hold nothing
    binary = add_brokers(state, [1, 7], units="binary")  # the note follows --units (issue 30, item 5)
    assert binary.warnings[0] == (f"broker(s) 1 already hold {len(held)} replica(s) (94.7 GiB): they stay where "
                                  "they are; give --move-existing to let the plan move them too")
