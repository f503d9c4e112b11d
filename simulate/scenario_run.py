"""One scenario on one executor: the replication model (`predict.model`, the same
code and settings `kreassign estimate` runs), an optional broker failure, and the client impact, sampled on
a uniform time grid. Pure numpy: the Spark task only converts pandas to these arrays and back.

A broker failure at time `t_f` splits the run in two model runs. Moves finished by `t_f` stay
finished; moves into the failed broker never finish (the reassignment waits for it); moves it
was sending fail over to the partition's next in-sync replica and, like every other unfinished
move, continue from what was left at `t_f` (a running move is taken to have progressed
linearly between its start and its predicted finish). The failed broker's client traffic
moves evenly onto the survivors.
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from kreassign.cluster.errors import InputError
from kreassign.simulate.client_impact import BrokerTraffic, ClientModel, assess
from kreassign.simulate.scenarios import RANDOM_BROKER, Scenario
from kreassign.predict.estimate import tolerance_for
from kreassign.predict.model import (
    PACER_POLL_S,
    WAVE_START_S,
    Admission,
    FetchLimits,
    LowerBound,
    ModelInput,
    ModelResult,
    Session,
    broker_positions,
    finished_still_count,
    in_sync_traffic,
    simulate,
)

_MIN_HORIZON_S = 60.0


@dataclass(frozen=True, eq=False)
class ScenarioArrays:
    """One scenario's brokers and moves as numpy columns (brokers sorted by id, moves by move id;
    moves name brokers by id).

    Per broker: capacities, steady client and replication traffic (already scaled by the
    scenario's write load), the leader-throttle base and the throttles. Per move: plan order
    id, source (-1: no leader), destination, bytes, partition write rate (unscaled) and the
    replica that takes over as leader if the source fails (-1: none).
    """

    broker_ids: np.ndarray
    network_in: np.ndarray
    network_out: np.ndarray
    client_in: np.ndarray
    client_out: np.ndarray
    replication_in: np.ndarray
    replication_out: np.ndarray
    leader_base: np.ndarray
    leader_rate: np.ndarray
    follower_rate: np.ndarray
    move_id: np.ndarray
    source: np.ndarray
    dest: np.ndarray
    bytes: np.ndarray
    write_bps: np.ndarray
    failover_source: np.ndarray
    released_bps: np.ndarray
    """in-sync replication its leader stops sending when the move completes (unscaled)"""
    session: np.ndarray | None = None
    """what else each move's fetcher session carries (`predict.model.Session`; None: nothing)"""
    warm: np.ndarray | None = None
    """whether each move's leader throttle starts warm (`ModelInput.warm`; None: no)"""

    def __len__(self) -> int:
        return len(self.move_id)

    def positions(self, ids: np.ndarray) -> np.ndarray:
        """Positions of broker ids in `broker_ids` (sorted ascending)."""
        return broker_positions(self.broker_ids, ids)


@dataclass(frozen=True, eq=False)
class ScenarioRun:
    """Outcome of one scenario: per move, per broker on the grid, and totals."""

    finish_s: np.ndarray
    lower_bound_s: float
    """the model's lower bound of the run (`predict.model.lower_bound`); with a failure, the
    failure time plus the bound of what is left then, on the brokers left"""
    bottleneck_broker: int | None
    """the broker that sets it (None when nothing limits, or no broker does)"""
    failed_broker: int | None
    failed_at_s: float | None
    grid_t_s: np.ndarray
    bytes_remaining: np.ndarray
    """bytes of the plan not yet copied at each sample (`plan_bytes_left`)"""
    rate_in: np.ndarray
    """(brokers, samples) average catch-up bytes/s into each broker over each sample"""
    rate_out: np.ndarray
    pending_bytes: np.ndarray
    """(brokers, samples) bytes of moves into each broker not finished at each sample time"""
    horizon_s: float
    """where the model's finite story ends: the makespan, or for a run that never finishes its
    last event (the grid runs on past it so the stall shows; totals stop here)"""

    @property
    def makespan_s(self) -> float:
        return float(self.finish_s.max()) if len(self.finish_s) else 0.0

    @property
    def stalled_moves(self) -> int:
        return int(np.count_nonzero(np.isinf(self.finish_s)))


def model_input(arrays: ScenarioArrays, scenario: Scenario, *, client_in: np.ndarray | None = None,
                client_out: np.ndarray | None = None, fetch: FetchLimits | None = None,
                in_sync: tuple[np.ndarray, np.ndarray] | None = None) -> ModelInput:
    """The replication model's input for this scenario (the NIC carries clients and in-sync
    followers; the leader throttle also counts the moving partitions' in-sync followers).
    `in_sync`: per broker, the (sent, received) replication of moves completed before the run
    starts, which both the throttles and the NICs still carry (`_after_failure`)."""
    c_in = arrays.client_in if client_in is None else client_in
    c_out = arrays.client_out if client_out is None else client_out
    sent, received = in_sync if in_sync is not None else (0.0, 0.0)
    return ModelInput.build(
        broker_ids=arrays.broker_ids, source=arrays.source, dest=arrays.dest, bytes=arrays.bytes,
        write_bps=arrays.write_bps * scenario.write_multiplier,
        leader_rate=arrays.leader_rate, follower_rate=arrays.follower_rate,
        network_in=arrays.network_in, network_out=arrays.network_out,
        # (a leader that stopped serving removed in-sync replicas sends less: never below nothing)
        client_in=c_in + arrays.replication_in + received,
        client_out=np.maximum(c_out + arrays.replication_out + sent, 0.0),
        leader_base=np.maximum(arrays.leader_base + sent, 0.0), follower_base=received, fetch=fetch,
        released_bps=arrays.released_bps * scenario.write_multiplier,
        session=Session.ALONE if arrays.session is None else arrays.session,
        warm=False if arrays.warm is None else arrays.warm,
    )


def _admission(scenario: Scenario, priority: np.ndarray) -> Admission | None:
    if scenario.moves_per_broker is None:
        return None
    # as kreassign's pacer runs it: the next moves start at its poll after a slot frees
    return Admission(priority=priority, max_moves_per_broker=scenario.moves_per_broker, poll_s=PACER_POLL_S,
                     wave_start_s=WAVE_START_S)


def _simulate(inp: ModelInput, admission: Admission | None) -> ModelResult:
    # The model subtracts inf - inf for moves that never start (no leader), harmlessly.
    with np.errstate(invalid="ignore"):
        return simulate(inp, admission=admission, tolerance=tolerance_for(len(inp)))


def run_model(arrays: ScenarioArrays, scenario: Scenario) -> ModelResult:
    """The model on this scenario without failures, moves admitted in plan order."""
    return _simulate(model_input(arrays, scenario),
                     _admission(scenario, np.arange(len(arrays), dtype=np.int64)))


def run_scenario(arrays: ScenarioArrays, scenario: Scenario, points: int) -> ScenarioRun:
    """Run the model (and the failure, if any) and sample it on `points` grid times.

    Raises:
        InputError: the failing broker is not in the cluster.
    """
    first = run_model(arrays, scenario)
    lower_s, bottleneck = first.lower.seconds, first.lower.broker
    if scenario.failure is None:
        finish, log, curve = first.finish_s, _rate_log(first), (first.times, first.remaining_bytes)
        failed, failed_at = None, None
    else:
        failed, failed_at = _failure_point(arrays, scenario, first)
        finish, log, curve, after = _after_failure(arrays, scenario, first, failed, failed_at)
        if after is not None:
            # The bound without the failure is another run's: moves that fail over to a faster
            # leader can end well before it (190 s against 58 s when a 1 MB/s leader fails).
            lower_s, bottleneck = failed_at + after.seconds, after.broker
    grid = _grid(finish, curve[0], points)
    rate_out, rate_in = _grid_rates(log, len(arrays.broker_ids), grid)
    pending = _pending(arrays, finish, grid)
    end = float(finish.max()) if len(finish) else 0.0
    horizon = end if math.isfinite(end) else float(curve[0].max(initial=0.0))
    return ScenarioRun(
        finish_s=finish, lower_bound_s=float(lower_s),
        bottleneck_broker=bottleneck if lower_s > 0 else None,
        failed_broker=failed, failed_at_s=failed_at, grid_t_s=grid,
        bytes_remaining=plan_bytes_left(arrays, finish, rate_in, pending, grid),
        rate_in=rate_in, rate_out=rate_out, pending_bytes=pending, horizon_s=horizon,
    )


def plan_bytes_left(arrays: ScenarioArrays, finish: np.ndarray, rate_in: np.ndarray, pending: np.ndarray,
                    grid: np.ndarray) -> np.ndarray:
    """Bytes of the plan not yet copied at each sample, from the catch-up rates the throughput
    plot draws (`rate_in`, the average over each sample), per broker, summed over brokers.

    One timeline for both plots: the curve goes down wherever the brokers copy, in proportion to
    what they receive, and stays flat where nothing is copied. What a broker receives is the
    plan's bytes and the writes its moves follow meanwhile:
    - A broker whose moves all finish receives, by its last finish, everything it will: each
      byte it receives counts for its share of the plan's bytes (plan bytes over all received),
      so its part reaches 0 at its last finish, not before. (Counting received bytes one for one
      ended the curve hours early wherever moves followed heavy writes; capping it by the bytes
      of unfinished moves held it flat while brokers copied.)
    - A broker with a move that never finishes (slower than its partition's writes, or into a
      failed broker) counts received bytes one for one, never more than its unfinished moves'
      bytes (`pending`): the curve shows the plan's bytes copied, the never-finishing mark the
      chase of writes without end. The model's own curve is the lag (writes included), which
      for such a move only grows.
    """
    n = len(arrays.broker_ids)
    dest = arrays.positions(arrays.dest)
    total = np.bincount(dest, weights=arrays.bytes, minlength=n)
    copied = rate_in[:, :-1] * np.diff(grid)[None, :]
    received = np.concatenate((np.zeros((n, 1)), np.cumsum(copied, axis=1)), axis=1)
    everything = received[:, -1:]
    endless = (np.bincount(dest, weights=~np.isfinite(finish), minlength=n) > 0) | (everything[:, 0] <= 0)
    share_left = 1.0 - np.divide(received, everything, out=np.zeros_like(received), where=everything > 0)
    left = np.where(endless[:, None], np.minimum(pending, np.maximum(total[:, None] - received, 0.0)),
                    total[:, None] * share_left)
    out: np.ndarray = left.sum(axis=0)
    return out


# ---- failure ----------------------------------------------------------------------------------
def _failure_point(arrays: ScenarioArrays, scenario: Scenario, first: ModelResult) -> tuple[int, float]:
    failure = scenario.failure
    assert failure is not None
    if failure.at_s is not None:
        at = float(failure.at_s)
    else:
        assert failure.at_fraction is not None
        end = first.makespan if math.isfinite(first.makespan) else first.completable_makespan
        at = failure.at_fraction * end
    if failure.broker == RANDOM_BROKER:
        involved = np.union1d(arrays.dest, arrays.source[arrays.source >= 0])
        pool = involved if len(involved) else arrays.broker_ids
        rng = np.random.default_rng(scenario.seed)
        return int(pool[rng.integers(len(pool))]), at
    if failure.broker not in set(arrays.broker_ids.tolist()):
        raise InputError(f"broker {failure.broker} cannot fail: it is not in the cluster")
    return failure.broker, at


RateLog = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""(time, broker position, bytes/s out, bytes/s in): each entry holds until the broker's next"""


def _rate_log(result: ModelResult, shift: float = 0.0) -> RateLog:
    return result.rate_time + shift, result.rate_broker, result.rate_out, result.rate_in


def _after_failure(arrays: ScenarioArrays, scenario: Scenario, first: ModelResult, failed: int, at: float
                   ) -> tuple[np.ndarray, RateLog, tuple[np.ndarray, np.ndarray], LowerBound | None]:
    """Finish times, rate log and remaining curve of a run where `failed` goes down at `at`, and
    the lower bound of the moves left to run then (None: every move was done by then)."""
    done = first.finish_s <= at
    stuck = ~done & (arrays.dest == failed)
    rest = np.flatnonzero(~done & ~stuck)
    started = first.start_s[rest] <= at
    remaining = _remaining_at(arrays, scenario, first, at)[rest]
    source = arrays.source[rest]
    source = np.where(source == failed, arrays.failover_source[rest], source)
    source = np.where(source == failed, -1, source)

    survivors = arrays.broker_ids != failed
    share = np.where(survivors, 1.0 / max(int(survivors.sum()), 1), 0.0)
    client_in = np.where(survivors, arrays.client_in + arrays.client_in[~survivors].sum() * share, 0.0)
    client_out = np.where(survivors, arrays.client_out + arrays.client_out[~survivors].sum() * share, 0.0)
    second_arrays = ScenarioArrays(
        broker_ids=arrays.broker_ids, network_in=arrays.network_in, network_out=arrays.network_out,
        client_in=client_in, client_out=client_out,
        replication_in=np.where(survivors, arrays.replication_in, 0.0),
        replication_out=np.where(survivors, arrays.replication_out, 0.0),
        leader_base=arrays.leader_base, leader_rate=arrays.leader_rate,
        follower_rate=arrays.follower_rate, move_id=arrays.move_id[rest], source=source,
        dest=arrays.dest[rest], bytes=remaining, write_bps=arrays.write_bps[rest],
        failover_source=arrays.failover_source[rest], released_bps=arrays.released_bps[rest],
        session=None if arrays.session is None else arrays.session[rest],
    )  # not warm: the leader throttles have run since the start (the model follows floods from time 0 only)
    # Moves already copying keep their slots: they are first in line after the failure.
    priority = np.concatenate([np.flatnonzero(started), np.flatnonzero(~started)]).astype(np.int64)
    admission = _admission(scenario, priority)
    in_sync = _in_sync_at(arrays, scenario, done, failed) if finished_still_count(admission) else None
    second = _simulate(model_input(second_arrays, scenario, in_sync=in_sync), admission)

    finish = first.finish_s.copy()
    finish[stuck] = math.inf
    finish[rest] = at + second.finish_s
    before = first.rate_time < at
    n_brokers = len(arrays.broker_ids)
    log = tuple(np.concatenate(parts) for parts in zip(
        (first.rate_time[before], first.rate_broker[before], first.rate_out[before], first.rate_in[before]),
        (np.full(n_brokers, at), np.arange(n_brokers), np.zeros(n_brokers), np.zeros(n_brokers)),
        _rate_log(second, at),
    ))
    stuck_bytes = float(arrays.bytes[stuck].sum())
    keep = first.times < at
    times = np.concatenate([first.times[keep], at + second.times])
    left_bytes = np.concatenate([first.remaining_bytes[keep], second.remaining_bytes + stuck_bytes])
    return finish, log, (times, left_bytes), second.lower if len(rest) else None  # type: ignore[return-value]


def _in_sync_at(arrays: ScenarioArrays, scenario: Scenario, done: np.ndarray, failed: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """Per broker, the (sent, received) replication of the moves `done` before the failure: their
    new replicas follow the writes in sync, and when one throttle list covers the whole plan
    (`finished_still_count`) the throttles count that traffic until the end of the run, as the
    model does once a move completes (`in_sync_traffic`).
    Without it the run after the failure started with quotas as empty as at time 0 (a plan
    split at a broker that takes no part in it ended in 5h23m instead of 8h51m). The failed
    broker receives nothing; a partition it led is sent by its failover leader."""
    n = len(arrays.broker_ids)
    writes = arrays.write_bps * scenario.write_multiplier
    released = arrays.released_bps * scenario.write_multiplier
    kept = done & (arrays.dest != failed)
    leader = np.where(arrays.source == failed, arrays.failover_source, arrays.source)
    sends = kept & (leader >= 0) & (leader != failed)
    src = np.where(sends[kept], arrays.positions(leader[kept]), -1)
    return in_sync_traffic(src, arrays.positions(arrays.dest[kept]), writes[kept], released[kept], n)


def _remaining_at(arrays: ScenarioArrays, scenario: Scenario, first: ModelResult,
                  at: float) -> np.ndarray:
    """Bytes each move still has to copy at time `at` (0 for finished moves).

    The model reports each broker's catch-up traffic, not each move's, so a broker's bytes
    received by `at`, less what its finished moves copied, are shared among its unfinished
    moves in proportion to how long each has been copying (max-min fair sharing gives moves
    on the same bottleneck the same rate). A move's lag shrinks by what it fetched less the
    writes it had to follow meanwhile, and grows past the plan's bytes when the writes outpaced
    it (as the model's own lag does).
    """
    n_brokers = len(arrays.broker_ids)
    dest = arrays.positions(arrays.dest)
    received = np.zeros(n_brokers)
    for brokers, (into,) in _broker_integrals(first.rate_time, first.rate_broker, (first.rate_in,), np.array([at])):
        received[brokers] = into[:, 0]
    finished = first.finish_s <= at
    copied = np.bincount(dest[finished], weights=first.copied_bytes[finished], minlength=n_brokers)
    fetched_by_open = np.maximum(received - copied, 0.0)
    active = ~finished & (first.start_s <= at)
    elapsed = np.where(active, at - np.where(active, first.start_s, 0.0), 0.0)
    per_broker_elapsed = np.bincount(dest, weights=elapsed, minlength=n_brokers)
    with np.errstate(invalid="ignore", divide="ignore"):
        fetched = np.where(active, fetched_by_open[dest] * elapsed / per_broker_elapsed[dest], 0.0)
    writes = arrays.write_bps * scenario.write_multiplier * elapsed
    left = np.maximum(arrays.bytes - (np.nan_to_num(fetched) - writes), 0.0)
    return np.where(finished, 0.0, left)


# ---- sampling -------------------------------------------------------------------------------
def _grid(finish: np.ndarray, times: np.ndarray, points: int) -> np.ndarray:
    """`points` times from 0 to the makespan (or past the last event when moves never end)."""
    finite = finish[np.isfinite(finish)]
    if len(finite) == len(finish) and len(finish):
        horizon = float(finite.max())
    else:
        last = max(float(finite.max(initial=0.0)), float(times.max(initial=0.0)))
        horizon = 1.25 * last
    return np.linspace(0.0, horizon if horizon > 0 else _MIN_HORIZON_S, points)


def _grid_rates(log: RateLog, n_brokers: int, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Average bytes/s out and in of each broker over each sample [t_k, t_k+1) (the last sample
    looks one step past the end), from a change log of piecewise-constant rates."""
    time, broker, out, into = log
    edges = np.append(grid, grid[-1] + (grid[-1] - grid[-2] if len(grid) > 1 else 1.0))
    width = np.diff(edges)
    rate_out = np.zeros((n_brokers, len(grid)))
    rate_in = np.zeros((n_brokers, len(grid)))
    for brokers, (to, ti) in _broker_integrals(time, broker, (out, into), edges):
        rate_out[brokers] = np.diff(to, axis=1) / width
        rate_in[brokers] = np.diff(ti, axis=1) / width
    return rate_out, rate_in


def _broker_integrals(time: np.ndarray, broker: np.ndarray, values: tuple[np.ndarray, ...],
                      at: np.ndarray) -> Iterator[tuple[np.ndarray, list[np.ndarray]]]:
    """Per broker of a change log, the integral of each of `values` at the times `at`: each
    broker's log is a row of a table (padded past its end), in blocks of brokers that keep the
    brokers x entries x times comparison small. Yields (brokers, one (brokers, times) array
    per value)."""
    order = np.lexsort((np.arange(len(time)), time, broker))
    time, broker = time[order], broker[order]
    values = tuple(v[order] for v in values)
    starts = np.flatnonzero(np.r_[True, broker[1:] != broker[:-1]]) if len(broker) else np.zeros(0, int)
    counts = np.diff(np.r_[starts, len(broker)])
    width = int(counts.max(initial=0))
    block = max(1, 4_000_000 // max(1, width * len(at)))
    cols = np.arange(width)
    for first in range(0, len(starts), block):
        rows = slice(first, first + block)
        valid = cols[None, :] < counts[rows, None]
        pos = np.where(valid, starts[rows, None] + cols[None, :], 0)
        t = np.where(valid, time[pos], np.inf)
        yield broker[starts[rows]], [_integral_rows(t, np.where(valid, v[pos], 0.0), valid, at) for v in values]


def _integral_rows(times: np.ndarray, rates: np.ndarray, valid: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Per row of a table of step functions (rate[i] from times[i] on, 0 before times[0];
    rows padded with times inf where `valid` is off), the integral from 0 at each time of
    `at`: a sequential sum of the steps, as one step function alone would have it."""
    with np.errstate(invalid="ignore"):
        segment = np.where(valid[:, 1:], np.diff(times, axis=1) * rates[:, :-1], 0.0)
    cumulative = np.concatenate((np.zeros((len(times), 1)), np.cumsum(segment, axis=1)), axis=1)
    idx = (times[:, :, None] <= at[None, None, :]).sum(axis=1) - 1
    j = np.maximum(idx, 0)
    row = np.arange(len(times))[:, None]
    return np.where(idx >= 0, cumulative[row, j] + rates[row, j] * (at[None, :] - times[row, j]), 0.0)


def _pending(arrays: ScenarioArrays, finish: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Per broker and sample, bytes of moves into it that have not finished by then."""
    n_brokers, samples = len(arrays.broker_ids), len(grid)
    dest = arrays.positions(arrays.dest)
    total = np.bincount(dest, weights=arrays.bytes, minlength=n_brokers)
    finished_by = np.searchsorted(grid, finish, side="left")  # first sample at or after finish
    ok = finished_by < samples
    # bincount adds in the moves' order, as np.add.at did, at a fraction of its cost
    done = np.bincount(dest[ok] * samples + finished_by[ok], weights=arrays.bytes[ok],
                       minlength=n_brokers * samples).reshape(n_brokers, samples)
    return total[:, None] - np.cumsum(done, axis=1)


# ---- the task's row -------------------------------------------------------------------------
def scenario_row(scenario_id: int, arrays: ScenarioArrays, run: ScenarioRun,
                 clients: ClientModel) -> dict[str, Any]:
    """One SCENARIO_RESULT row: totals, client impact and the packed timelines."""
    grid = run.grid_t_s
    dt = float(grid[1] - grid[0]) if len(grid) > 1 else 0.0
    traffic = BrokerTraffic(
        capacity_in=arrays.network_in[:, None], capacity_out=arrays.network_out[:, None],
        client_in=arrays.client_in[:, None], client_out=arrays.client_out[:, None],
        replication_in=arrays.replication_in[:, None] + run.rate_in,
        replication_out=arrays.replication_out[:, None] + run.rate_out,
        catchup_in=run.rate_in, catchup_out=run.rate_out,
    )
    # Samples from the horizon on are drawn, not counted: a stalled run would count forever.
    impact = assess(clients, traffic, dt, counted=int(np.count_nonzero(grid < run.horizon_s)))
    n_brokers, samples = run.rate_in.shape
    return {
        "scenario_id": scenario_id,
        "moves": len(arrays),
        "bytes": int(arrays.bytes.sum()),
        "makespan_s": run.makespan_s,
        "lower_bound_s": run.lower_bound_s,
        "bottleneck_broker": run.bottleneck_broker,
        "stalled_moves": run.stalled_moves,
        "failed_broker": run.failed_broker,
        "failed_at_s": run.failed_at_s,
        "max_client_throttle_ms": impact.max_throttle_ms,
        "minutes_below_headroom": impact.minutes_below_target,
        "brokers_at_risk": impact.brokers_at_risk,
        "brokers_saturated": impact.brokers_saturated,
        "max_produce_remote_ms": impact.max_produce_remote_ms,
        "timed_out_requests": impact.timed_out_requests,
        "grid_t_s": grid,
        "grid_bytes_remaining": run.bytes_remaining,
        "tl_broker": np.repeat(arrays.broker_ids.astype(np.int32), samples),
        "tl_t_s": np.tile(grid, n_brokers),
        "tl_replication_in_bps": run.rate_in.ravel(),
        "tl_replication_out_bps": run.rate_out.ravel(),
        "tl_pending_bytes": run.pending_bytes.ravel(),
        "tl_headroom": np.ascontiguousarray(impact.headroom).ravel(),
        "tl_client_throttle_ms": np.ascontiguousarray(impact.throttle_ms).ravel(),
        "tl_produce_remote_ms": np.ascontiguousarray(impact.produce_remote_ms).ravel(),
        "tl_request_delay_ms": np.ascontiguousarray(impact.request_delay_ms).ravel(),
    }
