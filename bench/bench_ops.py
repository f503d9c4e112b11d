"""Live operations at scale: `execute`, `verify` and `list` with 10,000 partitions in flight.

Against a 6-broker sandbox holding 10,000 partitions (20 topics x 500, RF 3), every partition is
reassigned under a throttle (one journaled `execute`), then `verify` and `list` are timed through
the library over TCP (what the CLI does after connecting) and as a whole CLI process
(`kreassign --verify`, Python start-up and connection included). The same library calls against
the in-memory fake cluster give the cost of kreassign's own code. Budget (DESIGN.md): verify
under 2 s.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from bench.common import best_of, record

BUDGET_S = 2.0
TOPICS, PARTITIONS = 20, 500


def main() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import kafka  # noqa: F401

    from kreassign.cli.kafka_live import render_list, render_verify
    from kreassign.cluster.admin import open_admin
    from kreassign.cluster.kafka_json import format_reassignment
    from kreassign.cluster.model import PartitionTarget
    from kreassign.sandbox.clock import ManualClock
    from kreassign.sandbox.cluster import SandboxCluster
    from kreassign.sandbox.topics import TopicSpec
    from kreassign.execute.journal import JournalStore
    from kreassign.execute.operations import (
        ExecuteRequest,
        VerifyRequest,
        apply_execute,
        list_reassignments,
        prepare_execute,
        verify,
    )

    specs = [TopicSpec(f"topic-{i:02d}", PARTITIONS, 3, 10_000_000, 1_000.0) for i in range(TOPICS)]
    work = Path(tempfile.mkdtemp(prefix="bench-ops-"))
    store = JournalStore(work / "journal")
    with SandboxCluster(6, 3, specs, clock=ManualClock(), seed=1) as sb, \
            open_admin(sb.bootstrap) as port:
        targets = tuple(PartitionTarget(p.topic, p.partition, tuple(b for b in range(1, 7) if b not in p.replicas))
                        for p in port.describe_topics())
        request = ExecuteRequest(targets=targets, leader_rate=10_000_000, follower_rate=10_000_000)
        start = time.perf_counter()
        result = apply_execute(port, prepare_execute(port, request), store=store)
        execute_s = time.perf_counter() - start
        assert result.ok and len(result.submitted) == len(targets)
        sb.advance(1.0)

        check = VerifyRequest(targets=targets)
        verified = verify(port, check, store=store)
        assert sum(p.state == "in-progress" for p in verified.partitions) == len(targets)
        verify_s = best_of(lambda: render_verify(verify(port, check, store=store)), repeat=3)
        listed = list_reassignments(port)
        list_s = best_of(lambda: render_list(list_reassignments(port)), repeat=3)

        plan = work / "plan.json"
        plan.write_text(format_reassignment(targets))
        env = {**os.environ, "KREASSIGN_JOURNAL_DIR": str(store.root)}

        def cli(*args: str) -> None:
            done = subprocess.run([sys.executable, "-m", "kreassign.cli.main", "--bootstrap-server",
                                   sb.bootstrap, *args], capture_output=True, text=True, env=env, check=True)
            assert done.stdout

        cli_verify_s = best_of(lambda: cli("--reassignment-json-file", str(plan), "--verify"), repeat=2)
        cli_list_s = best_of(lambda: cli("--list"), repeat=2)

    fake_verify_s, fake_list_s = _fake_baseline(targets)
    record("bench_ops", partitions=len(targets), moves_in_flight=len(listed.reassignments),
           execute_10k_s=round(execute_s, 3), verify_10k_s=round(verify_s, 3), list_10k_s=round(list_s, 3),
           cli_verify_10k_s=round(cli_verify_s, 3), cli_list_10k_s=round(cli_list_s, 3),
           fake_verify_10k_s=round(fake_verify_s, 4), fake_list_10k_s=round(fake_list_s, 4),
           verify_share_in_kreassign=round(fake_verify_s / verify_s, 3),
           budget_s=BUDGET_S, within_budget=cli_verify_s < BUDGET_S,
           note="sandbox over TCP (manual clock, nothing completes); cli_* include Python start-up")


def _fake_baseline(targets: tuple[object, ...]) -> tuple[float, float]:
    """The same calls against the in-memory fake: kreassign's own cost, without the network."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from fake_cluster import FakeCluster

    from kreassign.cli.kafka_live import render_list, render_verify
    from kreassign.cluster.model import PartitionTarget
    from kreassign.execute.operations import VerifyRequest, list_reassignments, verify

    plan = [t for t in targets if isinstance(t, PartitionTarget)]
    fake = FakeCluster(range(1, 7))
    by_topic: dict[str, list[list[int]]] = {}
    for t in plan:
        by_topic.setdefault(t.topic, []).append([b for b in range(1, 7) if b not in t.replicas])
    for topic, assignment in by_topic.items():
        fake.add_topic(topic, assignment)
    fake.alter_reassignments({t.tp: t.replicas for t in plan})
    request = VerifyRequest(targets=tuple(plan))
    verify_s = best_of(lambda: render_verify(verify(fake, request)), repeat=3)
    list_s = best_of(lambda: render_list(list_reassignments(fake)), repeat=3)
    return verify_s, list_s


if __name__ == "__main__":
    main()
