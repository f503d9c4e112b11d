"""Benchmark schedules: how close paced execution gets to the lower bound, against peers' batching.

A seeded synthetic suite of plans (uniform sizes, log-normal sizes, one hot receiving broker,
one broker sending most moves, write rates near the throttle, a few huge partitions among many
small ones), each with per-broker leader and follower throttles. For every plan the replication
model predicts the makespan of:

* `all-at-once`: Kafka's tool submits the whole plan in one call;
* `batches-K`: KIP-1335 `--reassignment-batch-size K` (and the Kafka-tool loops of Yelp's
  kafka-cluster-manager and kafka-kit users): K partitions in plan order, the next batch only
  when the whole previous batch is done. Each batch is simulated on its own, with its throttles
  cleared after it (as `--verify` does), so earlier batches' writes no longer count;
* `cruise-control`: `num.concurrent.partition.movements.per.broker` = 5 in and out of each
  broker, moves started in proposal order (its BaseReplicaMovementStrategy) as slots free up.
  Its cluster-wide cap (`max.num.cluster.movements` = 1250) is not modelled, which only helps it;
* `ours`: `schedule_waves` with `--max-moves-per-broker N` for a few N and every `--order`; the
  best one is what `kreassign estimate` lets an operator pick before running.

Each ratio is makespan / lower bound (`lower_bound`: no schedule that starts every move at once
can beat it; schedules that hold moves back can go below 1 when writes matter, because a
waiting move does not fall further behind). Every makespan comes from the model at its default
event batching, as `kreassign estimate` prints it. With limits on moves in flight that batching
starts queued moves only at the end of a batched step, so it overstates paced schedules
(Cruise Control's and ours); plans of up to EXACT_UP_TO_MOVES moves are also run exactly
(`tolerance=0`) for all-at-once, Cruise Control and our best pick (`exact_ratio`).
Plans run in two processes; `--quick` runs a smaller suite.
"""
from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from bench.common import record
from kreassign.predict.model import ModelInput, lower_bound, simulate
from kreassign.predict.schedule import ORDERS, schedule_waves

MB = 1_000_000
GB = 1_000_000_000
TARGET = 1.1
CC_MOVES_PER_BROKER = 5
BATCH_SIZES = (100, 1000)
MOVES_PER_BROKER = (2, 5, 25)
EXACT_UP_TO_MOVES = 3_000  # the exact model (one event per completion) costs ~3 ms per move here


@dataclass(frozen=True, eq=False)
class Plan:
    """A synthetic plan: model input in plan order (topic, partition) and each move's partition."""

    name: str
    inp: ModelInput
    partition: np.ndarray


@dataclass(frozen=True)
class Spec:
    """How to draw one plan."""

    name: str
    brokers: int
    partitions: int
    seed: int
    throttle: float = 50 * MB
    sizes: Callable[[np.random.Generator, int], np.ndarray] = lambda rng, n: rng.uniform(0.5, 1.5, n) * GB
    writes: Callable[[np.random.Generator, int], np.ndarray] = lambda rng, n: rng.lognormal(np.log(50e3), 1.0, n)
    hot_dest: float = 0.0  # share of moves into broker 0 (a new broker)
    hot_source: float = 0.0  # share of partitions led by broker 0 (a broker being emptied)
    write_load: float = 0.1  # writes scaled so the busiest broker's moves write this share of its throttle
    two_move_share: float = 0.1  # partitions that move two replicas


def _lognormal(median: float, sigma: float, cap: float) -> Callable[[np.random.Generator, int], np.ndarray]:
    return lambda rng, n: np.minimum(rng.lognormal(np.log(median), sigma, n), cap)


def _with_huge(count: int, low: float, high: float) -> Callable[[np.random.Generator, int], np.ndarray]:
    def draw(rng: np.random.Generator, n: int) -> np.ndarray:
        sizes = np.minimum(rng.lognormal(np.log(300 * MB), 1.0, n), 20 * GB)
        sizes[rng.choice(n, count, replace=False)] = rng.uniform(low, high, count)
        return sizes
    return draw


def build(spec: Spec) -> Plan:
    """Draw a plan: partitions in (topic, partition) order, each copying one or two new replicas
    from its leader; per-broker leader and follower throttles around `spec.throttle`."""
    rng = np.random.default_rng(spec.seed)
    b, p = spec.brokers, spec.partitions
    leader = rng.integers(0, b, p)
    if spec.hot_source:
        leader[rng.random(p) < spec.hot_source] = 0
    moves_of = np.where(rng.random(p) < spec.two_move_share, 2, 1)
    part = np.repeat(np.arange(p), moves_of)
    src = leader[part]
    first = np.r_[True, part[1:] != part[:-1]]
    offset = rng.integers(1, b - 1, len(part))
    # a partition's second new replica lands on the broker after its first, never on the leader
    offset[~first] = offset[np.flatnonzero(~first) - 1] + 1
    dst = (src + offset) % b
    if spec.hot_dest:
        single = moves_of[part] == 1  # a partition's two new replicas never share a broker
        hot = single & (src != 0) & (rng.random(len(part)) < spec.hot_dest)
        dst[hot] = 0
    size = spec.sizes(rng, p)[part]
    writes = spec.writes(rng, p)[part]
    if spec.hot_source:  # a broker being emptied receives nothing
        keep = dst != 0
        part, src, dst, size, writes = part[keep], src[keep], dst[keep], size[keep], writes[keep]
    leader_rate = spec.throttle * rng.uniform(0.6, 1.4, b)
    follower_rate = spec.throttle * rng.uniform(0.6, 1.4, b)
    load = max((np.bincount(src, weights=writes, minlength=b) / leader_rate).max(),
               (np.bincount(dst, weights=writes, minlength=b) / follower_rate).max())
    writes = writes * spec.write_load / load
    inp = ModelInput.build(broker_ids=np.arange(b), source=src, dest=dst, bytes=size, write_bps=writes,
                           leader_rate=leader_rate, follower_rate=follower_rate)
    return Plan(spec.name, inp, part)


# Largest first, so that the two processes finish together.
SUITE: tuple[Spec, ...] = (
    Spec("lognormal", brokers=500, partitions=18_000, seed=2, sizes=_lognormal(1 * GB, 1.5, 500 * GB)),
    Spec("huge-partitions", brokers=300, partitions=13_500, seed=6, throttle=150 * MB,
         sizes=_with_huge(12, 100 * GB, 400 * GB)),
    Spec("uniform", brokers=200, partitions=9_000, seed=1),
    Spec("add-broker", brokers=80, partitions=2_000, seed=3, hot_dest=0.75,
         sizes=_lognormal(1 * GB, 1.0, 50 * GB)),
    Spec("decommission", brokers=100, partitions=2_200, seed=4, hot_source=0.7,
         sizes=_lognormal(1 * GB, 1.0, 50 * GB)),
    Spec("heavy-writes", brokers=100, partitions=2_200, seed=5, write_load=0.8,
         writes=lambda rng, n: rng.lognormal(0.0, 0.5, n)),
)
QUICK: tuple[Spec, ...] = tuple(replace(s, brokers=max(50, s.brokers // 4), partitions=s.partitions // 5)
                                for s in SUITE)


def subset(inp: ModelInput, moves: np.ndarray) -> ModelInput:
    """The same cluster and throttles with only some of the moves."""
    return replace(inp, source=inp.source[moves], dest=inp.dest[moves], bytes=inp.bytes[moves],
                   write_bps=inp.write_bps[moves], start_s=inp.start_s[moves], fetcher=inp.fetcher[moves],
                   released_bps=None if inp.released_bps is None else inp.released_bps[moves],
                   session=None if inp.session is None else inp.session[moves],
                   warm=None if inp.warm is None else inp.warm[moves])


def fixed_batches(plan: Plan, size: int) -> float:
    """Makespan of batches of `size` partitions in plan order, each starting when the previous
    one has completed (and its throttles were cleared)."""
    total = 0.0
    for first in range(0, int(plan.partition.max(initial=-1)) + 1, size):
        moves = np.flatnonzero((plan.partition >= first) & (plan.partition < first + size))
        total += simulate(subset(plan.inp, moves)).makespan
    return total


def _ratio(makespan: float, bound: float) -> float | None:
    if math.isinf(makespan):
        return None
    return round(makespan / bound, 4) if bound > 0 else 1.0


def run_plan(quick: bool, index: int) -> dict[str, Any]:
    """Every strategy on one plan of the suite, as one result row."""
    started = time.perf_counter()
    spec = (QUICK if quick else SUITE)[index]
    plan = build(spec)
    inp = plan.inp
    bound = lower_bound(inp)
    makespans: dict[str, float] = {"all-at-once": simulate(inp).makespan}
    for k in BATCH_SIZES:
        makespans[f"batches-{k}"] = fixed_batches(plan, k)
    makespans["cruise-control"] = schedule_waves(inp, max_moves_per_broker=CC_MOVES_PER_BROKER, order="plan").makespan
    grid: dict[str, dict[str, float | None]] = {}
    best: tuple[float, str, int] = (math.inf, "plan", 0)
    for order in ORDERS:
        grid[order] = {}
        for n in MOVES_PER_BROKER:
            s = schedule_waves(inp, max_moves_per_broker=n, order=order)  # type: ignore[arg-type]
            grid[order][str(n)] = _ratio(s.makespan, bound.seconds)
            best = min(best, (s.makespan, order, n))
    makespans["ours"] = best[0]
    peers = [v for k, v in makespans.items() if k != "ours"]
    exact: dict[str, float | None] | None = None
    if len(inp) <= EXACT_UP_TO_MOVES:
        exact = {
            "all-at-once": _ratio(simulate(inp, tolerance=0).makespan, bound.seconds),
            "cruise-control": _ratio(schedule_waves(inp, max_moves_per_broker=CC_MOVES_PER_BROKER, order="plan",
                                                    tolerance=0).makespan, bound.seconds),
            "ours": _ratio(schedule_waves(inp, max_moves_per_broker=best[2], order=best[1],  # type: ignore[arg-type]
                                          tolerance=0).makespan, bound.seconds),
        }
    return {
        "plan": spec.name, "brokers": inp.n_brokers, "moves": len(inp), "partitions": len(np.unique(plan.partition)),
        "total_gb": round(float(inp.bytes.sum()) / GB, 1),
        "lower_bound_s": round(bound.seconds, 1), "bound_by": bound.limit.label, "bound_broker": bound.broker,
        "makespan_s": {k: None if math.isinf(v) else round(v, 1) for k, v in makespans.items()},
        "ratio": {k: _ratio(v, bound.seconds) for k, v in makespans.items()},
        "ours_best": {"order": best[1], "max_moves_per_broker": best[2]},
        "ours_grid": grid,
        "ours_within_target": makespans["ours"] <= TARGET * bound.seconds,
        "ours_vs_best_peer": _ratio(makespans["ours"], min(peers)),
        "exact_ratio": exact,
        "seconds": round(time.perf_counter() - started, 1),
    }


def _cell(value: float | None) -> str:
    return "never" if value is None else f"{value:.3f}"


def _table(rows: Sequence[dict[str, Any]]) -> str:
    """Ratios to the lower bound: the default model for every strategy, then the exact model."""
    names = list(rows[0]["ratio"])
    exact_names = ("all-at-once", "cruise-control", "ours")
    lines = [f"{'plan':<16}{'moves':>7}{'bound s':>9} " + "".join(f"{n[:15]:>16}" for n in names)
             + "  best of ours          exact: " + " ".join(f"{n[:6]:>6}" for n in exact_names)]
    for r in rows:
        ours = r["ours_best"]
        exact = r["exact_ratio"]
        tail = " ".join(f"{_cell(exact[n]):>6}" for n in exact_names) if exact else "(too big)"
        lines.append(f"{r['plan']:<16}{r['moves']:>7}{r['lower_bound_s']:>9.0f} "
                     + "".join(f"{_cell(r['ratio'][n]):>16}" for n in names)
                     + f"  {ours['order']:<15} N={ours['max_moves_per_broker']:<3}        " + tail)
    return "\n".join(lines)


def main(argv: Sequence[str] = ()) -> None:
    quick = "--quick" in argv
    specs = QUICK if quick else SUITE
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=min(2, os.cpu_count() or 1)) as pool:
        rows = list(pool.map(run_plan, [quick] * len(specs), range(len(specs))))
    print(_table(rows), file=sys.stderr)
    record(
        "bench_schedule", suite="quick" if quick else "full", target_ratio=TARGET,
        load_average_1m=round(os.getloadavg()[0], 2), wall_s=round(time.perf_counter() - started, 1),
        all_within_target=all(r["ours_within_target"] for r in rows), plans=rows,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
