"""generate, plan and snapshot from the command line, on the bundled sample snapshot."""
from __future__ import annotations

import json
from pathlib import Path

from cli_helpers import SAMPLE, Kreassign

from kreassign.cluster.kafka_json import parse_reassignment
from kreassign.cluster.snapshot import read_snapshot


def test_kafka_style_generate_from_a_snapshot_is_reproducible(tmp_path: Path, kreassign: Kreassign) -> None:
    topics = tmp_path / "topics.json"
    topics.write_text('{"topics":[{"topic":"orders"}],"version":1}')
    args = ["--snapshot", str(SAMPLE), "--topics-to-move-json-file", str(topics), "--broker-list", "1,2,3,4",
            "--generate", "--seed", "5"]
    first, second = kreassign.run(*args), kreassign.run(*args)
    assert first.code == 0 and first.out == second.out
    lines = first.out.split("\n")
    assert lines[0] == "Current partition replica assignment"
    assert lines[2] == "" and lines[3] == "Proposed partition reassignment configuration"
    proposed = parse_reassignment(lines[4])
    assert {tp.topic for tp in proposed.assignment()} == {"orders"}
    assert all(set(r) <= {1, 2, 3, 4} and len(r) == 3 for r in proposed.assignment().values())
    current = read_snapshot(str(SAMPLE)).assignment(["orders"])
    assert parse_reassignment(lines[1]).assignment() == current


def test_generate_subcommand_writes_plan_and_rollback(tmp_path: Path, kreassign: Kreassign) -> None:
    plan = tmp_path / "plan.json"
    result = kreassign.run("generate", "--snapshot", str(SAMPLE), "--topic", "payments", "--broker-list", "7,8,9",
                           "--seed", "1", "--write-plan", str(plan), "--output", "json")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert parse_reassignment(plan.read_text()).assignment() == parse_reassignment(json.dumps(data["proposed"])).assignment()
    rollback = parse_reassignment((tmp_path / "plan.rollback.json").read_text()).assignment()
    assert rollback == read_snapshot(str(SAMPLE)).assignment(["payments"])


def test_generate_unknown_topic_and_bad_broker_list(kreassign: Kreassign) -> None:
    unknown = kreassign.run("generate", "--snapshot", str(SAMPLE), "--topic", "nope", "--broker-list", "1,2,3")
    assert unknown.code == 1
    assert "Topic nope not found." in unknown.err
    assert "Traceback" not in unknown.err
    bad = kreassign.run("generate", "--snapshot", str(SAMPLE), "--topic", "orders", "--broker-list", "1,x")
    assert bad.code == 2 and "is not a comma-separated list of broker ids" in bad.err


def test_plan_json_matches_the_plan_file(tmp_path: Path, kreassign: Kreassign) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text('{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[7,8,9]}]}')
    result = kreassign.run("plan", "--snapshot", str(SAMPLE), "--reassignment-json-file", str(plan), "--throttle",
                           "40MB/s", "--output", "json")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    state = read_snapshot(str(SAMPLE))
    row = state.find_row("orders", 0)
    assert data["totals"]["bytes_moved"] == 3 * int(state.size_bytes[row])
    assert data["partitions"][0]["adding"] == [7, 8, 9]
    assert data["throttles"]["brokers"]["7"] == {"leader.replication.throttled.rate": "40000000",
                                                  "follower.replication.throttled.rate": "40000000"}


def test_plan_text_and_clean_errors(tmp_path: Path, kreassign: Kreassign) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text('{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[7,8,9]}]}')
    text = kreassign.run("plan", "--snapshot", str(SAMPLE), "--reassignment-json-file", str(plan))
    assert text.code == 0 and "1 partition(s) in the plan" in text.out and "Per broker" in text.out
    missing = kreassign.run("plan", "--snapshot", str(SAMPLE), "--reassignment-json-file",
                            str(tmp_path / "x.json"))
    assert missing.code == 1 and f"Unable to read file {tmp_path / 'x.json'}" in missing.err
    plan.write_text('{"version":1,"partitions":[{"topic":"orders","partition":999,"replicas":[1]}]}')
    unknown = kreassign.run("plan", "--snapshot", str(SAMPLE), "--reassignment-json-file", str(plan))
    assert unknown.code == 1 and "orders-999" in unknown.err and "Traceback" not in unknown.err
    rate = kreassign.run("plan", "--snapshot", str(SAMPLE), "--reassignment-json-file", str(plan), "--throttle",
                         "fast")
    assert rate.code == 2 and "Invalid value for '--throttle'" in rate.err


def test_snapshot_converts_json_to_parquet(tmp_path: Path, kreassign: Kreassign) -> None:
    out = tmp_path / "sample.parquet"
    result = kreassign.run("snapshot", "--snapshot", str(SAMPLE), "--output-file", str(out))
    assert result.code == 0 and "9 brokers, 4 topics, 120 partitions" in result.err
    before, after = read_snapshot(str(SAMPLE)), read_snapshot(str(out))
    assert after.assignment() == before.assignment()
    assert after.size_bytes.tolist() == before.size_bytes.tolist()
    assert after.brokers == before.brokers


def test_snapshot_summary_follows_units(tmp_path: Path, kreassign: Kreassign) -> None:
    """Issue 30, item 5: the one summary line that prints a size follows --units like every command."""
    from kreassign.cluster.units import format_bytes

    total = int(read_snapshot(str(SAMPLE)).describe()["bytes"])
    for units, shown in (("decimal", format_bytes(total)), ("binary", format_bytes(total, "binary"))):
        args = ("--units", units) if units == "binary" else ()
        result = kreassign.run("snapshot", "--snapshot", str(SAMPLE), "--output-file", str(tmp_path / "s.json"), *args)
        assert result.code == 0 and f"120 partitions, {shown}, " in result.err, result.err
    assert format_bytes(total, "binary").endswith("iB") and not format_bytes(total).endswith("iB")


def test_snapshot_json_says_what_was_written(tmp_path: Path, kreassign: Kreassign) -> None:
    out = tmp_path / "copy.json"
    result = kreassign.run("snapshot", "--snapshot", str(SAMPLE), "--output-file", str(out), "--output", "json")
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    state = read_snapshot(str(out))
    from kreassign.cluster.write_sample import rates_to_dict

    assert doc == {"file": str(out), **state.describe(), "reassignments_in_flight": len(state.reassignments),
                   "write_rates": rates_to_dict(read_snapshot(str(SAMPLE)).rates_origin())}
    assert (doc["brokers"], doc["topics"], doc["partitions"]) == (9, 4, 120)


def test_no_cluster_given(kreassign: Kreassign) -> None:
    result = kreassign.run("plan", "--reassignment-json-file", str(SAMPLE))
    assert result.code == 1
    assert "no cluster given: use --bootstrap-server" in result.err
