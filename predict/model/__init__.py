"""The replication model behind every ETA: how fast throttled reassignment moves copy their data.

A fluid, event-driven model of Kafka's replication path (broker-semantics Part B §2-§3):

* every moving replica copies from the partition's current leader;
* a broker's leader throttle is shared by the catch-up traffic of the moves it sends, its
  follower throttle by the moves it receives, and its NIC (if known, minus client traffic) by
  both; a fetch cycle carries at most `replica.fetch.max.bytes` per partition and
  `replica.fetch.response.max.bytes` per fetcher thread;
* a throttle gives fetches a share of its rate that depends on how soon they ask again once its
  `SimpleRate` is back under the bound (`FetchLimits.leader_share`, `follower_share`): a follower
  session that also fetches in-sync partitions (`Session`, read from the ISRs by
  `fetch_sessions`) keeps asking and uses its quota whole, one with nothing else backs off 1 s;
* capacity is shared max-min fairly (water-filling) across all these constraints at once;
* a move progresses at (its rate - the partition's write rate) against its lag, and once in
  sync keeps replicating at the write rate, which the throttles still count until they are
  cleared, so a share at or below the write rate never completes.

The core (`simulate`, `lower_bound`) is a pure function of numpy arrays: no pandas, no I/O, and
no Python loop over moves. One file per part:

* `kafka.py`: Kafka's quota and fetch rules, every constant named and explained;
* `inputs.py`: the moves and brokers as arrays (`ModelInput`) and schedule limits (`Admission`);
* `bounds.py`: the lower bound no schedule can beat;
* `fair_share.py`: max-min fair sharing (water-filling);
* the event loop: `loop.py` (the loop and `simulate`), `state.py` (what a run holds),
  `slots.py` (starting and completing moves), `steps.py` (one step's rates and its settling),
  `records.py` (timelines, stalls) and `results.py` (`ModelResult`);
* `from_cluster.py`: building inputs from a `ClusterState`.
"""
from __future__ import annotations

from kreassign.predict.model.bounds import LowerBound, lower_bound
from kreassign.predict.model.from_cluster import (
    client_traffic,
    fetch_sessions,
    fetcher_ids,
    from_moves,
    move_sessions,
    session_kinds,
    warm_leaders,
)
from kreassign.predict.model.inputs import (
    Admission,
    ModelInput,
    PerBroker,
    broker_positions,
    finished_still_count,
    in_sync_traffic,
)
from kreassign.predict.model.kafka import (
    FOLLOWER_GRANULARITY,
    INF,
    LEADER_FLOOD_S,
    LEADER_FLOOD_SPANS,
    LEADER_GRANULARITY,
    NO_FETCH_LIMITS,
    PACER_POLL_S,
    WAVE_START_S,
    FetchLimits,
    Limit,
    MiB,
    Session,
)
from kreassign.predict.model.loop import DEFAULT_TOLERANCE, simulate
from kreassign.predict.model.results import Critical, ModelResult

__all__ = [
    "DEFAULT_TOLERANCE", "FOLLOWER_GRANULARITY", "INF", "LEADER_FLOOD_S", "LEADER_FLOOD_SPANS", "LEADER_GRANULARITY", "NO_FETCH_LIMITS",
    "PACER_POLL_S", "WAVE_START_S",
    "Admission", "Critical", "FetchLimits", "Limit", "LowerBound", "MiB", "ModelInput", "ModelResult", "PerBroker",
    "Session", "broker_positions", "client_traffic", "fetch_sessions", "fetcher_ids", "finished_still_count", "from_moves",
    "in_sync_traffic", "lower_bound", "move_sessions", "session_kinds", "simulate", "warm_leaders",
]
