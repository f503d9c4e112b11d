"""The watch screen captured at the start, the middle and the end of a move on the emulator.

Emulator only: the captures need a partition written steadily (the emulator's load generator)
under a throttle, polled at exact instants of sandbox time (a manual clock); on real Kafka the
same screens would take minutes of real copying and their figures would depend on the machine's
load. The screen is the one `watch` shows on a terminal (`cli.watch_render.WatchScreen`), rendered
to text by a rich console.
"""
from __future__ import annotations

import dataclasses
import io
import math
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console

from kreassign.cli.watch_render import WatchScreen
from kreassign.cluster.admin import KafkaAdmin
from kreassign.cluster.client_config import AdminTimeouts, build_client_config
from kreassign.cluster.units import format_bytes, format_duration, format_rate
from kreassign.execute.journal import JournalStore
from kreassign.execute.live_throttle import ThrottleSetRequest, apply_throttle_change, plan_throttle_set
from kreassign.execute.watch import watch
from kreassign.execute.watch_events import CompleteEvent, ProgressEvent, WatchEvent
from kreassign.execute.watch_request import WatchRequest
from kreassign.sandbox.cluster import SandboxCluster
from kreassign.sandbox.topics import TopicSpec

pytestmark = pytest.mark.e2e
MB = 1_000_000


def text(screen: WatchScreen) -> str:
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(screen.render())
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_the_screen_at_start_middle_and_end_of_a_move(sandbox_factory: Callable[..., SandboxCluster],
                                                       tmp_path: Path) -> None:
    sb = sandbox_factory(brokers=3, racks=0, topics=[TopicSpec("w", 1, 2, 40 * MB, 500_000.0, 0.0)])
    config = build_client_config({}, bootstrap_server=sb.bootstrap)
    with KafkaAdmin.connect(dataclasses.replace(config, timeouts=AdminTimeouts(5.0, 10.0, 1.0))) as admin:
        (p,) = admin.describe_topics(["w"])
        spare = next(b for b in (1, 2, 3) if b not in p.replicas)
        store = JournalStore(tmp_path)
        admin.alter_reassignments({p.tp: [p.replicas[0], spare]})  # (the manual clock: nothing copies yet)
        apply_throttle_change(admin, plan_throttle_set(admin, ThrottleSetRequest(leader_rate=2 * MB, follower_rate=2 * MB)),
                              store=store)
        screen = WatchScreen()
        shots: list[tuple[WatchEvent, str]] = []

        def emit(event: WatchEvent) -> None:
            screen.update(event)
            shots.append((event, text(screen)))

        watch(admin, WatchRequest(interval_s=5, sample_s=10, timeout_s=3600), store=store, clock=lambda: sb.now,
              sleep=sb.advance, emit=emit)
    polls = [(e, t) for e, t in shots if isinstance(e, ProgressEvent)]
    move = f"w-0->{spare}"

    start, first = polls[0]
    assert isinstance(start, ProgressEvent) and start.at == 0.0 and start.model is not None
    lines = first.splitlines()
    assert lines[0].split()[-8:] == ["0.0%", "0", "B/40.0", "MB", "1", "moving,", "0", "done"]
    eta = format_duration(start.model.seconds)
    assert lines[1] == (f"ETA {eta} (replication model; write rates still being sampled (10s): those known so far "
                        "used, the others taken as 0); observed after two polls; throughput -")
    row = next(line for line in lines if line.startswith(move))
    assert row.split()[-3:] == ["-", "-", eta]  # the move's ETA is the overall one: one move, one model run

    middle, during = next((e, t) for e, t in polls if 0.4 <= e.view.fraction <= 0.6)  # type: ignore[union-attr]
    assert isinstance(middle, ProgressEvent) and middle.model is not None
    lines = during.splitlines()
    eta = format_duration(middle.model.seconds)
    age = middle.source.age_s(middle.at)
    assert middle.source.state == "measured" and middle.source.origin is not None
    assert middle.source.origin.window_s == pytest.approx(10.0)
    assert lines[1].startswith(f"ETA {eta} (replication model; writes measured over 10s"
                               + (f", {format_duration(age)} ago)" if age else ")"))
    assert "-" not in lines[1].split("observed")[1] and "held" not in lines[1]
    row = next(line for line in lines if line.startswith(move))
    assert row.split()[-1] == eta and math.isfinite(middle.model.seconds)
    # the writes column shows the rate the emulator writes the partition at (its one partition)
    assert " ".join(row.split()[-3:-1]) == format_rate(float(sb.engine.produce_bps[0]))

    end, last = shots[-1]
    assert isinstance(end, CompleteEvent)
    lines = last.splitlines()
    final = polls[-1][0]
    total = f"{format_bytes(final.view.total)}/{format_bytes(final.view.total)}"  # type: ignore[union-attr]
    assert " ".join(lines[0].split()[2:]) == f"100.0% {total} 0 moving, 1 done"
    assert lines[1].startswith("ETA done (replication model; writes measured")
    assert any(line.startswith(f"  [{format_duration(end.at)}] All moves finished after") for line in lines)
    # from the first poll on, no figure went back to unknown
    for e, shot in polls:
        figures = e.figures  # type: ignore[union-attr]
        assert figures["eta"].value is not None
        if e.at > 0:
            assert figures["throughput"].value is not None and figures["observed"].value is not None, shot
