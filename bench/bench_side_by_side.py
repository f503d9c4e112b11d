"""Kafka's own reassignment tool and kreassign's Kafka-compatible front door, side by side on a
real Apache Kafka cluster per release of the matrix: every scenario of
tests/side_by_side_scenarios.py (those of Kafka's ReassignPartitionsCommandTest, plus operator
mistakes), each run once with Kafka's ReassignPartitionsCommand (the real tool from the fetched
jars) and once with the installed `kreassign` command (a process per call), from the same state.

Writes one JSON line per release to bench/results/bench_side_by_side.jsonl and the readable table
bench/results/side_by_side_<version>.md (scenario | step | Kafka's tool | kreassign | same?); with
two or more releases also bench/results/side_by_side_kafka_versions.md: where Kafka's own tool
prints differently from one release to the next.

    python -m bench.bench_side_by_side [--kafka-version V]... [--scenario NAME]... [--state-dir DIR]... [--note TEXT]

--state-dir uses a cluster `kreassign sandbox start --engine kafka --topics none` keeps running
instead of starting one (repeat it for one cluster per release).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import RESULTS, record

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from side_by_side import KafkaTool, KreassignTool, Row, Run, Target, compare, fields, run_both  # noqa: E402
from side_by_side_scenarios import REASONS, SCENARIOS, Scenario, known_differences  # noqa: E402

CELL = 110


def main(argv: Sequence[str] | None = None) -> None:
    from kreassign.sandbox.kafka_engine.dist import MATRIX

    parser = argparse.ArgumentParser(prog="python -m bench.bench_side_by_side")
    parser.add_argument("--kafka-version", action="append", dest="versions")
    parser.add_argument("--scenario", action="append", dest="scenarios")
    parser.add_argument("--state-dir", type=Path, action="append", dest="state_dirs")
    parser.add_argument("--note", default="")
    args = parser.parse_args(list(argv) if argv is not None else sys.argv[1:])
    scenarios = [s for s in SCENARIOS if not args.scenarios or s.name in args.scenarios]
    kafka_runs: dict[str, dict[str, Run]] = {}
    if args.state_dirs:
        for state_dir in args.state_dirs:
            target = Target.from_state_dir(state_dir)
            kafka_runs[target.version] = bench_version(target, scenarios, args.note)
    else:
        from kreassign.sandbox.kafka_engine.cluster import KafkaCluster
        from kreassign.sandbox.kafka_engine.dist import locate

        for version in args.versions or MATRIX:
            with KafkaCluster(locate(None, version), brokers=5, racks=2, log_dirs=3, topics=(), heap="384m") as cluster:
                kafka_runs[version] = bench_version(Target.of(cluster), scenarios, args.note)
    if len(kafka_runs) > 1:
        write_version_table(kafka_runs)


def bench_version(target: Target, scenarios: Sequence[Scenario], note: str) -> dict[str, Run]:
    """Every scenario on one cluster: the table, the JSON line, and Kafka's runs (for the
    comparison between releases)."""
    from kreassign.sandbox.kafka_engine.dist import locate

    load_before = os.getloadavg()[0]
    start = time.monotonic()
    rows: list[Row] = []
    kafka_runs: dict[str, Run] = {}
    skipped: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-side-") as tmp, \
            KafkaTool(locate(None, target.version), Path(tmp)) as tool:
        for scenario in scenarios:
            work = Path(tmp) / scenario.name.replace(" ", "_").replace("/", "_")
            print(f"{target.version}: {scenario.name}", flush=True)
            known = known_differences(target.version, scenario.name)
            kafka, ours = run_both(target, scenario.run, tool, KreassignTool(work / "journal", in_process=False), work,
                                   known)
            rows += compare(scenario.name, kafka, ours, known)
            kafka_runs[scenario.name] = kafka
            if not scenario.runs_on(target.version):
                skipped.append(scenario.name)
    wall = time.monotonic() - start
    differences = [r for r in rows if not r.same]
    unexplained = [r for r in differences if r.reason is None]
    write_table(target.version, scenarios, rows)
    record("bench_side_by_side", kafka_version=target.version, kreassign="the installed command, a process per call",
           kafka_tool="ReassignPartitionsCommand from the fetched jars, one JVM serving every call",
           scenarios=len(scenarios), steps=len({(r.scenario, r.step) for r in rows}), fields=len(rows),
           same_fields=len(rows) - len(differences), listed_differences=len(differences) - len(unexplained),
           unexplained_differences=len(unexplained), features_missing_in_this_release=skipped,
           differences=[{"scenario": r.scenario, "step": r.step, "field": r.field, "reason": r.reason,
                         "kafka": r.kafka, "kreassign": r.kreassign} for r in differences],
           table=f"bench/results/side_by_side_{target.version}.md", wall_s=round(wall, 1),
           load_before=round(load_before, 2), load_after=round(os.getloadavg()[0], 2), note=note)
    return kafka_runs


def _cell(text: str) -> str:
    text = text if len(text) <= CELL else text[:CELL - 1] + "…"
    return text.replace("|", "\\|").replace("\n", "⏎")


def _value(row: Row, side: Any, other: Any) -> str:
    """What a table cell shows: the exit code, or the first line where the two sides differ (the
    first line when they agree), or a state in short."""
    if row.field == "exit":
        return f"exit {side}"
    if isinstance(side, str):
        mine, theirs = side.split("\n"), str(other).split("\n")
        at = next((i for i, line in enumerate(mine) if i >= len(theirs) or line != theirs[i]), 0)
        line = mine[at] if at < len(mine) else ""
        return _cell(("…" if at else "") + (line or "(empty)"))
    return _cell(json.dumps(side, sort_keys=True, separators=(",", ":")))


def write_table(version: str, scenarios: Sequence[Scenario], rows: Sequence[Row]) -> None:
    steps: dict[tuple[str, str], list[Row]] = {}
    for row in rows:
        steps.setdefault((row.scenario, row.step), []).append(row)
    same = sum(1 for group in steps.values() if all(r.same for r in group))
    lines = [f"# Kafka {version}'s reassignment tool and kreassign, side by side",
             "",
             f"Written by `python -m bench.bench_side_by_side` on {time.strftime('%Y-%m-%d')}: {len(scenarios)} "
             f"scenarios, {len(steps)} steps, {same} the same in every field. Kafka's tool is "
             "`org.apache.kafka.tools.reassign.ReassignPartitionsCommand` of this release; kreassign is the "
             "installed command. Compared per step: stdout (Kafka's Java stack trace after an `Error:` line "
             "set aside), the error line (stderr's first line), the exit code, and the cluster's state "
             "(throttle configs, replica assignment, end offsets). A cell shows the exit code, or the first "
             "line where the two differ. The reasons are in `man kreassign` (docs/kafka-differences.md).",
             "", "| scenario | step | field | Kafka's tool | kreassign | same? |", "|---|---|---|---|---|---|"]
    for (scenario, step), group in steps.items():
        shown = [r for r in group if not r.same] or [next((r for r in group if r.field in ("stdout", "state")),
                                                          group[0])]
        for r in shown:
            verdict = "yes" if r.same else (f"no: {REASONS[r.reason]}" if r.reason else "**NO (unexplained)**")
            lines.append(f"| {_cell(scenario)} | {_cell(step)} | {r.field} | {_value(r, r.kafka, r.kreassign)} | "
                         f"{_value(r, r.kreassign, r.kafka)} | {verdict} |")
    (RESULTS / f"side_by_side_{version}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_version_table(kafka_runs: dict[str, dict[str, Run]]) -> None:
    """Where Kafka's own tool prints differently between the releases benched (same scenario,
    same step, same field)."""
    versions = sorted(kafka_runs, key=lambda v: tuple(int(p) for p in v.split(".")))
    old, new = versions[0], versions[-1]
    lines = [f"# Kafka {old}'s reassignment tool against Kafka {new}'s", "",
             f"Written by `python -m bench.bench_side_by_side` on {time.strftime('%Y-%m-%d')}: each release's tool "
             "on its own cluster, the same scenarios; the steps where their output differs. kreassign prints "
             f"Kafka {new}'s text against every release (`man kreassign`, DIFFERENCES FROM KAFKA'S TOOL).", "",
             f"| scenario | step | field | Kafka {old} | Kafka {new} |", "|---|---|---|---|---|"]
    for name, run_old in kafka_runs[old].items():
        run_new = kafka_runs[new].get(name)
        if run_new is None:
            continue
        for e_old, e_new in zip(run_old.entries, run_new.entries):
            f_old, f_new = fields(e_old, run_old.names), fields(e_new, run_new.names)
            for key in f_old:
                if f_old[key] != f_new.get(key):
                    row = Row(name, e_old.step, key, f_old[key], f_new.get(key))
                    lines.append(f"| {_cell(name)} | {_cell(e_old.step)} | {key} | "
                                 f"{_value(row, row.kafka, row.kreassign)} | {_value(row, row.kreassign, row.kafka)} |")
    (RESULTS / "side_by_side_kafka_versions.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
