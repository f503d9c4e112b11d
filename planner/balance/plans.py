"""Balanced, minimal-movement plans: rebalance, add brokers, decommission, replace, set RF, leaders.

How a plan is made:
1. Fair shares per broker (`targets`): replica counts and bytes water-filled over the
   brokers that may hold data, per rack within the bounds rack awareness imposes, bytes relative
   to disk capacity when every broker reports one; counts rounded to floor/ceil, with the ceilings
   going to brokers that already hold more (so a balanced cluster keeps its counts).
2. Repairs (`place.place`, `repair.py`, largest first, onto the most under-loaded brokers allowed): replicas
   on removed or unknown brokers (by bytes first, so removing brokers keeps bytes balanced; when
   the whole cluster is balanced too they leave through the count phase instead, which fits each
   one to its sink's byte gap; those no broker short of replicas may take are placed afterwards,
   and the goals run once more when that or anything else left a broker off its count band), replicas of partitions off the rack rule (`racks`), new replicas
   for set-rf. A replica that must move but finds no broker makes the plan infeasible
   (`InfeasiblePlanError`) unless `allow_partial`; a rack fix that finds none is only counted.
3. The data goals in the configured order: replica counts (moves from over-target to
   under-target brokers, choosing replicas whose sizes best fit both brokers' byte gaps; most of
   them in vectorised rounds (`bulk`) on big plans, the rest one by one),
   then bytes (moves where the count band has room, else big-for-small swaps). A phase accepts no
   move that worsens a goal ranked above it; "topic" caps each topic's replicas per broker.
4. Preferred leaders (`leaders`): reorder replica lists only.
Everything is deterministic; `seed` only breaks ties between otherwise equal brokers.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from kreassign.cluster.errors import InfeasiblePlanError, InputError
from kreassign.cluster.model import Broker, ClusterState, PartitionTarget, TopicPartitionReplica
from kreassign.cluster.units import Units, format_bytes
from kreassign.planner.balance.bulk import bulk_balance_counts, bulk_eligible
from kreassign.planner.balance.counts import balance_counts
from kreassign.planner.balance.disk import balance_disk
from kreassign.planner.balance.engine import Layout, Targets
from kreassign.planner.balance.place import place
from kreassign.planner.balance.repair import left_on, repair, unplaced
from kreassign.planner.balance.hints import over_capacity, rack_hotspots, topic_rack_limits
from kreassign.planner.balance.metrics import MetricContext, lower_bounds, metrics
from kreassign.planner.balance.racks import rack_limits
from kreassign.planner.balance.targets import integer_shares_by_group, rack_bounds, waterfill
from kreassign.planner.balance.values import BalanceOptions, BalancePlan
from kreassign.planner.balance.leaders import LeaderBalancer


def rebalance(state: ClusterState, options: BalanceOptions | None = None) -> BalancePlan:
    """Balance the whole cluster with as little movement as the goals allow."""
    return _plan(state, "rebalance", options or BalanceOptions(), balance_data=True)


def add_brokers(
    state: ClusterState,
    brokers: Sequence[int | Broker],
    options: BalanceOptions | None = None,
    *,
    only_new: bool = False,
    move_existing: bool = False,
    units: Units = "decimal",
) -> BalancePlan:
    """Move load onto new brokers, balancing the whole cluster including them.

    In a balanced cluster only the new brokers are below target, so every move lands on them;
    with `only_new` nothing but the new brokers may receive replicas even if others are below
    target (Cruise Control's add_broker semantics). Brokers given as ids must be in the cluster;
    `Broker` values not in it are added (for what-if planning on a snapshot). Replicas the named
    brokers already hold stay on them (the plan says so) unless `move_existing`: an operator adds
    brokers to take load, not to have what they hold moved around.

    Raises:
        InputError: an id that is not in the cluster, or no broker given.
    """
    if not brokers:
        raise InputError("give at least one broker to add, e.g. --brokers 7,8")
    extra = [b for b in brokers if isinstance(b, Broker) and not state.has_broker(b.id)]
    ids = [b.id if isinstance(b, Broker) else b for b in brokers]
    known = {b.id for b in state.brokers} | {b.id for b in extra}
    missing = sorted(i for i in ids if i not in known)
    if missing:
        raise InputError(f"broker(s) {_ids(missing)} are not in the cluster; start them first "
                         "(or add them to the snapshot) and try again")
    options = options or BalanceOptions()
    rows = np.repeat(np.arange(len(state)), np.diff(state.replica_offsets))
    on_named = np.isin(state.replica_ids, ids)
    held = [TopicPartitionReplica(state.topic_of(int(r)), int(state.partition[r]), int(b))
            for r, b in zip(rows[on_named], state.replica_ids[on_named])]
    note = None
    if held:
        size = int(state.size_bytes[rows[on_named]].sum())
        holders = _ids(sorted({r.broker for r in held}))
        if move_existing:
            note = (f"broker(s) {holders} already hold {len(held)} replica(s) ({format_bytes(size, units)}); the plan may "
                    "move them like any other (--move-existing)")
        else:
            options = replace(options, pinned=options.pinned | frozenset(held))
            note = (f"broker(s) {holders} already hold {len(held)} replica(s) ({format_bytes(size, units)}): they stay where "
                    "they are; give --move-existing to let the plan move them too")
    plan = _plan(state, "add-brokers", options, balance_data=True,
                 extra_brokers=extra, into_only=frozenset(ids) if only_new else None)
    return plan if note is None else replace(plan, warnings=(note, *plan.warnings))


def decommission(
    state: ClusterState,
    brokers: Sequence[int],
    options: BalanceOptions | None = None,
    *,
    rebalance_rest: bool = False,
) -> BalancePlan:
    """Empty brokers: their replicas go, largest first, to the brokers furthest below their
    byte share that may take them.

    With `rebalance_rest` the rest of the cluster is rebalanced in the same plan.

    Raises:
        InputError: an unknown broker, or removing every broker.
        InfeasiblePlanError: a replica has no broker that may take it (and not `allow_partial`).
    """
    _require_known(state, brokers, "decommission")
    if set(brokers) >= set(state.broker_ids):
        raise InputError("cannot decommission every broker: the replicas would have nowhere to go")
    return _plan(state, "decommission", options or BalanceOptions(), balance_data=rebalance_rest,
                 removed=frozenset(brokers))


def replace_broker(
    state: ClusterState,
    old: int,
    new: int | Broker,
    options: BalanceOptions | None = None,
) -> BalancePlan:
    """Move every replica of `old` onto `new`, keeping its place in the replica list.

    Replicas that `new` cannot take (it already holds the partition, or its rack would break rack
    awareness) go to the best other broker instead.

    Raises:
        InputError: unknown brokers, or `old` equal to `new`.
        InfeasiblePlanError: a replica has no broker that may take it (and not `allow_partial`).
    """
    new_id = new.id if isinstance(new, Broker) else new
    _require_known(state, [old], "replace")
    if old == new_id:
        raise InputError("--from and --to name the same broker")
    extra = [new] if isinstance(new, Broker) and not state.has_broker(new.id) else []
    if not extra and not state.has_broker(new_id):
        raise InputError(f"broker {new_id} is not in the cluster; start it first and try again")
    return _plan(state, "replace-broker", options or BalanceOptions(), balance_data=False,
                 removed=frozenset([old]), extra_brokers=extra, direct=(old, new_id),
                 leaders=False)


def set_replication_factor(
    state: ClusterState,
    topic: str,
    rf: int,
    options: BalanceOptions | None = None,
) -> BalancePlan:
    """Change a topic's replication factor: add replicas on the least-loaded brokers allowed, or
    drop replicas from the most crowded racks and most loaded brokers (never the leader first).

    Raises:
        InputError: unknown topic, RF < 1 or larger than the brokers that may hold it.
        InfeasiblePlanError: a new replica has no broker that may take it (and not `allow_partial`).
    """
    if not state.has_topic(topic):
        raise InputError(f"topic '{topic}' does not exist in the cluster")
    opts = options or BalanceOptions()
    eligible = [b for b in state.broker_ids if b not in opts.exclude_brokers]
    if rf < 1:
        raise InputError("the replication factor must be at least 1")
    if rf > len(eligible):
        raise InputError(f"replication factor {rf} is larger than the {len(eligible)} brokers available")
    if topic in opts.exclude_topics:
        raise InputError(f"topic '{topic}' is excluded; remove it from --exclude-topics")
    rows = state.topic_rows(topic)
    return _plan(state, "set-rf", opts, balance_data=False,
                 rf_changes={r: rf for r in rows}, leaders=False)


def balance_leaders(state: ClusterState, options: BalanceOptions | None = None) -> BalancePlan:
    """Balance preferred leaders by reordering replica lists only; no data moves."""
    opts = options or BalanceOptions()
    goals = tuple(g for g in opts.goals if g in ("leaders", "leader_bytes")) or ("leaders", "leader_bytes")
    return _plan(state, "leaders", replace(opts, goals=goals), balance_data=False, move_data=False)


def _ids(ids: Iterable[int]) -> str:
    return ", ".join(str(i) for i in ids)


def _require_known(state: ClusterState, brokers: Sequence[int], verb: str) -> None:
    if not brokers:
        raise InputError(f"give at least one broker to {verb}")
    missing = sorted(b for b in brokers if not state.has_broker(b))
    if missing:
        raise InputError(f"broker(s) {_ids(missing)} are not in the cluster "
                         f"(known: {_ids(state.broker_ids)})")


@dataclass
class _Brokers:
    ids: np.ndarray  # dense -> id, sorted real brokers first, then ghosts
    real: np.ndarray
    rack_names: tuple[str | None, ...]
    rack: np.ndarray
    racks: int  # real racks (rack groups of real brokers)
    disk: np.ndarray  # disk bytes (nan when unknown)


def _brokers(state: ClusterState, extra: Sequence[Broker], goals_rack: bool,
             warnings: list[str]) -> _Brokers:
    real = sorted(list(state.brokers) + list(extra), key=lambda b: b.id)
    known = {b.id for b in real}
    ghosts = sorted(set(np.unique(state.replica_ids).tolist()) - known)
    if ghosts:
        warnings.append(f"replicas sit on broker id(s) {_ids(ghosts)} that are not in the cluster; "
                        "they are moved to live brokers")
    names = [b.rack for b in real]
    has = [r is not None for r in names]
    if any(has) and not all(has):
        warnings.append("some brokers have no rack: each of them counts as a rack of its own")
    rack_on = goals_rack and any(has)
    if rack_on:
        labels = [r if r is not None else f"\0{b.id}" for b, r in zip(real, names)]
        uniq = sorted(set(labels))
        rack = [uniq.index(x) for x in labels]
        racks = len(uniq)
    else:
        rack = [0] * len(real)
        racks = 1
    ids = np.array([b.id for b in real] + ghosts, dtype=np.int64)
    disk = np.array([np.nan if b.disk_bytes is None else float(b.disk_bytes) for b in real]
                    + [np.nan] * len(ghosts))
    return _Brokers(ids=ids, real=np.array([True] * len(real) + [False] * len(ghosts)),
                    rack_names=tuple(names) + (None,) * len(ghosts),
                    rack=np.array(rack + [racks] * len(ghosts), dtype=np.int64), racks=racks, disk=disk)


def _dense_matrix(state: ClusterState, ids: np.ndarray, width: int) -> np.ndarray:
    raw = state.replica_matrix()
    out = np.full((len(state), max(width, raw.shape[1] if raw.ndim == 2 else 0)), -1, dtype=np.int64)
    if raw.size:
        order = np.argsort(ids)
        pos = order[np.searchsorted(ids[order], np.maximum(raw, 0))]
        out[:, :raw.shape[1]] = np.where(raw >= 0, pos, -1)
    return out


def _plan(
    state: ClusterState,
    command: str,
    options: BalanceOptions,
    *,
    balance_data: bool,
    removed: frozenset[int] = frozenset(),
    extra_brokers: Sequence[Broker] = (),
    into_only: frozenset[int] | None = None,
    direct: tuple[int, int] | None = None,
    rf_changes: Mapping[int, int] | None = None,
    leaders: bool = True,
    move_data: bool = True,
) -> BalancePlan:
    warnings: list[str] = []
    unknown_excluded = sorted(b for b in options.exclude_brokers if not state.has_broker(b))
    if unknown_excluded:
        warnings.append(f"excluded broker(s) {_ids(unknown_excluded)} are not in the cluster")
    br = _brokers(state, extra_brokers, options.has("rack"), warnings)
    nb = len(br.ids)
    n = len(state)
    rf_changes = dict(rf_changes or {})
    width = max([int(state.replication_factors.max()) if n else 0] + list(rf_changes.values()))
    F0 = _dense_matrix(state, br.ids, width)
    rf_now = (F0 >= 0).sum(axis=1)
    rf_final = rf_now.copy()
    for r, v in rf_changes.items():
        rf_final[r] = v

    id_pos = {int(b): i for i, b in enumerate(br.ids)}
    is_removed = ~br.real | np.isin(br.ids, list(removed))
    is_excluded = br.real & np.isin(br.ids, list(options.exclude_brokers))
    receivers = ~is_removed & ~is_excluded
    if into_only is not None:
        receivers &= np.isin(br.ids, list(into_only))
    balanced = ~is_removed & ~is_excluded

    movable = _movable(state, F0, br, options, is_excluded, warnings)
    rack_on = options.has("rack") and br.racks > 1 and any(r is not None for r in br.rack_names)
    K = int(np.unique(br.rack[~is_removed]).size) if (~is_removed).any() else 1
    rack_lo, rack_cap = rack_limits(rf_final, K, rack_on)
    live_rack = np.zeros(int(br.rack.max()) + 1 if nb else 1, dtype=bool)
    live_rack[br.rack[~is_removed]] = True
    locked = bool(rack_on and K > 0 and n and np.all(rf_final[movable.any(axis=1)] % K == 0))

    size = state.size_bytes.astype(np.int64)
    topic = state.topic_index.astype(np.int64)
    tiebreak = np.random.default_rng(options.seed).permutation(nb)
    layout = Layout(
        matrix=F0, size=size, topic=topic, n_topics=len(state.topics), movable=movable,
        rack=br.rack, receivers=receivers, disk_cap=_disk_caps(br, options, nb), rack_on=rack_on,
        topic_on=options.has("topic"), tiebreak=tiebreak, max_moves=options.max_moves,
        max_bytes=options.max_bytes,
    )
    layout.set_rack_caps(rack_lo, rack_cap, live_rack, locked)
    topic_cap, even_cap = _topic_caps(topic, rf_final, len(state.topics), br, balanced, K, rack_on)
    layout.set_topic_caps(topic_cap)
    if rack_on:
        warnings.extend(rack_hotspots(state.size_bytes, rf_final, K, br.rack, balanced, br.rack_names,
                                      br.ids, options.disk_tolerance))
        if options.has("topic"):
            warnings.extend(topic_rack_limits(topic_cap, even_cap, state.topics, br.rack, balanced,
                                              br.rack_names, br.ids))
    targets = _targets(layout, F0, movable, size, rf_final, br, receivers, is_removed, is_excluded,
                       options, K if rack_on else 0)
    layout.set_targets(targets)

    failed: list[tuple[int, int]] = []
    if move_data:
        # With a count goal to run, replicas on removed brokers leave through it (their brokers
        # are sources with a target of 0), which fits each one to its sink's byte gap.
        # Under a move budget they are placed first, so the budget goes to them.
        defer = balance_data and options.has("replicas") and options.max_moves is None \
            and options.max_bytes is None
        bytes_first = bool(is_removed.any()) and options.has("disk")
        failed = repair(layout, state, F0, movable, rf_changes, is_removed, direct, id_pos, options,
                         warnings, everywhere=balance_data, defer_removed=defer, bytes_first=bytes_first)
        if balance_data:
            _balance_goals(layout, options)
        left = left_on(layout, is_removed) if defer else []
        if left:
            failed += place(layout, left, count_goal=not bytes_first)
        if balance_data and (left or layout.off_count_band()):
            # Replicas that no broker short of replicas could take (the rack rule, a partition
            # it holds) went to brokers at their count; the goals run again to pass as many on.
            _balance_goals(layout, options)
    warnings.extend(layout.warnings)
    if failed:
        message = unplaced(layout, state, failed)
        if not options.allow_partial:
            raise InfeasiblePlanError(f"{command}: {message}; nothing was written. Keep more brokers or "
                                      "relax the constraint, or give --allow-partial to write the rest")
        warnings.append(message)
    if layout.budget_hit:
        warnings.append("the move or byte budget (--max-moves / --max-bytes) stopped the plan before "
                        "it reached balance; run again after it completes")

    F1 = layout.matrix()
    lead_movable = np.ones(n, dtype=bool)
    if options.exclude_topics:
        lead_movable &= ~np.isin(np.array(state.topics, dtype=object)[topic], list(options.exclude_topics))
    if leaders and (options.has("leaders") or options.has("leader_bytes")):
        F1 = _balance_leaders(F1, F0, lead_movable, state, balanced, tiebreak, options)

    ctx = MetricContext(
        broker_ids=br.ids, rack_names=br.rack_names, rack=br.rack, real=br.real, balanced=balanced,
        byte_target=np.array(targets.bytes), count_lo=np.array(targets.count_lo),
        count_hi=np.array(targets.count_hi), rack_lo=rack_lo, rack_cap=rack_cap, live_rack=live_rack,
        rack_on=rack_on, topic=topic,
        topic_cap=topic_cap, topic_on=options.has("topic"), size=size,
        produce_bps=state.produce_bps.astype(np.float64),
    )
    return _finish(state, command, options, F0, F1, movable, ctx, br, is_removed, warnings)


def _balance_goals(layout: Layout, options: BalanceOptions) -> None:
    """The data goals in the configured order (step 3 of the module docstring)."""
    for goal in options.goals:
        if goal == "replicas":
            aim = 1 + options.disk_tolerance / 2 if options.has("disk") else None
            keep_disk = options.before("disk", "replicas")
            if bulk_eligible(layout, keep_disk):
                bulk_balance_counts(layout, aim)
            balance_counts(layout, aim=aim, keep_disk=keep_disk, relax_topic=not options.before("topic", "replicas"))
        elif goal == "disk":
            balance_disk(layout, keep_counts=options.before("replicas", "disk"), tolerance=options.disk_tolerance)


def _movable(state: ClusterState, F0: np.ndarray, br: _Brokers, options: BalanceOptions,
             is_excluded: np.ndarray, warnings: list[str]) -> np.ndarray:
    """Replica slots the planner may move: not an excluded topic or broker, not pinned, not
    part of a running reassignment."""
    mov = F0 >= 0
    if options.exclude_topics:
        unknown = sorted(t for t in options.exclude_topics if not state.has_topic(t))
        if unknown:
            warnings.append(f"excluded topic(s) {', '.join(unknown)} are not in the cluster")
        bad = np.isin(np.array(state.topics, dtype=object), list(options.exclude_topics))
        mov &= ~bad[state.topic_index][:, None]
    if state.reassignments:
        busy = [state.find_row(tp.topic, tp.partition) for tp in state.reassignments]
        busy = [r for r in busy if r >= 0]
        mov[busy] = False
        warnings.append(f"{len(busy)} partition(s) are being reassigned now and are left as they are")
    mov &= ~is_excluded[np.maximum(F0, 0)]
    for pin in options.pinned:
        row = state.find_row(pin.topic, pin.partition)
        if row < 0 or not state.has_broker(pin.broker):
            warnings.append(f"pinned replica {pin} does not exist")
            continue
        pos = int(np.flatnonzero(br.ids == pin.broker)[0])
        mov[row] &= F0[row] != pos
    mov &= F0 >= 0
    return mov


def _disk_caps(br: _Brokers, options: BalanceOptions, nb: int) -> np.ndarray:
    cap = np.where(np.isnan(br.disk), np.inf, br.disk * (1.0 - options.disk_headroom))
    return cap if options.disk_headroom > 0 else np.full(nb, np.inf)


def _topic_caps(topic: np.ndarray, rf: np.ndarray, n_topics: int, br: _Brokers, balanced: np.ndarray,
                K: int, rack_on: bool) -> tuple[np.ndarray, np.ndarray]:
    """Most replicas of a topic one broker should hold (topic x rack group): its even share, or
    more in a small rack that rack awareness forces to hold a fixed share; and the even share."""
    groups = int(br.rack.max()) + 1 if len(br.rack) else 1
    per_topic = np.bincount(topic, weights=rf, minlength=n_topics)
    n_bal = max(int(balanced.sum()), 1)
    even = np.maximum(np.ceil(per_topic / n_bal - 1e-9), 1).astype(np.int64)
    cap = even[:, None].repeat(groups, axis=1)
    if rack_on and K > 0:
        must = np.bincount(topic, weights=rf // K, minlength=n_topics)
        in_rack = np.bincount(br.rack[balanced], minlength=groups).astype(np.float64)
        forced = np.ceil(must[:, None] / np.maximum(in_rack[None, :], 1.0) - 1e-9)
        cap = np.maximum(cap, forced).astype(np.int64)
    return cap, even


def _targets(layout: Layout, F0: np.ndarray, movable: np.ndarray, size: np.ndarray, rf: np.ndarray,
             br: _Brokers, receivers: np.ndarray, is_removed: np.ndarray, is_excluded: np.ndarray,
             options: BalanceOptions, K: int) -> Targets:
    nb = len(br.ids)
    fixed_slots = (F0 >= 0) & ~movable
    fb = F0[fixed_slots]
    fixed_count = np.bincount(fb, minlength=nb).astype(np.float64)
    fixed_bytes = np.bincount(fb, weights=np.broadcast_to(size[:, None], F0.shape)[fixed_slots]
                              .astype(np.float64), minlength=nb)
    count_now = np.array(layout.count, dtype=np.float64)
    bytes_now = np.array(layout.bytes, dtype=np.float64)
    groups = int(br.rack.max()) + 1
    holding = ~is_removed
    total_count = int(rf.sum())
    total_bytes = float((rf * size).sum())

    def bounds(per_partition: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        glo, ghi = np.zeros(groups), np.full(groups, np.inf)
        if K > 0:
            lo_r, hi_r = rack_bounds(per_partition, rf, K)
            real = np.unique(br.rack[holding])
            glo[real], ghi[real] = lo_r, hi_r
        return glo, ghi

    def share(total: float, now: np.ndarray, fixed: np.ndarray, weights: np.ndarray,
              cap: np.ndarray, per_partition: np.ndarray) -> np.ndarray:
        lo = fixed.copy()
        hi = np.where(receivers, cap, np.maximum(now, fixed))
        hi = np.where(is_removed | is_excluded, np.where(is_excluded, now, fixed), hi)
        lo = np.where(is_excluded, now, lo)
        w = np.where(holding & ~is_excluded, weights, 0.0)
        glo, ghi = bounds(per_partition)
        out: np.ndarray = waterfill(total, w, lo, hi, br.rack, glo, ghi)
        return out

    ones = np.ones(nb)
    counts = share(float(total_count), count_now, fixed_count, ones, np.full(nb, np.inf), np.ones(len(rf)))
    disk_known = not np.isnan(br.disk[receivers]).any() and receivers.any()
    weights = np.nan_to_num(br.disk, nan=1.0) if disk_known else ones
    cap = np.where(np.isnan(br.disk), np.inf, br.disk * (1 - options.disk_headroom)) \
        if options.disk_headroom > 0 else np.full(nb, np.inf)
    byte_t = share(total_bytes, bytes_now, fixed_bytes, weights, cap, size.astype(np.float64))
    exact = integer_shares_by_group(counts, count_now, total_count, np.asarray(layout.tb), br.rack)
    lo_c = np.floor(counts + 1e-9).astype(np.int64)
    hi_c = np.ceil(counts - 1e-9).astype(np.int64)
    tol = options.disk_tolerance
    if abs(byte_t.sum() - total_bytes) > max(1.0, 1e-6 * total_bytes):
        layout.warnings.append("the brokers' disk capacity (after headroom) cannot hold all the data")
    return Targets(count=exact.tolist(), count_lo=lo_c.tolist(), count_hi=hi_c.tolist(),
                   bytes=byte_t.tolist(), bytes_lo=(byte_t * (1 - tol)).tolist(),
                   bytes_hi=(byte_t * (1 + tol)).tolist())


def _balance_leaders(F1: np.ndarray, F0: np.ndarray, lead_movable: np.ndarray, state: ClusterState,
                     balanced: np.ndarray, tiebreak: np.ndarray, options: BalanceOptions) -> np.ndarray:
    current = np.where(F0[:, 0] >= 0, F0[:, 0], -1) if F0.shape[1] else np.full(len(F0), -1)
    lb = LeaderBalancer(F1, current, lead_movable, state.produce_bps, len(balanced), tiebreak)
    lb.set_targets(balanced)
    if options.has("leaders"):
        lb.balance_counts()
    if options.has("leader_bytes"):
        lb.balance_bytes(options.leader_bytes_tolerance, balanced)
    out = F1.copy()
    lead = lb.lead
    for p in np.flatnonzero((lead >= 0) & (F1[:, 0] != lead)).tolist():
        row = [b for b in F1[p].tolist() if b >= 0]
        row.remove(int(lead[p]))
        out[p, :len(row) + 1] = [int(lead[p])] + row
    return out


def _replica_tuples(ids: np.ndarray) -> list[tuple[int, ...]]:
    """Rows of broker ids as tuples, without the -1 padding."""
    out = list(map(tuple, ids.tolist()))
    for i in np.flatnonzero((ids < 0).any(axis=1)).tolist():
        out[i] = tuple(b for b in out[i] if b >= 0)
    return out


def _finish(state: ClusterState, command: str, options: BalanceOptions, F0: np.ndarray, F1: np.ndarray,
            movable: np.ndarray, ctx: MetricContext, br: _Brokers, is_removed: np.ndarray,
            warnings: list[str]) -> BalancePlan:
    width = max(F0.shape[1], F1.shape[1])
    A = np.full((len(F0), width), -1, dtype=np.int64)
    A[:, :F0.shape[1]] = F0
    changed = np.flatnonzero((A != F1).any(axis=1))
    ids = np.append(br.ids, -1)
    names = np.array(state.topics, dtype=object)[state.topic_index[changed]].tolist()
    parts = state.partition[changed].tolist()
    targets = list(map(PartitionTarget, names, parts, _replica_tuples(ids[F1[changed]])))
    rollback = list(map(PartitionTarget, names, parts, _replica_tuples(ids[A[changed]])))
    Fc, Ac = F1[changed], A[changed]
    added = ((Fc[:, :, None] != Ac[:, None, :]).all(axis=2) & (Fc >= 0)).sum(axis=1)
    moves = int(added.sum())
    moved_bytes = int((added * state.size_bytes[changed]).sum())
    leader_changes = int(((F1[:, 0] != A[:, 0]) & (F1[:, 0] >= 0)).sum()) if width else 0
    before = metrics(F0, ctx)
    after = metrics(F1, ctx)
    bytes_after = np.zeros(len(br.ids))
    bytes_after[np.flatnonzero(br.real)] = [b.bytes for b in after.brokers]
    warnings.extend(over_capacity(bytes_after, br.disk, options.disk_headroom, br.ids, ctx.balanced))
    left = [int(br.ids[b]) for b in np.flatnonzero(is_removed & br.real)
            if (F1 == b).any()]
    if left:
        warnings.append(f"broker(s) {_ids(left)} still hold replicas after the plan")
    spread = after.replicas.spread
    if ctx.balanced.any() and spread > after.replica_spread_allowed and command in ("rebalance", "add-brokers"):
        warnings.append(f"replica counts differ by {int(spread)} across brokers; the racks allow "
                        f"{after.replica_spread_allowed}")
    if after.rack_violations:
        warnings.append(f"{after.rack_violations} partition(s) still break rack awareness")
    return BalancePlan(
        command=command, targets=tuple(targets), rollback=tuple(rollback), before=before,
        after=after, lower_bounds=lower_bounds(F0, F1, movable, ctx), replica_moves=moves,
        bytes_moved=moved_bytes, leader_changes=leader_changes, goals=tuple(options.goals),
        seed=options.seed, warnings=tuple(dict.fromkeys(warnings)),
    )
