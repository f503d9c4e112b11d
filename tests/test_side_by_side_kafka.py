"""Kafka's own reassignment tool and kreassign's Kafka-compatible front door, side by side on the
session's real clusters (one per Kafka release of the matrix).

Each scenario of side_by_side_scenarios.py runs once with Kafka's ReassignPartitionsCommand (the
real tool from the fetched jars) and once with `kreassign`, from the same cluster state; every
step's stdout, error line, exit code and every recorded cluster state must be the same, unless
the difference is one kreassign makes on purpose: then it must be listed, with its reason, in
KNOWN (and the reason in docs/kafka-differences.md, which `man kreassign` carries). A listed
difference that no longer shows fails too, so the list stays true.

The release the live tests judge against (4.4) runs every scenario; the others run the scenarios
marked `matrix` (what differs between Kafka releases), which keeps the suite's time down.
`python -m bench.bench_side_by_side` runs all of them on every release and writes the table.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest_kafka import VERSIONS
from side_by_side import KafkaTool, KreassignTool, Outcome, Target, compare, run_both, stale, strip_stack_trace
from side_by_side_scenarios import REASONS, SCENARIOS, known_differences

ROOT = Path(__file__).resolve().parents[1]

@pytest.fixture(scope="session")
def kafka_tools(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, KafkaTool]]:
    """Kafka's tool of each release, one server JVM each, started on first use."""
    tools: dict[str, KafkaTool] = {}
    yield tools
    for tool in tools.values():
        tool.close()


def tool_for(tools: dict[str, KafkaTool], cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> KafkaTool:
    version = cluster.dist.version
    if version not in tools:
        tools[version] = KafkaTool(cluster.dist, tmp_path_factory.mktemp(f"kafka-tool-{version}")).start()
    return tools[version]


def test_the_tool_server_answers_as_the_tool_alone(kafka_matrix: Any, kafka_tools: dict[str, KafkaTool],
                                                  tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    """The server runs the tool's own main: a runtime error and a live --list print what
    kafka-reassign-partitions.sh's JVM per call prints (the stack trace's frames below `main`
    are the server's, so the trace is set aside, as in the comparison)."""
    tool = tool_for(kafka_tools, kafka_matrix, tmp_path_factory)
    missing = str(tmp_path / "missing.json")
    for argv in (["--bootstrap-server", kafka_matrix.bootstrap, "--execute", "--reassignment-json-file", missing],
                 ["--bootstrap-server", kafka_matrix.bootstrap, "--list"]):
        alone, served = tool.run_alone(argv), tool.run(argv)
        assert (served.exit, strip_stack_trace(served.stdout), served.stderr) == (
            alone.exit, strip_stack_trace(alone.stdout), alone.stderr), argv
    assert tool.run(["--bootstrap-server", kafka_matrix.bootstrap, "--execute", "--reassignment-json-file",
                     missing]).exit == 1
    assert tool.run(["--version"]) == Outcome(0, f"{kafka_matrix.dist.version}\n", "")


def _scenarios() -> list[Any]:
    return [pytest.param(s, id=s.name) for s in SCENARIOS]


@pytest.mark.slow
@pytest.mark.parametrize("scenario", _scenarios())
def test_side_by_side(kafka_matrix: Any, kafka_tools: dict[str, KafkaTool], scenario: Any,
                      tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    version = kafka_matrix.dist.version
    if version != VERSIONS[0] and not scenario.matrix:
        pytest.skip(f"runs on {VERSIONS[0]} only in the suite (bench/bench_side_by_side.py runs it on every release)")
    if not scenario.runs_on(version):
        pytest.skip(f"Kafka {version}'s tool has no such feature")
    target = Target.of(kafka_matrix)
    tool = tool_for(kafka_tools, kafka_matrix, tmp_path_factory)
    known = known_differences(version, scenario.name)
    kafka, ours = run_both(target, scenario.run, tool, KreassignTool(tmp_path / "journal"), tmp_path, known)
    rows = compare(scenario.name, kafka, ours, known)
    unexplained = [f"[{r.step}] {r.field}:\n  kafka:     {r.kafka!r}\n  kreassign: {r.kreassign!r}"
                   for r in rows if not r.same and r.reason is None]
    assert not unexplained, "differences from Kafka's tool:\n" + "\n".join(unexplained)
    gone = [(k.reason, k.step, k.fields) for k in stale(known, rows)]
    assert not gone, f"listed differences that did not show (remove them from KNOWN): {gone}"


def test_every_reason_is_in_the_man_page() -> None:
    doc = (ROOT / "docs" / "kafka-differences.md").read_text(encoding="utf-8")
    missing = [key for key, title in REASONS.items() if f"**{title}**" not in doc]
    assert not missing, f"reasons not in docs/kafka-differences.md (nor so in `man kreassign`): {missing}"
