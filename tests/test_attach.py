"""`watch` attached to a run in flight (`execute/attach.py`): the plan's ETA from the model."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from kreassign.cli.watch_render import WatchScreen, event_lines
from kreassign.cluster.model import PartitionTarget, TopicPartition
from kreassign.cluster.units import format_duration
from kreassign.execute.attach import RunProgressEvent, _Attached, attach, plan_bytes
from kreassign.execute.journal import JournalStore
from kreassign.execute.lock_owner import Owner
from kreassign.execute.pacing import PaceLimits
from kreassign.execute.watch import watch
from kreassign.execute.watch_events import ProgressEvent, WatchEvent
from kreassign.execute.watch_request import WatchRequest
from kreassign.throttle.configs import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS
from test_watch import TP, GrowingCluster

OWNER = Owner("host", 1, "execute", "cluster/plan", 0.0, 0.0, "token")
BEFORE = {TP: (1, 2), TopicPartition("t", 1): (3, 4)}
T1 = TopicPartition("t", 1)


def throttled() -> GrowingCluster:
    fake = GrowingCluster()
    fake.alter_reassignments({TP: [1, 3]})  # the run's first wave; t-1 (when planned) waits behind it
    for b in (1, 2, 3, 4):
        fake.broker_configs[b].update({LEADER_RATE: "5000000", FOLLOWER_RATE: "5000000"})
    fake.topic_configs["t"] = {LEADER_REPLICAS: "*", FOLLOWER_REPLICAS: "*"}
    return fake


def attached_first_poll(plan: dict[TopicPartition, tuple[int, ...]], poll_s: float = 10.0
                        ) -> tuple[float | None, float | None, list[str]]:
    fake = throttled()
    # at most 100 MB in flight: t-1's 50 MB start when t-0's 100 MB are done
    state = _Attached(fake, plan, plan_bytes(fake, plan, {tp: BEFORE[tp] for tp in plan}), limits=PaceLimits(None, 100_000_000, "plan"),
                      broker_ids=[1, 2, 3, 4], poll_s=poll_s)
    event = state.poll(0.0, None, OWNER)
    return event.eta_s, event.eta_model_s, event_lines(event)


def test_the_attached_screen_shows_the_model_eta_from_the_first_poll() -> None:
    """Issue 30: a watch in a second terminal during a paced run said `ETA unknown` until it had
    seen two polls, and then only extrapolated the plan's bytes."""
    observed, alone, lines = attached_first_poll({TP: (1, 3)})
    assert observed is None and alone is not None and math.isfinite(alone)
    assert lines[0].startswith("0.0% of the plan (0 B of 100.0 MB): 0 done, 1 moving, 0 waiting, 0 wave(s); ")
    assert lines[0].endswith(f"ETA {format_duration(alone)} (replication model), observed after two polls "
                             f"[{OWNER.describe()}]")
    # the same model as the run's own screen: a watch of the same moves says the same at its first poll
    fake = throttled()
    events: list[WatchEvent] = []
    watch(fake, WatchRequest(targets=(PartitionTarget("t", 0, (1, 3)),), interval_s=5, timeout_s=0),
          store=None, clock=lambda: fake.now, sleep=fake.advance, emit=events.append)
    first = next(e for e in events if isinstance(e, ProgressEvent))
    assert first.model is not None and first.model.seconds == alone
    # a partition still waiting for its wave adds its copy to the plan's ETA
    _, with_wave, _ = attached_first_poll({TP: (1, 3), T1: (3, 2)})
    assert with_wave is not None and with_wave > alone + 50_000_000 / 5_000_000  # 50 MB more at most 5 MB/s


def test_the_attached_model_starts_the_next_wave_at_the_runs_poll() -> None:
    """The run polls every `--interval` (its journal's): t-1 starts at its first poll after
    t-0 is done (then copies as long whatever the poll), so the ETAs with a 30 s and a 1 s poll
    differ by where those polls fall."""
    alone = attached_first_poll({TP: (1, 3)})[1]
    slow = attached_first_poll({TP: (1, 3), T1: (3, 2)}, poll_s=30.0)[1]
    fast = attached_first_poll({TP: (1, 3), T1: (3, 2)}, poll_s=1.0)[1]
    assert alone is not None and slow is not None and fast is not None
    assert slow - fast == pytest.approx(math.ceil(alone / 30) * 30 - math.ceil(alone), abs=1e-6)
    assert slow - fast >= 1


def test_the_attached_watch_counts_in_cluster_seconds(tmp_path: Path) -> None:
    """On an accelerated sandbox the run's own screen counts in sandbox seconds; the attached one
    counted per wall second, so the partitions' writes looked `scale` times faster than the
    throttles allow and the model said `never`. Here the fake's clock stands for the wall."""
    seen: dict[float, list[RunProgressEvent]] = {}
    walls: dict[float, float] = {}
    for scale in (1.0, 5.0):
        fake = throttled()
        events: list[Any] = []
        attach(fake, OWNER, store=JournalStore(tmp_path), journal=None, targets=(PartitionTarget("t", 0, (1, 3)),),
               interval_s=5.0, timeout_s=5.0, clock=lambda: fake.now, sleep=fake.advance,
               current_owner=lambda: OWNER, emit=events.append, time_scale=scale)
        seen[scale] = [e for e in events if isinstance(e, RunProgressEvent)]
        walls[scale] = fake.now
    slow, fast = seen[1.0][-1], seen[5.0][-1]
    assert (slow.at, fast.at, slow.time_scale, fast.time_scale) == (5.0, 5.0, 1.0, 5.0)
    assert walls == {1.0: 5.0, 5.0: 1.0}  # five cluster seconds are one wall second at x5
    # t-0's 1 MB/s of writes per wall second are 0.2 MB/s per cluster second: less for the copy to
    # keep up with under the same 5 MB/s throttles, so the model's ETA (in cluster seconds) is shorter
    assert slow.eta_model_s is not None and fast.eta_model_s is not None
    assert fast.eta_model_s < slow.eta_model_s
    screen = WatchScreen()
    screen.update(fast)
    assert screen.header == "kreassign watch (sandbox time, x5)"
