"""A warm leader throttle lets a copy through in floods, one per quota span: the emulator against
what real Kafka 4.4.0 did on bench/bench_real_eta.py's leader-bound shapes (three moves out of
broker 3, 2 MB/s on both sides, the `busy` topic written in the background).

Real Kafka (bench/results/real_eta_4.4.0.md, each adding replica's DescribeLogDirs size every
0.25 s): floods of 23.3-24.3 MB (about 12 s of the rate: the windows a warm leader's
`SimpleRate` divides by, plus the fetch that crosses the bound), each delivered at the pace of
the three followers' own throttles in about 4.3 s, then nothing until the flood's bytes leave
the window, 11.0-12.3 s after the one before; the 3 x 20 MB shape completed 25.8-27.0 s after
its submission, the 3 x 80 MB one 117.7-117.8 s (the emulator: 26.4 and 114.1 s of its time).
Real floods shrink to 20.9 MB late in the long shape, once the move into broker 5 (whose session
carries a written partition, so it asks again first) is done and two throttles take them; the
emulator shares the floods evenly, so its moves end together. `floods` reads both engines'
traces the same way."""
from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.bench_real_eta import BACKGROUND, SHAPES, THROTTLE, Shape  # noqa: E402
from kreassign.sandbox.codes import AlterOp
from kreassign.sandbox.engine import Engine
from kreassign.sandbox.eta_probe import floods
from kreassign.sandbox.copy_probe import WARM_S

REAL_FLOOD_BYTES = (23_260_000, 24_310_000)
REAL_PERIOD_S = (11.0, 12.3)
REAL_COMPLETION_S = (25.8, 27.0)


def run_on_emulator(shape: Shape, step_s: float = 0.1) -> tuple[list[tuple[float, int]], float]:
    """The shape's moves on a fresh emulator, throttled as `kreassign execute --throttle` does
    (leader side: the current replicas; follower side: the adding ones), after the background
    topic replicated for a whole quota span (a warm leader): the adding replicas' bytes after
    every step, and when the last move completed (sandbox seconds from the submission)."""
    engine = Engine({b: None for b in range(1, 6)})
    parts = sorted(shape.assignment)
    engine.create_topic(shape.topic, assignments={p: list(shape.assignment[p]) for p in parts},
                        sizes=[shape.size] * len(parts), rates=[shape.write_bps] * len(parts))
    engine.create_topic("busy", assignments={tp.partition: [tp.partition % 5 + 1, (tp.partition + 2) % 5 + 1]
                                             for tp in BACKGROUND},
                        sizes=[0] * len(BACKGROUND), rates=list(BACKGROUND.values()))
    engine.advance(WARM_S)
    rate = str(int(THROTTLE))
    for b in range(1, 6):
        engine.configs.incremental_alter_broker(b, [("leader.replication.throttled.rate", AlterOp.SET, rate),
                                                    ("follower.replication.throttled.rate", AlterOp.SET, rate)], False)
    adding = {p: [b for b in shape.targets[p] if b not in shape.assignment[p]] for p in parts}
    leaders = ",".join(f"{p}:{b}" for p in parts for b in shape.assignment[p])
    followers = ",".join(f"{p}:{b}" for p in parts for b in adding[p])
    engine.configs.incremental_alter_topic(shape.topic, [("leader.replication.throttled.replicas", AlterOp.SET, leaders),
                                                         ("follower.replication.throttled.replicas", AlterOp.SET,
                                                          followers)], False)
    engine.config_changed()
    partitions = [engine.partition(shape.topic, p) for p in parts]
    for p in parts:
        engine.alter_reassignment(shape.topic, p, list(shape.targets[p]))
    start = engine.now
    copied: list[tuple[float, int]] = [(0.0, 0)]
    while any(p is not None and p.reassigning for p in partitions) and engine.now - start < 600:
        engine.step(step_s)
        copied.append((engine.now - start, sum(engine.replica_size(p, b) if b in p.replicas else 0
                                               for p, q in zip(partitions, parts) if p is not None
                                               for b in adding[q])))
    return copied, engine.now - start


def test_floods_groups_growth_between_pauses() -> None:
    copied = [(0.0, 0), (0.25, 0), (0.5, 10), (0.75, 30), (1.0, 30), (4.0, 30), (4.25, 35), (4.5, 35), (5.0, 40)]
    assert floods(copied) == [(0.5, 30), (4.25, 10)]
    assert floods(copied, gap_s=0.1) == [(0.5, 10), (0.75, 20), (4.25, 5), (5.0, 5)]  # polls 0.25 s apart
    assert floods([]) == [] and floods([(0.0, 5)]) == []


@pytest.mark.parametrize("name", ["leader-bound", "leader-bound-long"])
def test_the_emulator_floods_as_real_kafka_does(name: str) -> None:
    shape = SHAPES[name]
    copied, completed = run_on_emulator(shape)
    bursts = floods(copied)
    whole = bursts[:-1]  # the last flood is what was left
    assert len(whole) >= (2 if name == "leader-bound" else 9), bursts
    sizes = [n for _, n in whole]
    periods = [b[0] - a[0] for a, b in zip(bursts, bursts[1:])]
    # one fetch (1 MiB) either side of the real floods; the real spans give or take one window tick
    assert REAL_FLOOD_BYTES[0] - 2**20 <= min(sizes) and max(sizes) <= REAL_FLOOD_BYTES[1] + 2**20, sizes
    assert REAL_PERIOD_S[0] - 0.5 <= statistics.median(periods) <= REAL_PERIOD_S[1] + 0.5, periods
    assert sum(n for _, n in bursts) == pytest.approx(3 * shape.size, rel=1e-6)
    if name == "leader-bound":
        # the real completion counts the submission and the fetchers' start-up (0.1-0.5 s)
        assert REAL_COMPLETION_S[0] * 0.95 <= completed <= REAL_COMPLETION_S[1] * 1.05, completed


@pytest.mark.parametrize("name, log_bytes, real_s", [("leader-bound", 20_121_250, (25.8, 27.0)),
                                                    ("leader-bound-long", 80_485_002, (116.5, 117.8))])
def test_the_model_follows_the_floods(name: str, log_bytes: int, real_s: tuple[float, float]) -> None:
    """The replication model on the same shape (sessions as the bench's cluster has them: the
    move into broker 5 shares its session with the written busy-2, the one into 1 with the idle
    in-sync partition 2, the one into 2 has nothing else) against both engines' completions:
    floods of 12 s of the rate per 11.5 s span, the last one's bytes at the followers' pace.
    `log_bytes`: each partition's size on the real brokers (its record batches' overhead on the
    bench's payload); the long shape's 241 MB is just over ten floods, whose last megabytes go at
    the steady share once the model stops following floods."""
    from kreassign.predict.model import ModelInput, Session, simulate

    shape = SHAPES[name]
    inp = ModelInput.build(broker_ids=[1, 2, 3, 4, 5], source=[3, 3, 3], dest=[5, 1, 2], bytes=[log_bytes] * 3,
                           leader_rate=THROTTLE, follower_rate=THROTTLE, warm=True, fresh=True,
                           session=[Session.WRITTEN_ISR, Session.IDLE_ISR, Session.ALONE])
    eta = simulate(inp, tolerance=0.0).makespan
    _, emulated = run_on_emulator(shape)
    assert real_s[0] * 0.95 <= eta <= real_s[1] * 1.05, eta
    assert eta == pytest.approx(emulated, rel=0.05)
