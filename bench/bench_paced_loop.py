"""The paced loop at scale: a plan of 24k partitions run with --max-moves-per-broker 200 and
--interval 2s, in process on an in-memory cluster (each broker answers in no time, so what is
measured is kreassign's own CPU per poll). Moves finish at a fixed share per poll; the loop must
refill the freed slots at every poll (the limit stays filled) and a poll's CPU must follow the
moves in flight, not the plan (issue 29: 20 CPU s per poll, only 541 partitions started in the
first minute).

    python -m bench.bench_paced_loop [--partitions 24000] [--per-topic 1000] [--brokers 30] [--limit 200] [--polls 30]
"""
from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench.common import record

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from fake_cluster import FakeCluster  # noqa: E402

from kreassign.cluster.model import PartitionTarget, TopicPartition, TopicPartitionReplica  # noqa: E402
from kreassign.cluster.port import LogDir, LogDirReport, ReplicaLogDir  # noqa: E402


class Lean(FakeCluster):
    """The fake cluster with DescribeLogDirs that reads only the partitions asked for (the fake's
    own walks every replica of the cluster, which would be measured instead of kreassign)."""

    def log_dir_sizes(self, brokers: Iterable[int] | None = None, *,
                      partitions: Iterable[TopicPartition] | None = None) -> LogDirReport:
        wanted = set(self.brokers) if brokers is None else set(brokers)
        tps = list(self.partitions) if partitions is None else list(partitions)
        replicas = {}
        for tp in tps:
            part = self.partitions.get(tp)
            for b in (part.replicas if part is not None else ()):
                if b in wanted:
                    replicas[TopicPartitionReplica(tp.topic, tp.partition, b)] = ReplicaLogDir(
                        log_dir=self.log_dirs[0], size_bytes=1000, offset_lag=0)
        return LogDirReport(replicas=replicas, dirs={b: (LogDir(path=self.log_dirs[0]),) for b in wanted})


def run(partitions: int, brokers: int, limit: int, polls: int, finish_share: float, seed: int,
        per_topic: int = 1000) -> dict[str, Any]:
    from kreassign.execute.executor import ExecuteRequest
    from kreassign.execute.journal import JournalStore
    from kreassign.execute.lock import LockConfig
    from kreassign.execute.pacing import PaceLimits
    from kreassign.execute.run import RunControl, run_execute
    from kreassign.execute.watch_events import WaveEvent

    rng = random.Random(seed)
    fake = Lean(list(range(1, brokers + 1)))
    targets = []
    for t in range(partitions // per_topic):
        assignment = [rng.sample(range(1, brokers + 1), 3) for _ in range(per_topic)]
        fake.add_topic(f"t{t}", assignment)
        for p, replicas in enumerate(assignment):
            new = rng.choice([b for b in range(1, brokers + 1) if b not in replicas])
            targets.append(PartitionTarget(f"t{t}", p, (replicas[0], replicas[1], new)))
    now = [0.0]
    cpu: list[float] = []
    fill: list[float] = []
    started_first_minute = [0]
    mark = [time.process_time()]

    class Done(BaseException):
        pass

    def sleep(seconds: float) -> None:
        cpu.append(time.process_time() - mark[0])
        into: dict[int, int] = {}
        for r in fake.list_reassignments().values():
            for b in r.adding:
                into[b] = into.get(b, 0) + 1
        fill.append(sum(into.values()) / (limit * brokers))
        now[0] += seconds
        moving = sorted(fake.list_reassignments())
        fake.complete(*rng.sample(moving, int(len(moving) * finish_share)))
        if len(cpu) >= polls:
            raise Done
        mark[0] = time.process_time()

    def on_event(event: Any) -> None:
        if isinstance(event, WaveEvent) and now[0] <= 60.0:
            started_first_minute[0] += len(event.wave.partitions)

    lock = LockConfig(wall=lambda: 1e6 + now[0], sleep=lambda s: None, settle_s=0.0, host="bench", pid=1,
                      alive=lambda p: True)
    control = RunControl(lock=lock, clock=lambda: now[0], sleep=sleep)
    request = ExecuteRequest(targets=tuple(targets), leader_rate=10_000_000, follower_rate=10_000_000)
    start = time.process_time()
    try:
        run_execute(fake, request, store=JournalStore(tempfile.mkdtemp()), pace=PaceLimits(limit), interval_s=2.0,
                    control=control, emit=on_event)
    except Done:
        pass
    steady = cpu[1:]
    return {"partitions": len(targets), "partitions_per_topic": per_topic, "brokers": brokers, "limit": limit,
            "polls": len(cpu),
            "finish_share_per_poll": finish_share, "first_poll_cpu_s": round(cpu[0], 3),
            "steady_poll_cpu_s_max": round(max(steady), 3), "steady_poll_cpu_s_mean": round(sum(steady) / len(steady), 3),
            "slots_filled_min_after_first": round(min(fill[1:]), 4), "slots_filled_mean": round(sum(fill) / len(fill), 4),
            "started_in_first_minute": started_first_minute[0], "total_cpu_s": round(time.process_time() - start, 2)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=24_000)
    parser.add_argument("--brokers", type=int, default=30)
    parser.add_argument("--limit", type=int, default=200)
    parser.add_argument("--polls", type=int, default=30)
    parser.add_argument("--finish-share", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--per-topic", type=int, default=1000, help="partitions per topic (long throttle lists)")
    parser.add_argument("--note", default="")
    args = parser.parse_args()
    result = run(args.partitions, args.brokers, args.limit, args.polls, args.finish_share, args.seed, args.per_topic)
    record("bench_paced_loop", note=args.note, **result)


if __name__ == "__main__":
    main()
