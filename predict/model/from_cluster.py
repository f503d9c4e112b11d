"""Building the model's input from a cluster: which fetcher thread serves a move (Kafka's
`getFetcherId`), what else its fetcher session carries, which leaders start warm, the client
traffic on each broker's NIC, and `from_moves`, the one entry for a plan's moves."""
from __future__ import annotations

from typing import Any

import numpy as np

from kreassign.cluster.errors import InputError
from kreassign.cluster.java_order import java_string_hash
from kreassign.cluster.model import NO_LEADER, ClusterState
from kreassign.predict.model.inputs import ModelInput, PerBroker
from kreassign.predict.model.kafka import INF, FetchLimits, Session

def fetcher_ids(state: ClusterState, rows: np.ndarray, num_fetchers: int) -> np.ndarray:
    """Kafka's AbstractFetcherManager.getFetcherId: abs(31 * topic.hashCode + partition) % n."""
    if num_fetchers <= 1:
        return np.zeros(len(rows), np.int64)
    topic_hash = np.array([java_string_hash(t) for t in state.topics], dtype=np.int64)
    raw = 31 * topic_hash[state.topic_index[rows]] + state.partition[rows].astype(np.int64)
    as_int = ((raw + (1 << 31)) % (1 << 32)) - (1 << 31)  # Java int overflow
    return np.where(as_int == -(1 << 31), 0, np.abs(as_int)) % num_fetchers


def session_kinds(isr_keys: np.ndarray, isr_written: np.ndarray, move_keys: np.ndarray) -> np.ndarray:
    """Per move, its `Session` from what the sessions carry: `isr_keys` are the sessions (any
    integer key for leader, follower, fetcher thread) of in-sync followers, `isr_written` whether
    their partition takes writes, `move_keys` the moves' sessions."""
    written = np.asarray(isr_keys)[np.asarray(isr_written, dtype=bool)]
    session = np.where(np.isin(move_keys, written), int(Session.WRITTEN_ISR),
                       np.where(np.isin(move_keys, isr_keys), int(Session.IDLE_ISR), int(Session.ALONE)))
    return session.astype(np.int8)


def fetch_sessions(state: ClusterState, rows: np.ndarray, dest: np.ndarray, num_fetchers: int) -> np.ndarray:
    """Per move (partition `rows`, new replica on `dest`): what else its fetcher session (the
    partition's leader, `dest`, the fetcher thread) carries, as a `Session`: in-sync replicas on
    `dest` of other partitions with that leader and thread, and whether one of those takes
    writes (`session_kinds`)."""
    lengths = np.diff(state.isr_offsets)
    isr_rows = np.repeat(np.arange(len(state)), lengths)
    lead = state.leader.astype(np.int64)
    follower = state.isr_ids.astype(np.int64)
    keep = (lead[isr_rows] >= 0) & (follower != lead[isr_rows])
    isr_rows, follower = isr_rows[keep], follower[keep]
    move_lead = lead[rows]
    ids = np.unique(np.concatenate([follower, lead[isr_rows], dest.astype(np.int64), move_lead]))
    n_ids, n_f = len(ids), max(num_fetchers, 1)

    def key(leader: np.ndarray, to: np.ndarray, fetcher: np.ndarray) -> np.ndarray:
        return (np.searchsorted(ids, leader) * n_ids + np.searchsorted(ids, to)) * n_f + fetcher

    isr_keys = key(lead[isr_rows], follower, fetcher_ids(state, isr_rows, num_fetchers))
    move_keys = key(move_lead, dest.astype(np.int64), fetcher_ids(state, rows, num_fetchers))
    return session_kinds(isr_keys, state.produce_bps[isr_rows] > 0, move_keys)


def move_sessions(state: ClusterState, rows: np.ndarray, dest: np.ndarray, source: np.ndarray,
                  num_fetchers: int) -> tuple[np.ndarray, np.ndarray]:
    """Per move, its `Session` (`fetch_sessions`) and whether its leader `source` is warm
    (`warm_leaders`): what `ModelInput.session` and `.warm` hold. A reassignment under way has
    had its throttles running, so their credit is spent."""
    session = fetch_sessions(state, rows, dest, num_fetchers)
    warm = np.isin(source, warm_leaders(state)) & (not state.reassignments)
    return session, warm


def warm_leaders(state: ClusterState) -> np.ndarray:
    """Broker ids that lead a partition with an in-sync follower: they answer follower fetches
    all the time, so their leader quota windows are warm (`ModelInput.warm`)."""
    followers = np.maximum(np.diff(state.isr_offsets) - 1, 0)
    lead = state.leader.astype(np.int64)
    return np.unique(lead[(followers > 0) & (lead >= 0)])


def client_traffic(state: ClusterState) -> tuple[np.ndarray, np.ndarray]:
    """Per broker (in `state.brokers` order), bytes/s in and out that are not catch-up: produce
    into leaders, follower replication, and consumers reading from leaders."""
    b = len(state.brokers)
    ids = np.array(state.broker_ids, dtype=np.int64)
    pos = np.full(int(max(ids.max(initial=0), state.replica_ids.max(initial=0))) + 1, -1)
    pos[ids] = np.arange(b)
    rf = state.replication_factors
    rows = np.repeat(np.arange(len(state)), rf)
    replica = pos[state.replica_ids]
    leader = np.where(state.leader >= 0, pos[np.maximum(state.leader, 0)], -1)
    follower = (state.replica_ids != state.leader[rows]) & (replica >= 0)
    produce, consume = state.produce_bps, state.consume_bps
    has_leader = leader >= 0
    into = np.bincount(leader[has_leader], weights=produce[has_leader], minlength=b)
    into += np.bincount(replica[follower], weights=produce[rows[follower]], minlength=b)
    out = np.bincount(leader[has_leader], weights=consume[has_leader], minlength=b)
    lead_of = leader[rows[follower]]
    ok = lead_of >= 0
    out += np.bincount(lead_of[ok], weights=produce[rows[follower]][ok], minlength=b)
    return into, out


def from_moves(
    state: ClusterState,
    moves: Any = None,
    *,
    row: np.ndarray | None = None,
    dest: np.ndarray | None = None,
    bytes: np.ndarray | None = None,
    write_bps: np.ndarray | None = None,
    released_bps: np.ndarray | None = None,
    start_s: float | np.ndarray = 0.0,
    leader_rate: PerBroker = INF,
    follower_rate: PerBroker = INF,
    fetch: FetchLimits | None = None,
) -> ModelInput:
    """Model input for moves of a cluster: columns `row` (partition row in `state`), `dest`
    (broker receiving a new replica), `bytes`, `write_bps` and, when the moves have it,
    `released_bps`, taken from `moves` (any object with those attributes, such as the planner's
    Moves) unless given one by one.

    Each move copies from the partition's current leader, as Kafka does (a `source` column, if
    any, is not used). NIC capacities come from the brokers, client traffic from the partitions'
    produce and consume rates, and the in-sync followers of moving partitions count against
    their leader's quota because Kafka's tool throttles every replica of a moving partition.
    What each move's fetcher session also carries comes from the ISRs (`fetch_sessions`), and
    every move starts warm where its leader has in-sync followers (`warm_leaders`), and cold
    elsewhere (`ModelInput.fresh`), unless a reassignment is already under way in `state` (its
    throttles have run).

    Raises:
        InputError: a row outside the cluster or a destination broker it does not have.
    """
    def column(name: str, given: Any) -> np.ndarray:
        if given is not None:
            return np.asarray(given)
        if moves is None or not hasattr(moves, name):
            raise InputError(f"the moves have no '{name}' column")
        return np.asarray(getattr(moves, name))

    rows = column("row", row).astype(np.int64)
    dst = column("dest", dest).astype(np.int64)
    size = column("bytes", bytes).astype(np.float64)
    writes = column("write_bps", write_bps).astype(np.float64)
    if released_bps is None and moves is not None and hasattr(moves, "released_bps"):
        released_bps = np.asarray(moves.released_bps)
    if len(rows) and (rows.min() < 0 or rows.max() >= len(state)):
        raise InputError("a move names a partition row that is not in the cluster")
    fetch = fetch if fetch is not None else FetchLimits()
    ids = np.array(state.broker_ids, dtype=np.int64)
    leaders = state.leader[rows].astype(np.int64)
    leaders = np.where(np.isin(leaders, ids), leaders, NO_LEADER)
    net_in = np.array([b.network_in_bps if b.network_in_bps is not None else INF for b in state.brokers], dtype=np.float64)
    net_out = np.array([b.network_out_bps if b.network_out_bps is not None else INF for b in state.brokers], dtype=np.float64)
    if np.isfinite(net_in).any() or np.isfinite(net_out).any():
        client_in, client_out = client_traffic(state)
    else:
        client_in, client_out = np.zeros(len(ids)), np.zeros(len(ids))
    moving = np.unique(rows)
    isr_followers = np.maximum(np.diff(state.isr_offsets)[moving] - 1, 0)
    lead = state.leader[moving].astype(np.int64)
    known = np.isin(lead, ids)
    pos = np.searchsorted(ids, lead[known])
    leader_base = np.bincount(pos, weights=(state.produce_bps[moving] * isr_followers)[known], minlength=len(ids))
    session, warm = move_sessions(state, rows, dst, leaders, fetch.num_fetchers)
    return ModelInput.build(
        broker_ids=ids, source=leaders, dest=dst, bytes=size, write_bps=writes, start_s=start_s,
        fetcher=fetcher_ids(state, rows, fetch.num_fetchers), session=session, warm=warm, leader_rate=leader_rate,
        follower_rate=follower_rate, network_in=net_in, network_out=net_out, client_in=client_in,
        client_out=client_out, leader_base=leader_base, fetch=fetch,
        released_bps=0.0 if released_bps is None else released_bps, fresh=not state.reassignments,
    )
