"""Client impact: simulate's produce-latency model against the canary's measured produce p99 on
the emulator and on real Kafka, at several throttles during one move.

    python -m bench.bench_client_impact [--engine emulator|kafka] [--version 4.4.0] [--reps N]

A 3-broker cluster on 20 MB/s links (the emulator at speed 1 with --network 20MB/s; real Kafka
with replication links, sandbox/kafka_engine/link.py, whose counters give the rates); each broker
leads one large partition, and a plan adds a replica of each on the next broker (one catch-up
partition per fetcher session, so a response carries `replica.fetch.max.bytes`, 1 MiB, of
catch-up data; every link carries one copy out and one in). The canary
(`kreassign canary`'s library: kafka-python, acks=all) measures a baseline before the move, then
the move runs unthrottled and at 8, 4, 2 and 1 MB/s (`*` throttled replicas, both sides),
each level given a few seconds to settle and then measured with 20 records per broker while the
engine's replication counters give each broker's catch-up bytes/s in and out. The model
(`simulate.client_impact.follower_fetch_ms`, the pure function simulate runs) gets those rates,
the links' capacity, and the canary baseline as its idle round trip (`simulate
--client-baseline`); for the canary partition led by L and followed by F it predicts the worse
of L's outbound and F's inbound cycle. Recorded per level and broker: measured p50/p99, model,
and their ratio; the machine load with it.

Before calibration the model put a whole `replica.fetch.response.max.bytes` (10 MiB) ahead of
every in-sync batch whenever anything was copying and stretched the cycle by
1 / (1 - utilisation) including the catch-up: ~0.5 s at 1 MB/s and the 30 s request timeout
unthrottled, against 12-120 ms measured. Calibrated: catch-up is elastic (a follower asks for
more only once a response arrived), so it adds responses' transfer weighted by the share of the
link it uses (two at the tail since real Kafka showed the one in flight, `RESPONSES_AHEAD_P99`),
and only inelastic traffic stretches the cycle.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from bench.common import record

MB = 1_000_000
NETWORK_BPS = 20 * MB
LEVELS: tuple[int | None, ...] = (None, 8 * MB, 4 * MB, 2 * MB, 1 * MB)
SETTLE_S = 4.0
ROUNDS = 20
PARTITION_BYTES = {"emulator": 8_000_000_000, "kafka": 400_000_000}
"""each moving partition: enough that no move ends before the last level (real bytes take real
time to write, so real Kafka's are smaller: 7 s unthrottled, then a few MB/s, stay within it)"""


@dataclass
class Moving:
    """A started 3-broker cluster and what the bench reads from it."""

    bootstrap: str
    brokers: list[int]
    leaders: dict[int, int]
    """partition of `t` -> its leader"""
    counters: Callable[[], tuple[float, dict[int, int], dict[int, int]]]
    """(now, bytes each broker sent, bytes each received) of catch-up and replication"""


@contextlib.contextmanager
def emulator() -> Iterator[Moving]:
    from kreassign.sandbox.clock import ScaledClock
    from kreassign.sandbox.cluster import SandboxCluster
    from kreassign.sandbox.topics import TopicSpec

    with tempfile.TemporaryDirectory() as state:
        sb = SandboxCluster(3, 0, [TopicSpec("t", 3, 1, PARTITION_BYTES["emulator"], 0.0)], clock=ScaledClock(1.0),
                            network_bps=NETWORK_BPS, seed=7, state_dir=state, fresh=True).start()
        try:
            ids = list(sb.engine.replication.broker_ids)

            def counters() -> tuple[float, dict[int, int], dict[int, int]]:
                rep = sb.engine.replication
                return (sb.now, {b: int(rep.sent[i]) for i, b in enumerate(ids)},
                        {b: int(rep.received[i]) for i, b in enumerate(ids)})

            yield Moving(sb.bootstrap, sorted(ids), {r.index: r.leader for r in sb.engine.rows if r.topic == "t"},
                         counters)
        finally:
            sb.stop()


@contextlib.contextmanager
def real_kafka(version: str) -> Iterator[Moving]:
    from kreassign.sandbox.kafka_engine.cluster import KafkaCluster
    from kreassign.sandbox.kafka_engine.dist import locate
    from kreassign.sandbox.topics import TopicSpec

    with KafkaCluster(locate(None, version), brokers=3, racks=0, log_dirs=1, heap="384m",
                      topics=[TopicSpec("t", 3, 1, PARTITION_BYTES["kafka"], 0.0)], network_bps=NETWORK_BPS) as kafka:
        links = kafka.links
        assert links is not None

        def counters() -> tuple[float, dict[int, int], dict[int, int]]:
            return time.monotonic(), links.sent(), links.received()

        yield Moving(kafka.bootstrap, kafka.brokers, {p: load.replicas[0] for p, load in kafka.topics["t"].items()},
                     counters)


def run_levels(cluster: Moving) -> tuple[float, list[dict[str, Any]]]:
    """The canary's baseline, then the move at every level: (idle round trip, levels)."""
    import numpy as np

    from kreassign.cluster.admin import KafkaAdmin
    from kreassign.cluster.canary import canary_assignment, canary_session
    from kreassign.cluster.client_config import build_client_config
    from kreassign.cluster.client_latency import idle_round_trip_ms
    from kreassign.cluster.model import TopicPartition
    from kreassign.simulate.client_impact import ClientModel, follower_fetch_ms

    config = build_client_config({}, bootstrap_server=cluster.bootstrap)
    port = KafkaAdmin.connect(config)
    ids = cluster.brokers
    try:
        def measure() -> dict[int, Any]:
            return dict(canary_session(port, config, topic=None, rounds=ROUNDS, interval_s=0.0,
                                       scale=1.0).brokers)

        baseline = measure()
        rtt = idle_round_trip_ms(baseline.values())
        assert rtt is not None
        # every broker leads one moving partition and gains one: one catch-up partition per
        # fetcher session, each link carrying one copy out and one in
        port.alter_reassignments({TopicPartition("t", p): [leader, ids[(ids.index(leader) + 1) % len(ids)]]
                                  for p, leader in cluster.leaders.items()})
        model = ClientModel(fetch_rtt_ms=rtt, fetch_response_max_bytes=1024 * 1024)
        canary = canary_assignment(ids)
        levels = []
        for level in LEVELS:
            if level is not None:
                port.incremental_alter_configs(
                    broker_ops={b: {"leader.replication.throttled.rate": str(level),
                                    "follower.replication.throttled.rate": str(level)} for b in ids},
                    topic_ops={"t": {"leader.replication.throttled.replicas": "*",
                                     "follower.replication.throttled.replicas": "*"}})
            time.sleep(SETTLE_S)  # both engines run in wall time here
            t0, sent0, recv0 = cluster.counters()
            now = measure()
            t1, sent1, recv1 = cluster.counters()
            window = t1 - t0
            out_bps = np.array([(sent1[b] - sent0[b]) / window for b in ids])
            in_bps = np.array([(recv1[b] - recv0[b]) / window for b in ids])
            cap = np.full(len(ids), float(NETWORK_BPS))
            cycle_out = follower_fetch_ms(model, cap, out_bps, out_bps)
            cycle_in = follower_fetch_ms(model, cap, in_bps, in_bps)
            rows = []
            for i, leader in enumerate(ids):  # the canary's partition i: led by the i-th broker
                follower = canary[i][1]
                li, fi = ids.index(leader), ids.index(follower)
                predicted = float(max(cycle_out[li], cycle_in[fi]))
                got = now[leader]
                rows.append({"leader": leader, "follower": follower,
                             "leader_out_bps": round(float(out_bps[li])),
                             "follower_in_bps": round(float(in_bps[fi])),
                             "measured_p50_ms": round(got.p50_ms, 2), "measured_p99_ms": round(got.p99_ms, 2),
                             "baseline_p99_ms": round(baseline[leader].p99_ms, 2),
                             "model_ms": round(predicted, 2),
                             "model_over_p50": round(predicted / got.p50_ms, 3),
                             "model_over_p99": round(predicted / got.p99_ms, 3)})
            levels.append({"throttle_bps": level, "window_s": round(window, 2), "brokers": rows})
            print(level, [(r["leader"], r["measured_p50_ms"], r["measured_p99_ms"], r["model_ms"])
                          for r in rows], flush=True)
        return rtt, levels
    finally:
        port.close()


def main(argv: Sequence[str] = ()) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=("emulator", "kafka"), default="emulator")
    parser.add_argument("--version", default="4.4.0", help="the Kafka release (engine kafka)")
    parser.add_argument("--reps", type=int, default=1)
    args = parser.parse_args(argv)
    for _ in range(args.reps):
        with (emulator() if args.engine == "emulator" else real_kafka(args.version)) as cluster:
            rtt, levels = run_levels(cluster)
        ratios = [r["model_over_p99"] for lv in levels for r in lv["brokers"]]
        record("bench_client_impact", engine=args.engine,
               **({"kafka_version": args.version} if args.engine == "kafka" else {}),
               network_bps=NETWORK_BPS, rounds_per_level=ROUNDS, settle_s=SETTLE_S,
               fetch_rtt_ms=round(rtt, 2), fetch_response_max_bytes=1024 * 1024, levels=levels,
               model_over_p99_median=round(statistics.median(ratios), 3),
               model_over_p99_range=[min(ratios), max(ratios)], loadavg=[round(x, 2) for x in os.getloadavg()])


if __name__ == "__main__":
    main(sys.argv[1:])
