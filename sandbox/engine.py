"""The sandbox cluster's core: brokers, topics, partitions, configs and in-flight moves, with the
controller's reassignment and election rules (KRaft, broker-semantics §6) and the replication
step. No sockets and no wall clock: callers advance simulated time explicitly, in ticks.

Replication (`kreassign.sandbox.replication`) follows Kafka's brokers fetch by fetch: KIP-73
quotas measured by `SimpleRate` (`quota.py`), checked before each follower fetch on both sides
and recorded after it, with Kafka's fetch sizes and cadence (`fetch.py`); the tick length only
says how often the engine catches up, never how fast a replica copies.

Per replica, `replica_size` is the bytes it holds (its log end; in-sync replicas hold exactly
`log_end[row]`); `tick_listeners` are called after every tick, when positions may have moved.
"""
from __future__ import annotations

import base64
import math
import random
import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kreassign.cluster.model import Broker, ClusterState, PartitionInfo, Reassignment, ThrottleConfigs, TopicPartition
from kreassign.sandbox import codes
from kreassign.sandbox.client_metrics import ClientMetricsStore
from kreassign.sandbox.configs import NUM_REPLICA_FETCHERS, TIME_SCALE_KEY, ConfigStore, Result
from kreassign.sandbox.fetch import FetchConfig
from kreassign.sandbox.kafka_profiles import DEFAULT_PROFILE, KafkaProfile
from kreassign.sandbox.replication import Replication
from kreassign.sandbox.traffic import Traffic
from kreassign.sandbox.state import NO_LEADER, BrokerState, PartitionState, TopicState
from kreassign.sandbox.topics import TopicSpec, assign_replicas, partition_loads

OK: Result = (codes.NONE, None)
DEFAULT_NETWORK_BPS = 100e6
SESSION_TIMEOUT_S = 9.0
"""broker.session.timeout.ms (Kafka's default, 9 s): how long a KRaft controller keeps a broker
that stopped heartbeating (kill -9) registered and unfenced"""
DEFAULT_DISK_BYTES = 1_000_000_000_000
_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")


@dataclass(frozen=True)
class ReplicaLogInfo:
    """One replica in a DescribeLogDirs answer."""

    topic: str
    partition: int
    size: int
    log_dir: str


class Engine:
    """A simulated Kafka cluster driven by `advance(seconds)` in fixed ticks.

    `fetch` holds the follower fetch limits (Kafka's defaults unless given); `time_scale` is what
    the brokers advertise as sandbox seconds per wall second (the cluster sets it from its clock);
    `kafka` the release whose controller rules it follows (`imitate`).

    The controller is a KRaft quorum outside the brokers: every broker accepts the controller's
    requests (KRaft brokers forward them), and Metadata and DescribeCluster name a random live
    broker as the controller, as KRaft brokers do.
    """

    def __init__(self, brokers: Mapping[int, str | None], *, seed: int = 0, tick: float = 0.1,
                 network_bps: float = DEFAULT_NETWORK_BPS, disk_bytes: int = DEFAULT_DISK_BYTES,
                 log_dirs_per_broker: int = 1, cluster_id: str | None = None,
                 fetch: FetchConfig | None = None, kafka: KafkaProfile = DEFAULT_PROFILE) -> None:
        if not brokers:
            raise ValueError("a cluster needs at least one broker")
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.tick = tick
        self.network_bps = network_bps
        self.disk_bytes = disk_bytes
        self.cluster_id = cluster_id or _cluster_id(seed)
        self.controller_rng = random.Random(seed)
        self.now = 0.0
        self.brokers: dict[int, BrokerState] = {
            b: BrokerState(b, rack, _log_dirs(log_dirs_per_broker)) for b, rack in sorted(brokers.items())}
        self.topics: dict[str, TopicState] = {}
        self.rows: list[PartitionState] = []
        self.log_end = np.zeros(0)
        self.produce_bps = np.zeros(0)
        self.kafka = kafka
        self.configs = ConfigStore(kafka=kafka)
        if kafka.cluster_min_insync:
            # `kafka-storage format` writes it when eligible leader replicas are on (KIP-966)
            self.configs.broker_default["min.insync.replicas"] = "1"
        self.client_metrics = ClientMetricsStore()
        self.traffic = Traffic()
        self.fetch = fetch if fetch is not None else FetchConfig()
        self.replication = Replication(list(self.brokers), network_bps=network_bps, fetch=self.fetch)
        self.completed_moves = 0
        self.time_scale = 1.0
        # (broker, topic, partition) -> the dir an AlterReplicaLogDirs asked for before the broker held
        # the replica: Kafka's LogManager creates the replica there (in memory only, as Kafka keeps it)
        self.preferred_dirs: dict[tuple[int, str, int], str] = {}
        self._dir_loads: dict[int, dict[str, int]] = {}  # replicas per log dir, per broker (built on first use)
        # called with the sandbox time after every tick (replica positions may have advanced)
        self.tick_listeners: list[Callable[[float], None]] = []

    # ---- cluster facts ----------------------------------------------------------------
    def imitate(self, kafka: KafkaProfile) -> None:
        """Follow the rules of another Kafka release (a saved state started as that release)."""
        self.kafka = self.configs.kafka = kafka

    def reported_controller(self) -> int:
        """The controller id a client is given: a random live broker (KRaftMetadataCache's
        getRandomAliveBrokerId), -1 when none is alive."""
        alive = [b for b, s in self.brokers.items() if s.alive]
        return self.controller_rng.choice(alive) if alive else -1

    def alive_brokers(self) -> list[BrokerState]:
        return [b for b in self.brokers.values() if b.alive]

    def _alive(self, broker_id: int) -> bool:
        b = self.brokers.get(broker_id)
        return b is not None and b.alive

    def partition(self, topic: str, index: int) -> PartitionState | None:
        t = self.topics.get(topic)
        return t.partitions[index] if t is not None and 0 <= index < len(t.partitions) else None

    def static_broker_configs(self, broker_id: int) -> dict[str, str]:
        """What the broker's server.properties would set: its ids, dirs and rack, the fetch limits
        that differ from Kafka's defaults, and no automatic leader rebalancing (the emulator never
        moves leaders by itself)."""
        b = self.brokers[broker_id]
        static = {"broker.id": str(broker_id), "node.id": str(broker_id), "log.dirs": ",".join(b.log_dirs),
                  "process.roles": "broker", "auto.leader.rebalance.enable": "false",
                  TIME_SCALE_KEY: f"{self.time_scale:g}"}
        if b.rack is not None:
            static["broker.rack"] = b.rack
        defaults = FetchConfig()
        for key, value, default in (
                ("replica.fetch.max.bytes", self.fetch.partition_max_bytes, defaults.partition_max_bytes),
                ("replica.fetch.response.max.bytes", self.fetch.response_max_bytes, defaults.response_max_bytes),
                (NUM_REPLICA_FETCHERS, self.fetch.num_fetchers, defaults.num_fetchers)):
            if value != default:
                static[key] = str(value)
        return static

    def _dirty(self) -> None:
        self.replication.flush()

    # ---- topics -------------------------------------------------------------------------
    def add_topics(self, specs: Iterable[TopicSpec]) -> None:
        """Create topics from specs with seeded sizes and write rates (start-up only)."""
        for spec in specs:
            sizes, rates = partition_loads(spec, self.rng)
            code, msg = self.create_topic(spec.name, spec.partitions, spec.replication_factor,
                                          sizes=sizes, rates=rates)
            if code != codes.NONE:
                raise ValueError(msg)

    def create_topic(self, name: str, num_partitions: int = -1, replication_factor: int = -1, *,
                     assignments: Mapping[int, Sequence[int]] | None = None,
                     configs: Mapping[str, str | None] | None = None, validate_only: bool = False,
                     sizes: Sequence[int] | np.ndarray | None = None,
                     rates: Sequence[float] | np.ndarray | None = None) -> Result:
        """CreateTopics for one topic, with Kafka's checks and messages."""
        invalid = _invalid_topic_name(name)
        if invalid is not None:
            return codes.INVALID_TOPIC_EXCEPTION, f"Topic name is invalid: {invalid}"
        if name in self.topics:
            return codes.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists."
        live = {b.id: b.rack for b in self.alive_brokers()}
        if assignments:
            if num_partitions != -1 or replication_factor != -1:
                return codes.INVALID_REQUEST, ("Both numPartitions or replicationFactor and replicasAssignments "
                                               "were set. Both cannot be used at the same time.")
            plan = [list(assignments[i]) if i in assignments else [] for i in range(len(assignments))]
            for replicas in plan:
                err = self._check_manual_assignment(replicas)
                if err is not None:
                    return err
        else:
            n = 1 if num_partitions == -1 else num_partitions
            rf = 1 if replication_factor == -1 else replication_factor
            if n <= 0:
                return codes.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value."
            if rf <= 0:
                return codes.INVALID_REPLICATION_FACTOR, ("Replication factor must be larger than 0, or -1 to "
                                                          "use the default value.")
            if rf > len(live):
                cordoned = " or some brokers have all their log directories cordoned" if self.kafka.cordoned_log_dirs else ""
                return codes.INVALID_REPLICATION_FACTOR, (
                    f"Unable to replicate the partition {rf} time(s): The target replication factor of {rf} "
                    f"cannot be reached because only {len(live)} broker(s) are registered{cordoned}.")
            plan = assign_replicas(live, n, rf, self.rng)
        if configs:
            probe = ConfigStore()
            code, msg = probe.alter_topic(name, list(configs.items()), validate_only=False)
            if code != codes.NONE:
                return code, msg
        if validate_only:
            return OK
        self._dirty()
        if configs:
            self.configs.alter_topic(name, list(configs.items()), validate_only=False)
        topic = TopicState(name, uuid.UUID(int=int(self.rng.integers(1, 2**63)) << 64 | len(self.topics) + 1))
        first_row = len(self.rows)
        for i, replicas in enumerate(plan):
            isr = [r for r in replicas if self._alive(r)] or replicas[:1]
            leader = next((r for r in replicas if self._alive(r)), NO_LEADER)
            p = PartitionState(name, i, first_row + i, list(replicas), isr, leader)
            p.lagging = {r: 0.0 for r in replicas if r not in isr}
            for r in replicas:
                self._place(p, r)
            topic.partitions.append(p)
            self.rows.append(p)
        count = len(plan)
        self.log_end = np.concatenate([self.log_end, np.zeros(count) if sizes is None else np.asarray(sizes, float)])
        self.produce_bps = np.concatenate([self.produce_bps, np.zeros(count) if rates is None else np.asarray(rates, float)])
        self.topics[name] = topic
        return OK

    def delete_topic(self, name: str) -> TopicState:
        """Remove a topic as the controller's RemoveTopicRecord does: its partitions, with any
        reassignment in flight, and its dynamic topic configs (the throttled-replica lists among
        them). The other partitions' rows close up; the removed partitions keep their old rows, so
        callers holding one must check `partition(topic, index) is p` before using it.

        Raises:
            KeyError: no topic has that name.
        """
        topic = self.topics[name]
        self._dirty()  # the flow table indexes rows: write its sizes back before they move
        for p in topic.partitions:
            for b in p.replicas:
                self._unplace(p, b)
        del self.topics[name]
        gone = {p.row for p in topic.partitions}
        kept = [p for p in self.rows if p.row not in gone]
        rows = np.array([p.row for p in kept], dtype=np.int64)
        self.log_end, self.produce_bps = self.log_end[rows], self.produce_bps[rows]
        for row, p in enumerate(kept):
            p.row = row
        self.rows = kept
        self.configs.topic.pop(name, None)
        return topic

    def _check_manual_assignment(self, replicas: Sequence[int]) -> Result | None:
        if not replicas:
            return codes.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."
        prev = None
        for b in sorted(replicas):
            if b not in self.brokers:
                return codes.INVALID_REPLICA_ASSIGNMENT, (
                    f"The manual partition assignment includes broker {b}, but no such broker is registered.")
            if b == prev:
                return codes.INVALID_REPLICA_ASSIGNMENT, (
                    f"The manual partition assignment includes the broker {b} more than once.")
            prev = b
        return None

    # ---- reassignments (controller) -------------------------------------------------------
    def alter_reassignment(self, topic: str, index: int, target: Sequence[int] | None, *,
                           allow_rf_change: bool = True) -> Result:
        """AlterPartitionReassignments for one partition (None target = cancel)."""
        if topic not in self.topics:
            return codes.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {topic}."
        p = self.partition(topic, index)
        if p is None:
            return codes.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {topic}:{index}."
        if target is None:
            return self._cancel(p)
        err = self._check_manual_assignment(target)
        if err is not None:
            return err
        original = [r for r in p.replicas if r not in set(p.adding)]
        if not allow_rf_change and len(target) != len(original):
            return codes.INVALID_REPLICATION_FACTOR, (
                f"The replication factor is changed from {len(original)} to {len(target)}")
        # ReplicationControlManager.changePartitionReassignment: the difference is taken against
        # every current replica, those being added included, and an empty adding or removing
        # list leaves the one in flight as it was (so re-targeting a move can keep a replica in
        # both lists: see `_maybe_complete`)
        current = list(p.replicas)
        removing = sorted(set(current) - set(target))
        adding = sorted(set(target) - set(current))
        merged = list(target) + removing
        if merged == current and not removing and not adding:
            self._maybe_complete(p)
            return OK
        self._dirty()
        p.partition_epoch += 1
        for b in adding:
            p.lagging[b] = 0.0
            self._place(p, b)
        p.replicas = merged
        if removing:
            p.removing = removing
        if adding:
            p.adding = adding
        self._maybe_complete(p)
        return OK

    def _place(self, p: PartitionState, broker_id: int) -> None:
        """A replica arrives on a broker (not yet among `p.replicas`): in the dir a log-dir move
        asked for, else in the dir holding the fewest replicas, the first such dir on a tie (as
        Kafka's LogManager places a new log)."""
        dirs = self.brokers[broker_id].log_dirs
        if len(dirs) == 1:
            return
        path = self.preferred_dirs.pop((broker_id, p.topic, p.index), None) if self.preferred_dirs else None
        load = self._dir_load(broker_id)
        path = path if path is not None else min(dirs, key=lambda d: load[d])
        load[path] += 1
        p.log_dirs[broker_id] = path

    def _unplace(self, p: PartitionState, broker_id: int) -> None:
        """A replica leaves its broker."""
        load = self._dir_loads.get(broker_id)
        if load is not None:
            load[p.log_dirs.get(broker_id, self.brokers[broker_id].log_dirs[0])] -= 1
        p.log_dirs.pop(broker_id, None)

    def set_log_dir(self, p: PartitionState, broker_id: int, path: str) -> None:
        """A log-dir move swapped the replica into `path`."""
        load = self._dir_loads.get(broker_id)
        if load is not None:
            load[p.log_dirs.get(broker_id, self.brokers[broker_id].log_dirs[0])] -= 1
            load[path] += 1
        p.log_dirs[broker_id] = path

    def _dir_load(self, broker_id: int) -> dict[str, int]:
        load = self._dir_loads.get(broker_id)
        if load is None:
            dirs = self.brokers[broker_id].log_dirs
            load = self._dir_loads[broker_id] = dict.fromkeys(dirs, 0)
            for q in self.rows:
                if broker_id in q.replicas:
                    load[q.log_dirs.get(broker_id, dirs[0])] += 1
        return load

    def _cancel(self, p: PartitionState) -> Result:
        if not p.reassigning:
            return codes.NO_REASSIGNMENT_IN_PROGRESS, None
        adding = set(p.adding)
        replicas = [r for r in p.replicas if r not in adding]
        isr = [r for r in p.isr if r not in adding]
        if not isr:
            if not self._unclean_allowed(p.topic):
                return codes.INVALID_REPLICA_ASSIGNMENT, (
                    f"Unable to revert partition assignment for {p.topic}:{p.index} because it would require "
                    "an unclean leader election.")
            isr = replicas[:1]
            self._unclean_truncate(p, isr[0])
        self._dirty()
        p.replicas, p.isr = replicas, isr
        for b in adding:
            p.lagging.pop(b, None)
            self._unplace(p, b)
        p.adding, p.removing = [], []
        leader, epoch = p.leader, p.leader_epoch
        self._elect_if_needed(p, order=replicas)
        if adding and (p.leader, p.leader_epoch) == (leader, epoch):
            p.leader_epoch += 1  # replicas left: PartitionChangeBuilder bumps the leader epoch
        p.partition_epoch += 1
        return OK

    def _unclean_allowed(self, topic: str) -> bool:
        value = self.configs.topic.get(topic, {}).get("unclean.leader.election.enable", "false")
        return value.strip().lower() == "true"

    def _unclean_truncate(self, p: PartitionState, new_leader: int) -> None:
        """An out-of-sync replica becomes leader: the log shrinks to what it holds."""
        if new_leader in p.lagging:
            self.log_end[p.row] = p.lagging.pop(new_leader)
            for b in p.replicas:
                if b != new_leader:
                    p.lagging[b] = min(p.lagging.get(b, self.log_end[p.row]), float(self.log_end[p.row]))

    def _elect_if_needed(self, p: PartitionState, order: Sequence[int]) -> None:
        """Keep the leader if it is in the ISR and alive, else the first of `order` that is."""
        if p.leader in p.isr and self._alive(p.leader):
            return
        p.leader = next((b for b in order if b in p.isr and self._alive(b)), NO_LEADER)
        p.leader_epoch += 1

    def _maybe_complete(self, p: PartitionState) -> bool:
        """PartitionReassignmentReplicas.maybeCompleteReassignment of the imitated release."""
        if not p.reassigning:
            return False
        removing = set(p.removing)
        target = [r for r in p.replicas if r not in removing]
        new_isr = [r for r in p.isr if r not in removing]
        if not new_isr or not target:
            return False
        if self.kafka.completion == "target_in_isr":
            done = set(target) <= set(new_isr)
        else:
            done = set(p.adding) <= set(new_isr) and (
                len(p.adding) >= len(p.removing) or set(target) <= set(new_isr))
        if not done:
            return False
        p.replicas, p.isr = target, new_isr
        for b in removing:
            p.lagging.pop(b, None)
            self._unplace(p, b)
        p.adding, p.removing = [], []
        old_leader = p.leader
        self._elect_if_needed(p, order=target)
        if p.leader == old_leader and removing:
            p.leader_epoch += 1
        p.partition_epoch += 1
        self.completed_moves += 1
        return True

    def list_reassignments(self, wanted: Mapping[str, Sequence[int]] | None = None
                           ) -> list[tuple[str, int, list[int], list[int], list[int]]]:
        """(topic, partition, replicas, adding, removing) for moves in flight; unknown names omitted."""
        out = []
        if wanted is None:
            candidates: Iterable[PartitionState] = (p for p in self.rows if p.reassigning)
        else:
            candidates = (p for t, idx in wanted.items() for i in idx
                          if (p := self.partition(t, i)) is not None and p.reassigning)
        for p in candidates:
            out.append((p.topic, p.index, list(p.replicas), list(p.adding), list(p.removing)))
        return out

    def elect_leaders(self, election_type: int, wanted: Mapping[str, Sequence[int]] | None
                      ) -> list[tuple[str, int, int, str | None]]:
        """ElectLeaders: (topic, partition, error code, message) per partition."""
        if wanted is None:
            pairs = [(p.topic, p.index) for p in self.rows]
        else:
            pairs = [(t, i) for t, idx in wanted.items() for i in idx]
        out: list[tuple[str, int, int, str | None]] = []
        code: int
        msg: str | None
        for topic, index in pairs:
            p = self.partition(topic, index)
            if p is None:
                code, msg = codes.UNKNOWN_TOPIC_OR_PARTITION, (
                    f"No such partition as {topic}-{index}" if topic in self.topics else f"No such topic as {topic}")
            elif election_type == 0:
                code, msg = self._elect_preferred(p)
            elif election_type == 1:
                code, msg = self._elect_unclean(p)
            else:
                code, msg = codes.INVALID_REQUEST, f"Unknown election type {election_type}"
            if wanted is None and code == codes.ELECTION_NOT_NEEDED:
                continue
            out.append((topic, index, code, msg))
        return out

    def _elect_preferred(self, p: PartitionState) -> Result:
        preferred = p.replicas[0]
        if p.leader == preferred:
            return codes.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."
        if preferred in p.isr and self._alive(preferred):
            self._dirty()
            p.leader = preferred
            p.leader_epoch += 1
            p.partition_epoch += 1
            return OK
        return codes.PREFERRED_LEADER_NOT_AVAILABLE, "The preferred leader was not available."

    def _elect_unclean(self, p: PartitionState) -> Result:
        if p.leader != NO_LEADER and self._alive(p.leader):
            return codes.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."
        choice = next((b for b in p.replicas if self._alive(b)), None)
        if choice is None:
            return codes.ELIGIBLE_LEADERS_NOT_AVAILABLE, "Eligible topic partition leaders are not available."
        self._dirty()
        self._unclean_truncate(p, choice)
        p.isr = [choice]
        p.leader = choice
        p.leader_epoch += 1
        p.partition_epoch += 1
        return OK

    # ---- brokers -----------------------------------------------------------------------------
    def stop_broker(self, broker_id: int) -> None:
        """Fence a broker: it leaves every ISR it can leave and gives up leadership."""
        b = self.brokers[broker_id]
        b.fence_at = None
        if not b.alive:
            return
        self._dirty()
        b.alive = False
        for p in self.rows:
            if broker_id not in p.replicas:
                continue
            if broker_id in p.isr and len(p.isr) > 1:
                p.isr.remove(broker_id)
                p.lagging[broker_id] = float(self.log_end[p.row])
                p.partition_epoch += 1
            if p.leader == broker_id:
                self._elect_if_needed(p, order=p.replicas)
                p.partition_epoch += 1

    def kill_broker(self, broker_id: int) -> None:
        """The broker's process dies (kill -9): it stops serving and fetching at once, but the
        controller fences it (`stop_broker`) only when its session times out, SESSION_TIMEOUT_S
        later, as a KRaft controller does after broker.session.timeout.ms without a heartbeat.
        Until then it stays registered, a leader and in the ISRs it was in."""
        b = self.brokers[broker_id]
        if not b.serving:
            return
        self._dirty()
        b.fence_at = self.now + SESSION_TIMEOUT_S

    def _fence_expired(self) -> None:
        for b in self.brokers.values():
            if b.fence_at is not None and self.now >= b.fence_at - 1e-9:
                b.fence_at = None
                self.stop_broker(b.id)

    def start_broker(self, broker_id: int) -> None:
        """Unfence a broker: leaderless partitions whose last ISR member it is get it back as leader.
        A killed broker that comes back before its session timed out just serves again."""
        b = self.brokers[broker_id]
        if b.fence_at is not None:
            self._dirty()
            b.fence_at = None
            return
        if b.alive:
            return
        self._dirty()
        b.alive = True
        for p in self.rows:
            if p.leader == NO_LEADER and p.isr == [broker_id]:
                p.leader = broker_id
                p.leader_epoch += 1
                p.partition_epoch += 1

    # ---- time ------------------------------------------------------------------------------------
    def advance(self, seconds: float) -> None:
        """Step simulated time forward by `seconds` in fixed ticks (a final partial tick if needed)."""
        if seconds < 0:
            raise ValueError("time only moves forward")
        target = self.now + seconds
        while target - self.now > 1e-9:
            self.step(min(self.tick, target - self.now))

    def run_until(self, target: float) -> None:
        if target > self.now:
            self.advance(target - self.now)

    def step(self, dt: float) -> None:
        """One tick: writes, throttled copying, ISR joins and completed moves. A replica that
        catches up changes only its own partition's entries in the flow table (no rebuild), so a
        tick's cost does not grow with the number of partitions."""
        rep = self.replication
        rebuild = lambda: rep.build(self.rows, self.brokers, self.produce_bps, self.configs, len(self.rows))  # noqa: E731
        caught = rep.step(self.log_end, self.produce_bps, self.now, dt, rebuild)
        self.now += dt
        for p, b in caught:
            if b in p.lagging and b not in p.isr:
                before = rep.in_sync(p, self.brokers, self.produce_bps, self.configs)
                leader = p.leader
                del p.lagging[b]
                p.isr.append(b)
                p.partition_epoch += 1
                self._maybe_complete(p)
                rep.changed(p, before, rep.in_sync(p, self.brokers, self.produce_bps, self.configs),
                            leader_moved=p.leader != leader)
        if any(b.fence_at is not None for b in self.brokers.values()):
            self._fence_expired()
        for listener in self.tick_listeners:
            listener(self.now)

    # ---- configs -------------------------------------------------------------------------------
    def config_changed(self) -> None:
        """Throttle configs may have changed: rebuild the flow table on the next tick."""
        self._dirty()

    def set_fetch(self, fetch: FetchConfig) -> None:
        """Change the follower fetch limits (a start-up option, like the network capacity)."""
        self._dirty()
        self.fetch = self.replication.fetch = fetch

    # ---- log dirs ------------------------------------------------------------------------------
    def replica_size(self, p: PartitionState, broker_id: int) -> int:
        if broker_id in p.lagging:
            return int(self.replication.lagging_size(p, broker_id))
        return int(self.log_end[p.row])

    def describe_log_dirs(self, broker_id: int, wanted: Mapping[str, Sequence[int]] | None
                          ) -> dict[str, list[ReplicaLogInfo]]:
        """Replicas hosted by a broker, grouped by log dir (every dir listed, even empty)."""
        b = self.brokers[broker_id]
        out: dict[str, list[ReplicaLogInfo]] = {d: [] for d in b.log_dirs}
        if wanted is None:
            rows: Iterable[PartitionState] = self.rows
        else:
            rows = (p for t, idx in wanted.items() for i in idx if (p := self.partition(t, i)) is not None)
        for p in rows:
            if broker_id in p.replicas:
                d = p.log_dirs.get(broker_id, b.log_dirs[0])
                out[d].append(ReplicaLogInfo(p.topic, p.index, self.replica_size(p, broker_id), d))
        return out

    def used_bytes(self, broker_id: int, log_dir: str) -> int:
        b = self.brokers[broker_id]
        return sum(self.replica_size(p, broker_id) for p in self.rows
                   if broker_id in p.replicas and p.log_dirs.get(broker_id, b.log_dirs[0]) == log_dir)

    # ---- views --------------------------------------------------------------------------------
    def to_cluster_state(self) -> ClusterState:
        """A `ClusterState` snapshot of the sandbox (sizes are the leaders' log sizes)."""
        self.replication.flush()
        brokers = [Broker(b.id, b.rack) for b in self.brokers.values()]
        parts = [PartitionInfo(p.topic, p.index, tuple(p.replicas), p.leader if p.leader >= 0 else None,
                               tuple(p.isr), int(self.log_end[p.row]), float(self.produce_bps[p.row]))
                 for p in self.rows]
        moves = {TopicPartition(p.topic, p.index): Reassignment(tuple(p.replicas), tuple(p.adding), tuple(p.removing))
                 for p in self.rows if p.reassigning}
        throttles = ThrottleConfigs(broker={k: dict(v) for k, v in self.configs.broker.items()},
                                    topic={k: dict(v) for k, v in self.configs.topic.items()})
        return ClusterState.from_partitions(brokers, parts, reassignments=moves, throttles=throttles,
                                            cluster_id=self.cluster_id)

    # ---- persistence --------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        self.replication.flush()
        return {
            "format": "kreassign-sandbox/1", "seed": self.seed, "tick": self.tick, "now": self.now,
            "network_bps": self.network_bps, "disk_bytes": self.disk_bytes, "cluster_id": self.cluster_id,
            "fetch": self.fetch.to_json(),
            "completed_moves": self.completed_moves,
            "brokers": [b.to_json() for b in self.brokers.values()],
            "topics": [{"name": t.name, "id": str(t.topic_id),
                        "partitions": [dict(p.to_json(), size=float(self.log_end[p.row]),
                                            produce_bps=float(self.produce_bps[p.row])) for p in t.partitions]}
                       for t in self.topics.values()],
            "configs": self.configs.to_json(),
            "client_metrics": {name: dict(cfg) for name, cfg in sorted(self.client_metrics.subscriptions.items())},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Engine:
        if data.get("format") != "kreassign-sandbox/1":
            raise ValueError("not a kreassign sandbox state file")
        brokers = [BrokerState.from_json(b) for b in data["brokers"]]
        engine = cls({b.id: b.rack for b in brokers}, seed=int(data["seed"]), tick=float(data["tick"]),
                     network_bps=float(data["network_bps"]), disk_bytes=int(data["disk_bytes"]),
                     cluster_id=data["cluster_id"], fetch=FetchConfig.from_json(data.get("fetch")))
        engine.brokers = {b.id: b for b in brokers}
        engine.now = float(data["now"])
        engine.completed_moves = int(data.get("completed_moves", 0))
        sizes: list[float] = []
        rates: list[float] = []
        for t in data["topics"]:
            topic = TopicState(t["name"], uuid.UUID(t["id"]))
            for d in t["partitions"]:
                p = PartitionState.from_json(t["name"], len(engine.rows), d)
                topic.partitions.append(p)
                engine.rows.append(p)
                sizes.append(float(d["size"]))
                rates.append(float(d["produce_bps"]))
            engine.topics[topic.name] = topic
        engine.log_end = np.array(sizes, dtype=float)
        engine.produce_bps = np.array(rates, dtype=float)
        engine.configs = ConfigStore.from_json(data["configs"])
        engine.configs.kafka = engine.kafka
        engine.client_metrics.subscriptions = {str(n): {str(k): str(v) for k, v in cfg.items()}
                                               for n, cfg in data.get("client_metrics", {}).items()}
        # Draw fresh randomness for later topic creation without replaying the start-up draws.
        engine.rng = np.random.default_rng([engine.seed, len(engine.rows), int(math.floor(engine.now))])
        return engine


def _invalid_topic_name(name: str) -> str | None:
    """Why Kafka's Topic.validate refuses a name (None: it is valid)."""
    if not name:
        return "the empty string is not allowed"
    if name in (".", ".."):
        return f"'{name}' is not allowed"
    if len(name) > 249:
        return f"the length of '{name}' is longer than the max allowed length 249"
    if not _TOPIC_NAME.match(name):
        return f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None


def _log_dirs(n: int) -> tuple[str, ...]:
    return ("/var/lib/kafka/data",) if n == 1 else tuple(f"/var/lib/kafka/data-{i}" for i in range(n))


def _cluster_id(seed: int) -> str:
    """A 22-character base64url id like Kafka's, derived from the seed so runs are reproducible."""
    raw = uuid.UUID(int=int(np.random.default_rng([seed, 7]).integers(0, 2**63)) << 64 | seed & (2**64 - 1)).bytes
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")
