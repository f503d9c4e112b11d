"""Client impact: simulate's produce-latency model against the canary's measured produce p99 on
the sandbox, at several throttles during one move.

A 3-broker sandbox at speed 1 on 20 MB/s links; a plan adds a replica of each of 3 large
partitions on the broker that has none (one catch-up partition per fetcher session, so a
response carries `replica.fetch.max.bytes`, 1 MiB, of catch-up data). The canary
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
more only once a response arrived), so it adds one response's transfer weighted by the share of
the link it uses, and only inelastic traffic stretches the cycle.
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time
from typing import Any

from bench.common import record

MB = 1_000_000
NETWORK_BPS = 20 * MB
LEVELS: tuple[int | None, ...] = (None, 8 * MB, 4 * MB, 2 * MB, 1 * MB)
SETTLE_S = 4.0
ROUNDS = 20


def main() -> None:
    import numpy as np

    from kreassign.cluster.admin import KafkaAdmin
    from kreassign.cluster.canary import canary_session
    from kreassign.cluster.client_config import build_client_config
    from kreassign.cluster.client_latency import idle_round_trip_ms
    from kreassign.cluster.model import TopicPartition
    from kreassign.sandbox.clock import ScaledClock
    from kreassign.sandbox.cluster import SandboxCluster
    from kreassign.sandbox.topics import TopicSpec
    from kreassign.simulate.client_impact import ClientModel, follower_fetch_ms

    with tempfile.TemporaryDirectory() as state:
        sb = SandboxCluster(3, 0, [TopicSpec("t", 3, 1, 8_000_000_000, 0.0)], clock=ScaledClock(1.0),
                            network_bps=NETWORK_BPS, seed=7, state_dir=state, fresh=True).start()
        try:
            config = build_client_config({}, bootstrap_server=sb.bootstrap)
            port = KafkaAdmin.connect(config)
            try:
                def measure() -> dict[int, Any]:
                    return dict(canary_session(port, config, topic=None, rounds=ROUNDS, interval_s=0.0,
                                               scale=1.0).brokers)

                baseline = measure()
                rtt = idle_round_trip_ms(baseline.values())
                assert rtt is not None
                targets = {}
                for p in sorted((r for r in sb.engine.rows if r.topic == "t"), key=lambda r: r.index):
                    spare = next(b for b in (1, 2, 3) if b not in p.replicas)
                    targets[TopicPartition("t", p.index)] = [p.leader, spare]
                port.alter_reassignments(targets)
                model = ClientModel(fetch_rtt_ms=rtt, fetch_response_max_bytes=1024 * 1024)
                ids = list(sb.engine.replication.broker_ids)
                levels = []
                for level in LEVELS:
                    if level is not None:
                        port.incremental_alter_configs(
                            broker_ops={b: {"leader.replication.throttled.rate": str(level),
                                            "follower.replication.throttled.rate": str(level)} for b in ids},
                            topic_ops={"t": {"leader.replication.throttled.replicas": "*",
                                             "follower.replication.throttled.replicas": "*"}})
                    time.sleep(SETTLE_S)  # the sandbox runs at speed 1: settle in its time
                    rep = sb.engine.replication
                    t0, sent0, recv0 = sb.now, rep.sent.copy(), rep.received.copy()
                    now = measure()
                    window = sb.now - t0
                    out_bps = (rep.sent - sent0) / window
                    in_bps = (rep.received - recv0) / window
                    cap = np.full(len(ids), float(NETWORK_BPS))
                    cycle_out = follower_fetch_ms(model, cap, out_bps, out_bps)
                    cycle_in = follower_fetch_ms(model, cap, in_bps, in_bps)
                    rows = []
                    for i, leader in enumerate(sorted(ids)):  # the canary's partition i: led by i-th broker
                        follower = sorted(ids)[(i + 1) % len(ids)]
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
            finally:
                port.close()
        finally:
            sb.stop()
    ratios = [r["model_over_p99"] for lv in levels for r in lv["brokers"]]
    record("bench_client_impact", network_bps=NETWORK_BPS, rounds_per_level=ROUNDS, settle_s=SETTLE_S,
           fetch_rtt_ms=round(rtt, 2), fetch_response_max_bytes=model.fetch_response_max_bytes, levels=levels,
           model_over_p99_median=round(statistics.median(ratios), 3),
           model_over_p99_range=[min(ratios), max(ratios)], loadavg=[round(x, 2) for x in os.getloadavg()])


if __name__ == "__main__":
    main()
