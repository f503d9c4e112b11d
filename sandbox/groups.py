"""The classic consumer group protocol (Kafka's GroupCoordinator before KIP-848), on sandbox time.

States Empty -> PreparingRebalance -> CompletingRebalance -> Stable, as in Kafka's
`ClassicGroup`: a JoinGroup starts a rebalance; the join phase ends when every known member has
rejoined (or at the rebalance timeout, dropping those that did not; a group that was Empty waits
`group.initial.rebalance.delay.ms` first, and one more delay after each that saw a new member,
within the rebalance timeout); the leader gets every
member's metadata, computes the assignment with the client's own assignor and sends it in its
SyncGroup, which the coordinator hands to every member. Members stay alive by heartbeats within
their session timeout, measured on the sandbox clock. Committed offsets and the group itself
(generation, members, assignment) are kept as Kafka keeps them in `__consumer_offsets`, so they
survive restarts; a reloaded group with members is Stable and its members expire unless they
heartbeat again.

Pure bookkeeping: the handlers ask, and look again (`poll_join`, `poll_sync`) while a request waits.
Not modelled: static membership (`group.instance.id` is kept and echoed, but such members
behave as dynamic ones), transactional offset commits, offset retention.
"""
from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kreassign.cluster.java_order import java_string_hash
from kreassign.sandbox import codes

MIN_SESSION_TIMEOUT_MS = 6_000        # group.min.session.timeout.ms
MAX_SESSION_TIMEOUT_MS = 1_800_000    # group.max.session.timeout.ms
INITIAL_REBALANCE_DELAY_MS = 3_000    # group.initial.rebalance.delay.ms
OFFSET_METADATA_MAX_BYTES = 4096      # offset.metadata.max.bytes
OFFSETS_TOPIC_PARTITIONS = 50         # offsets.topic.num.partitions


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"


@dataclass(frozen=True)
class JoinResult:
    error: int
    member_id: str
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()


@dataclass(frozen=True)
class SyncResult:
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True)
class Committed:
    offset: int
    leader_epoch: int
    metadata: str
    commit_time: float


@dataclass
class Member:
    member_id: str
    client_id: str
    instance_id: str | None
    session_timeout: float
    rebalance_timeout: float
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    last_seen: float
    assignment: bytes = b""
    awaiting_join: bool = False
    join_result: JoinResult | None = None
    awaiting_sync: bool = False
    sync_result: SyncResult | None = None

    def metadata(self, protocol: str) -> bytes:
        return next(m for name, m in self.protocols if name == protocol)

    def to_json(self) -> dict[str, Any]:
        return {"member_id": self.member_id, "client_id": self.client_id, "instance_id": self.instance_id,
                "session_timeout": self.session_timeout, "rebalance_timeout": self.rebalance_timeout,
                "protocol_type": self.protocol_type, "protocols": [[n, m.hex()] for n, m in self.protocols],
                "assignment": self.assignment.hex()}

    @classmethod
    def from_json(cls, d: Mapping[str, Any], now: float) -> Member:
        return cls(str(d["member_id"]), str(d["client_id"]), d.get("instance_id"), float(d["session_timeout"]),
                   float(d["rebalance_timeout"]), str(d["protocol_type"]),
                   [(str(n), bytes.fromhex(m)) for n, m in d["protocols"]], now, bytes.fromhex(d["assignment"]))


@dataclass
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending: dict[str, float] = field(default_factory=dict)  # member id -> expiry (MEMBER_ID_REQUIRED)
    offsets: dict[tuple[str, int], Committed] = field(default_factory=dict)
    rebalance_started: float = 0.0
    join_deadline: float | None = None
    initial_delay: bool = False
    new_member_added: bool = False
    delay_remaining: float = 0.0
    sync_deadline: float | None = None

    def candidate_protocols(self) -> set[str]:
        sets = [{n for n, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports(self, protocol_type: str, protocols: Sequence[tuple[str, bytes]]) -> bool:
        if not protocols or not protocol_type:
            return False
        if not self.members:
            return True
        names = {n for n, _ in protocols}
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        """Kafka's vote: each member names its most preferred protocol that every member supports."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = next(n for n, _ in m.protocols if n in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda n: votes[n])  # ties: the first voted, in member join order


def coordinator_for(group_id: str, alive: Sequence[int]) -> int | None:
    """The broker that coordinates a group: the `__consumer_offsets` partition is Kafka's
    `abs(groupId.hashCode) % 50`; [derived] its leader is the live broker at that index mod N."""
    brokers = sorted(alive)
    if not brokers:
        return None
    partition = (java_string_hash(group_id) & 0x7FFFFFFF) % OFFSETS_TOPIC_PARTITIONS
    return brokers[partition % len(brokers)]


class GroupCoordinator:
    """Every group of the sandbox (one coordinator state; `coordinator_for` says which broker answers)."""

    def __init__(self) -> None:
        self.groups: dict[str, Group] = {}

    # ---- time --------------------------------------------------------------------------------
    def tick(self, group: Group, now: float) -> None:
        """Expire sessions and pending members, end a join phase that is due, fail an overdue sync."""
        for mid, expiry in list(group.pending.items()):
            if now >= expiry:
                del group.pending[mid]
        for m in list(group.members.values()):
            keep_alive = m.awaiting_join or m.awaiting_sync
            if not keep_alive and now >= m.last_seen + m.session_timeout:
                self._remove(group, m.member_id, now)
        if group.state is GroupState.PREPARING_REBALANCE:
            all_in = not group.pending and all(m.awaiting_join for m in group.members.values())
            due = group.join_deadline is not None and now >= group.join_deadline
            if due and group.initial_delay and group.new_member_added and group.delay_remaining > 0:
                # Kafka's InitialDelayedJoin: a member arrived during the delay, so wait one more
                step = min(INITIAL_REBALANCE_DELAY_MS / 1000.0, group.delay_remaining)
                group.delay_remaining -= step
                group.new_member_added = False
                assert group.join_deadline is not None
                group.join_deadline += step
            elif due or (all_in and not group.initial_delay):
                self._complete_join(group, now)
        if (group.state is GroupState.COMPLETING_REBALANCE and group.sync_deadline is not None
                and now >= group.sync_deadline):
            for m in list(group.members.values()):
                if not m.awaiting_sync:
                    self._remove(group, m.member_id, now)
            if group.members:
                self._prepare_rebalance(group, now)
            else:
                self._empty(group)

    def next_deadline(self, group_id: str, now: float) -> float | None:
        """The next sandbox time at which `tick` may change the group by itself."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        times = [t for t in (group.join_deadline, group.sync_deadline) if t is not None]
        times += [m.last_seen + m.session_timeout for m in group.members.values()
                  if not (m.awaiting_join or m.awaiting_sync)]
        times += list(group.pending.values())
        future = [t for t in times if t > now]
        return min(future) if future else None

    # ---- transitions -------------------------------------------------------------------------
    def _prepare_rebalance(self, group: Group, now: float) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            for m in group.members.values():
                m.assignment = b""
                if m.awaiting_sync:
                    m.awaiting_sync = False
                    m.sync_result = SyncResult(codes.REBALANCE_IN_PROGRESS)
        group.sync_deadline = None
        timeout = max((m.rebalance_timeout for m in group.members.values()), default=0.0)
        group.rebalance_started = now
        if group.state is GroupState.EMPTY:
            delay = INITIAL_REBALANCE_DELAY_MS / 1000.0
            group.initial_delay = True
            group.new_member_added = False
            group.delay_remaining = max(timeout - delay, 0.0)
            group.join_deadline = now + delay
        else:
            group.initial_delay = False
            group.join_deadline = now + timeout
        group.state = GroupState.PREPARING_REBALANCE

    def _complete_join(self, group: Group, now: float) -> None:
        for m in list(group.members.values()):
            if not m.awaiting_join:
                self._remove(group, m.member_id, now, rebalance=False)
        group.pending.clear()
        group.join_deadline = None
        group.initial_delay = False
        group.generation += 1
        if not group.members:
            self._empty(group)
            return
        group.protocol = group.select_protocol()
        if group.leader not in group.members:
            group.leader = next(iter(group.members))
        group.state = GroupState.COMPLETING_REBALANCE
        group.sync_deadline = now + max(m.rebalance_timeout for m in group.members.values())
        for m in group.members.values():
            m.awaiting_join = False
            m.last_seen = now
            m.join_result = self._join_result(group, m)

    def _join_result(self, group: Group, m: Member) -> JoinResult:
        assert group.protocol is not None
        members = tuple((o.member_id, o.instance_id, o.metadata(group.protocol)) for o in group.members.values()) \
            if m.member_id == group.leader else ()
        return JoinResult(codes.NONE, m.member_id, group.generation, group.protocol_type, group.protocol,
                          group.leader or "", members)

    def _empty(self, group: Group) -> None:
        """No members left; the protocol type stays, as Kafka's does, until a member joins again."""
        group.state = GroupState.EMPTY
        group.protocol = group.leader = None
        group.join_deadline = group.sync_deadline = None

    def _remove(self, group: Group, member_id: str, now: float, *, rebalance: bool = True) -> None:
        m = group.members.pop(member_id)
        if m.awaiting_join:
            m.join_result = JoinResult(codes.UNKNOWN_MEMBER_ID, member_id)
        if group.leader == member_id:
            group.leader = next(iter(group.members), None)
        if not rebalance:
            return
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            if group.members:
                self._prepare_rebalance(group, now)
            else:
                group.generation += 1
                self._empty(group)

    # ---- JoinGroup ---------------------------------------------------------------------------
    def join(self, group_id: str, member_id: str, client_id: str, instance_id: str | None,
             session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
             protocols: Sequence[tuple[str, bytes]], *, require_known_member_id: bool,
             now: float) -> JoinResult | Member:
        """A JoinGroup: its answer now, or the member whose `join_result` will carry it."""
        if not group_id:
            return JoinResult(codes.INVALID_GROUP_ID, member_id)
        if not MIN_SESSION_TIMEOUT_MS <= session_timeout_ms <= MAX_SESSION_TIMEOUT_MS:
            return JoinResult(codes.INVALID_SESSION_TIMEOUT, member_id)
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return JoinResult(codes.UNKNOWN_MEMBER_ID, member_id)
            group = self.groups[group_id] = Group(group_id)
        self.tick(group, now)
        protos = [(n, bytes(meta)) for n, meta in protocols]
        if not group.supports(protocol_type, protos):
            return JoinResult(codes.INCONSISTENT_GROUP_PROTOCOL, member_id)
        rebalance_s = (rebalance_timeout_ms if rebalance_timeout_ms > 0 else session_timeout_ms) / 1000.0
        if not member_id:
            new_id = f"{client_id}-{uuid.uuid4()}"
            if require_known_member_id:
                group.pending[new_id] = now + session_timeout_ms / 1000.0
                return JoinResult(codes.MEMBER_ID_REQUIRED, new_id)
            member_id = new_id
        elif member_id in group.pending:
            del group.pending[member_id]
        elif member_id not in group.members:
            return JoinResult(codes.UNKNOWN_MEMBER_ID, member_id)
        existing = group.members.get(member_id)
        if existing is not None and group.state is not GroupState.PREPARING_REBALANCE:
            same = existing.protocols == protos
            if group.state is GroupState.COMPLETING_REBALANCE and same:
                return self._join_result(group, existing)
            if group.state is GroupState.STABLE and same and member_id != group.leader:
                return self._join_result(group, existing)
        m = Member(member_id, client_id, instance_id, session_timeout_ms / 1000.0, rebalance_s, protocol_type,
                   protos, now, awaiting_join=True)
        if existing is not None:
            m.assignment = existing.assignment
        if not group.members:
            group.protocol_type = protocol_type
        group.members[member_id] = m
        if group.state is not GroupState.PREPARING_REBALANCE:
            self._prepare_rebalance(group, now)
        elif group.initial_delay:
            group.new_member_added = group.new_member_added or (existing is None and group.generation == 0)
        else:
            group.join_deadline = max(group.join_deadline or now, group.rebalance_started + rebalance_s)
        self.tick(group, now)
        return m

    def group(self, group_id: str, now: float) -> Group | None:
        """The group as of `now` (for ListGroups and DescribeGroups)."""
        group = self.groups.get(group_id)
        if group is not None:
            self.tick(group, now)
        return group

    def poll_join(self, group_id: str, member: Member, now: float) -> JoinResult | None:
        group = self.groups.get(group_id)
        if group is not None:
            self.tick(group, now)
        result = member.join_result
        if result is None and (group is None or group.members.get(member.member_id) is not member):
            result = JoinResult(codes.UNKNOWN_MEMBER_ID, member.member_id)
        member.join_result = None if result is not None else member.join_result
        return result

    # ---- SyncGroup ---------------------------------------------------------------------------
    def sync(self, group_id: str, member_id: str, generation: int, protocol_type: str | None,
             protocol_name: str | None, assignments: Mapping[str, bytes], now: float) -> SyncResult | Member:
        group = self.groups.get(group_id)
        if group is None:
            return SyncResult(codes.UNKNOWN_MEMBER_ID)
        self.tick(group, now)
        m = group.members.get(member_id)
        if m is None:
            return SyncResult(codes.UNKNOWN_MEMBER_ID)
        if generation != group.generation:
            return SyncResult(codes.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != group.protocol_type) or \
                (protocol_name is not None and protocol_name != group.protocol):
            return SyncResult(codes.INCONSISTENT_GROUP_PROTOCOL)
        if group.state is GroupState.PREPARING_REBALANCE:
            return SyncResult(codes.REBALANCE_IN_PROGRESS)
        m.last_seen = now
        if group.state is GroupState.STABLE:
            return SyncResult(codes.NONE, group.protocol_type, group.protocol, m.assignment)
        m.awaiting_sync = True
        m.sync_result = None
        if member_id == group.leader:
            for other in group.members.values():
                other.assignment = bytes(assignments.get(other.member_id, b""))
            group.state = GroupState.STABLE
            group.sync_deadline = None
            for other in group.members.values():
                if other.awaiting_sync:
                    other.awaiting_sync = False
                    other.last_seen = now
                    other.sync_result = SyncResult(codes.NONE, group.protocol_type, group.protocol,
                                                   other.assignment)
        return m

    def poll_sync(self, group_id: str, member: Member, now: float) -> SyncResult | None:
        group = self.groups.get(group_id)
        if group is not None:
            self.tick(group, now)
        result = member.sync_result
        if result is None and (group is None or group.members.get(member.member_id) is not member):
            result = SyncResult(codes.UNKNOWN_MEMBER_ID)
        if result is not None:
            member.sync_result = None
            member.awaiting_sync = False
        return result

    # ---- Heartbeat, LeaveGroup ---------------------------------------------------------------
    def heartbeat(self, group_id: str, member_id: str, generation: int, now: float) -> int:
        group = self.groups.get(group_id)
        if group is None:
            return codes.UNKNOWN_MEMBER_ID
        self.tick(group, now)
        m = group.members.get(member_id)
        if m is None:
            return codes.UNKNOWN_MEMBER_ID
        if generation != group.generation:
            return codes.ILLEGAL_GENERATION
        m.last_seen = now
        if group.state is GroupState.PREPARING_REBALANCE:
            return codes.REBALANCE_IN_PROGRESS
        return codes.NONE

    def leave(self, group_id: str, member_ids: Sequence[str], now: float) -> list[int]:
        """One error code per leaving member."""
        group = self.groups.get(group_id)
        if group is None:
            return [codes.UNKNOWN_MEMBER_ID for _ in member_ids]
        self.tick(group, now)
        out = []
        for mid in member_ids:
            if mid in group.pending:
                del group.pending[mid]
                out.append(codes.NONE)
            elif mid in group.members:
                self._remove(group, mid, now)
                out.append(codes.NONE)
            else:
                out.append(codes.UNKNOWN_MEMBER_ID)
        self.tick(group, now)
        return out

    # ---- offsets -----------------------------------------------------------------------------
    def commit_check(self, group_id: str, member_id: str, generation: int, now: float) -> int:
        """The group-level error of an OffsetCommit (NONE: the offsets may be stored)."""
        group = self.groups.get(group_id)
        if group is None:
            if generation >= 0:
                return codes.ILLEGAL_GENERATION
            group = self.groups[group_id] = Group(group_id)
        self.tick(group, now)
        if generation < 0 and group.state is GroupState.EMPTY:
            return codes.NONE  # a simple (assign()) consumer or an admin tool
        m = group.members.get(member_id)
        if generation >= 0 or member_id:
            if m is None:
                return codes.UNKNOWN_MEMBER_ID
            if generation != group.generation:
                return codes.ILLEGAL_GENERATION
        else:
            return codes.UNKNOWN_MEMBER_ID
        if group.state is GroupState.COMPLETING_REBALANCE:
            return codes.REBALANCE_IN_PROGRESS
        m.last_seen = now
        return codes.NONE

    def store_offset(self, group_id: str, topic: str, partition: int, committed: Committed) -> int:
        if len(committed.metadata.encode()) > OFFSET_METADATA_MAX_BYTES:
            return codes.OFFSET_METADATA_TOO_LARGE
        self.groups[group_id].offsets[(topic, partition)] = committed
        return codes.NONE

    def fetch_offsets(self, group_id: str, wanted: Iterable[tuple[str, int]] | None, now: float
                      ) -> dict[tuple[str, int], Committed | None]:
        """Committed offsets of the wanted partitions (None: all the group has)."""
        group = self.groups.get(group_id)
        if group is not None:
            self.tick(group, now)
        offsets = group.offsets if group is not None else {}
        if wanted is None:
            return dict(sorted(offsets.items()))
        return {tp: offsets.get(tp) for tp in wanted}

    def forget_partitions(self, topic: str, indexes: Iterable[int]) -> None:
        """Partitions were deleted: every group's committed offsets for them go
        (`OffsetMetadataManager.onPartitionsDeleted`)."""
        gone = {(topic, i) for i in indexes}
        for group in self.groups.values():
            for tp in gone & group.offsets.keys():
                del group.offsets[tp]

    # ---- persistence -------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {gid: {"generation": g.generation, "protocol_type": g.protocol_type, "protocol": g.protocol,
                      "leader": g.leader, "members": [m.to_json() for m in g.members.values()],
                      "offsets": [[t, p, c.offset, c.leader_epoch, c.metadata, c.commit_time]
                                  for (t, p), c in g.offsets.items()]}
                for gid, g in self.groups.items()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], now: float) -> GroupCoordinator:
        """Groups as Kafka loads them from `__consumer_offsets`: Stable with their members, or Empty."""
        out = cls()
        for gid, d in data.items():
            members = [Member.from_json(m, now) for m in d["members"]]
            out.groups[gid] = Group(
                gid, GroupState.STABLE if members else GroupState.EMPTY, int(d["generation"]),
                d["protocol_type"], d["protocol"], d["leader"], {m.member_id: m for m in members},
                offsets={(str(t), int(p)): Committed(int(o), int(e), str(md), float(ts))
                         for t, p, o, e, md, ts in d["offsets"]})
        return out
