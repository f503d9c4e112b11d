"""The ETA against real Kafka (issue 27 item 2): `kreassign estimate --bootstrap-server` of a plan
against its completion when `kreassign execute` and `watch` run it under the same throttle, on
the session's real 4.4.0 cluster, for the two simplest shapes of bench/bench_real_eta.py (one
idle partition moved off a warm leader; three moves into one broker, follower-bound), with the
bench's background writes in their fetcher sessions. The completion is the broker's own: from
the submission (execute's journaled AlterPartitionReassignments round trip) to the first poll
that sees every partition at its target replicas and out of ListPartitionReassignments
(`sandbox.eta_probe.CompletionWatch`). bench/results/real_eta_4.4.0.md has every shape."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.bench_real_eta import BAR, MB, Shape, background_writes, run_shape  # noqa: E402

from test_copy_probe import sensors_cold

pytestmark = pytest.mark.timing

THROTTLE = 1 * MB
SHAPES = [
    # 25 MB off leader 1 onto 3: leader 1 answers its in-sync followers, so it is warm (6 s of
    # credit); broker 3 also follows the written busy-0 from leader 1, so the move's fetches are
    # woken by its appends (as the bench's); about 25 s at 1 MB/s
    Shape("test-idle", {0: [1, 2]}, 25 * MB, {0: [3, 2]}),
    # 3 x 8 MB into broker 4 from leaders 2, 3 and 5 (none of them broker 1 or 3's sides above;
    # 4 follows the written busy-1 from leader 2): the follower throttle of 4 decides, about 25 s
    Shape("test-follower-bound", {0: [2, 5], 1: [3, 1], 2: [5, 2]}, 8 * MB, {0: [4, 5], 1: [4, 1], 2: [4, 2]}),
]


@pytest.mark.kafka
def test_the_eta_holds_within_5_percent_on_real_kafka(kafka_cluster: Any, tmp_path: Path) -> None:
    cluster = kafka_cluster
    # cold, as on a broker nobody scrapes: a scrape of the follower's sensor in the last quota
    # span would hand its copy up to a few seconds of credit the model cannot know of
    sensors_cold(cluster, ((1, 3), (2, 4), (3, 4), (5, 4)), THROTTLE / 100)
    rows = []
    with cluster.admin() as port, background_writes(cluster, port):
        for shape in SHAPES:
            folder = tmp_path / shape.name
            folder.mkdir()
            rows.append(run_shape(cluster, port, shape, folder, THROTTLE, settle_s=0.0, sample="2s"))
    for row in rows:
        assert row["estimated_s"] is not None
        assert abs(row["error"]) <= BAR, json.dumps(row)
