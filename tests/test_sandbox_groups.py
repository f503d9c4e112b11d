"""The classic group state machine of the sandbox, without the network (Kafka's ClassicGroup)."""
from __future__ import annotations

import json

from kreassign.sandbox import codes
from kreassign.sandbox.groups import (
    Committed, GroupCoordinator, GroupState, JoinResult, Member, SyncResult, coordinator_for, java_string_hash,
)

PROTOS = [("range", b"r-meta"), ("roundrobin", b"rr-meta")]


def _join(gc: GroupCoordinator, member_id: str, now: float, *, protos: list[tuple[str, bytes]] = PROTOS,
          session_ms: int = 10_000, rebalance_ms: int = 30_000, group: str = "g") -> JoinResult | Member:
    return gc.join(group, member_id, "app", None, session_ms, rebalance_ms, "consumer", protos,
                   require_known_member_id=True, now=now)


def _new_member(gc: GroupCoordinator, now: float, **kw: object) -> Member:
    first = _join(gc, "", now, **kw)  # type: ignore[arg-type]
    assert isinstance(first, JoinResult) and first.error == codes.MEMBER_ID_REQUIRED
    assert first.member_id.startswith("app-")
    second = _join(gc, first.member_id, now, **kw)  # type: ignore[arg-type]
    assert isinstance(second, Member)
    return second


def test_first_member_waits_the_initial_delay_then_leads() -> None:
    gc = GroupCoordinator()
    m = _new_member(gc, 0.0)
    assert gc.groups["g"].state is GroupState.PREPARING_REBALANCE
    assert gc.poll_join("g", m, 2.999) is None
    assert gc.next_deadline("g", 0.0) == 3.0
    result = gc.poll_join("g", m, 3.0)
    assert result == JoinResult(codes.NONE, m.member_id, 1, "consumer", "range", m.member_id,
                                ((m.member_id, None, b"r-meta"),))
    assert gc.groups["g"].state is GroupState.COMPLETING_REBALANCE
    sync = gc.sync("g", m.member_id, 1, "consumer", "range", {m.member_id: b"assignment"}, 3.1)
    assert isinstance(sync, Member)
    assert gc.poll_sync("g", sync, 3.1) == SyncResult(codes.NONE, "consumer", "range", b"assignment")
    assert gc.groups["g"].state is GroupState.STABLE
    assert gc.heartbeat("g", m.member_id, 1, 5.0) == codes.NONE


def test_a_new_member_during_the_initial_delay_adds_one_more_delay() -> None:
    gc = GroupCoordinator()
    a = _new_member(gc, 0.0, rebalance_ms=7_000)
    b = _new_member(gc, 2.0, rebalance_ms=7_000)
    again = _join(gc, a.member_id, 2.5, rebalance_ms=7_000)  # a rejoin is not a new member
    assert isinstance(again, Member) and gc.next_deadline("g", 2.5) == 3.0
    assert gc.poll_join("g", b, 3.0) is None  # b came during the first delay: a second one, to 6
    assert gc.next_deadline("g", 3.0) == 6.0
    c = _new_member(gc, 4.0, rebalance_ms=7_000)
    assert gc.poll_join("g", c, 6.0) is None  # c came during the second: only 1 s of the 7 s is left
    assert gc.next_deadline("g", 6.0) == 7.0
    result = gc.poll_join("g", b, 7.0)
    assert result is not None and (result.generation, result.leader) == (1, a.member_id)


def test_a_second_member_triggers_a_rebalance_and_the_follower_gets_its_assignment_from_the_leader() -> None:
    gc = GroupCoordinator()
    leader = _new_member(gc, 0.0)
    gc.poll_join("g", leader, 3.0)
    synced = gc.sync("g", leader.member_id, 1, None, None, {leader.member_id: b"all"}, 3.0)
    assert isinstance(synced, Member)
    assert gc.poll_sync("g", synced, 3.0) == SyncResult(codes.NONE, "consumer", "range", b"all")
    follower = _new_member(gc, 4.0, protos=[("roundrobin", b"f-rr"), ("range", b"f-r")])
    assert gc.groups["g"].state is GroupState.PREPARING_REBALANCE
    # the leader learns of the rebalance by its heartbeat and rejoins
    assert gc.heartbeat("g", leader.member_id, 1, 4.5) == codes.REBALANCE_IN_PROGRESS
    assert gc.poll_join("g", follower, 4.5) is None
    rejoin = _join(gc, leader.member_id, 5.0)
    assert isinstance(rejoin, Member)
    lead = gc.poll_join("g", rejoin, 5.0)
    foll = gc.poll_join("g", follower, 5.0)
    assert lead is not None and foll is not None
    # votes: the leader prefers range, the follower roundrobin; both support both: a tie, first voted wins
    assert (lead.generation, lead.protocol_name, lead.leader) == (2, "range", leader.member_id)
    assert lead.members == ((leader.member_id, None, b"r-meta"), (follower.member_id, None, b"f-r"))
    assert foll.members == () and foll.leader == leader.member_id
    waiting = gc.sync("g", follower.member_id, 2, "consumer", "range", {}, 5.1)
    assert isinstance(waiting, Member) and gc.poll_sync("g", waiting, 5.1) is None
    gc.sync("g", leader.member_id, 2, "consumer", "range", {leader.member_id: b"p0", follower.member_id: b"p1"}, 5.2)
    assert gc.poll_sync("g", waiting, 5.2) == SyncResult(codes.NONE, "consumer", "range", b"p1")


def test_a_silent_member_expires_after_its_session_timeout_in_sandbox_time() -> None:
    gc = GroupCoordinator()
    a = _new_member(gc, 0.0)
    b = _new_member(gc, 0.0)  # joins during the initial delay: the join phase ends at 6
    gc.poll_join("g", a, 6.0)
    gc.poll_join("g", b, 6.0)
    gc.sync("g", a.member_id, 1, None, None, {a.member_id: b"x", b.member_id: b"y"}, 6.0)
    assert gc.groups["g"].state is GroupState.STABLE
    assert gc.heartbeat("g", a.member_id, 1, 15.0) == codes.NONE
    assert gc.heartbeat("g", a.member_id, 1, 15.999) == codes.NONE  # b last seen at 6.0: 10 s session
    assert gc.heartbeat("g", a.member_id, 1, 16.0) == codes.REBALANCE_IN_PROGRESS
    assert b.member_id not in gc.groups["g"].members
    assert gc.heartbeat("g", b.member_id, 1, 16.0) == codes.UNKNOWN_MEMBER_ID


def test_members_that_do_not_rejoin_are_dropped_at_the_rebalance_timeout() -> None:
    gc = GroupCoordinator()
    a = _new_member(gc, 0.0, rebalance_ms=20_000)
    b = _new_member(gc, 0.0, rebalance_ms=20_000)
    gc.poll_join("g", a, 6.0)
    gc.poll_join("g", b, 6.0)
    gc.sync("g", a.member_id, 1, None, None, {}, 6.0)
    again = _join(gc, a.member_id, 7.0, protos=[("range", b"changed")], rebalance_ms=20_000)
    assert isinstance(again, Member)
    for t in (13.0, 22.0, 26.0):  # b keeps heartbeating but does not rejoin
        assert gc.heartbeat("g", b.member_id, 1, t) == codes.REBALANCE_IN_PROGRESS
    assert gc.poll_join("g", again, 26.999) is None
    result = gc.poll_join("g", again, 27.0)
    assert result is not None and result.generation == 2
    assert result.members == ((a.member_id, None, b"changed"),)


def test_join_errors() -> None:
    gc = GroupCoordinator()
    assert _join(gc, "", 0.0, session_ms=5_999) == JoinResult(codes.INVALID_SESSION_TIMEOUT, "")
    assert _join(gc, "ghost", 0.0) == JoinResult(codes.UNKNOWN_MEMBER_ID, "ghost")
    assert gc.join("", "", "app", None, 10_000, 10_000, "consumer", PROTOS, require_known_member_id=True,
                   now=0.0) == JoinResult(codes.INVALID_GROUP_ID, "")
    _new_member(gc, 0.0)
    assert _join(gc, "", 0.0, protos=[("sticky", b"")]) == JoinResult(codes.INCONSISTENT_GROUP_PROTOCOL, "")
    assert gc.join("g", "", "app", None, 10_000, 10_000, "connect", PROTOS, require_known_member_id=True,
                   now=0.0) == JoinResult(codes.INCONSISTENT_GROUP_PROTOCOL, "")


def test_old_join_versions_get_a_member_id_at_once() -> None:
    gc = GroupCoordinator()
    m = gc.join("g", "", "app", None, 10_000, 10_000, "consumer", PROTOS, require_known_member_id=False, now=0.0)
    assert isinstance(m, Member) and m.member_id.startswith("app-")


def test_sync_and_heartbeat_errors() -> None:
    gc = GroupCoordinator()
    m = _new_member(gc, 0.0)
    assert gc.sync("g", m.member_id, 5, None, None, {}, 1.0) == SyncResult(codes.ILLEGAL_GENERATION)
    assert gc.sync("g", m.member_id, 0, None, None, {}, 1.0) == SyncResult(codes.REBALANCE_IN_PROGRESS)
    gc.poll_join("g", m, 3.0)
    assert gc.sync("g", "nobody", 1, None, None, {}, 3.0) == SyncResult(codes.UNKNOWN_MEMBER_ID)
    assert gc.sync("g", m.member_id, 1, "consumer", "roundrobin", {}, 3.0) == \
        SyncResult(codes.INCONSISTENT_GROUP_PROTOCOL)
    assert gc.heartbeat("nope", m.member_id, 1, 3.0) == codes.UNKNOWN_MEMBER_ID
    assert gc.heartbeat("g", m.member_id, 7, 3.0) == codes.ILLEGAL_GENERATION
    assert gc.heartbeat("g", m.member_id, 1, 3.0) == codes.NONE  # CompletingRebalance


def test_leaving_empties_the_group_and_offsets_stay() -> None:
    gc = GroupCoordinator()
    m = _new_member(gc, 0.0)
    gc.poll_join("g", m, 3.0)
    gc.sync("g", m.member_id, 1, None, None, {m.member_id: b"a"}, 3.0)
    assert gc.commit_check("g", m.member_id, 1, 4.0) == codes.NONE
    assert gc.store_offset("g", "orders", 0, Committed(42, 3, "", 4.0)) == codes.NONE
    assert gc.store_offset("g", "orders", 1, Committed(1, -1, "x" * 4097, 4.0)) == codes.OFFSET_METADATA_TOO_LARGE
    assert gc.leave("g", [m.member_id, "other"], 5.0) == [codes.NONE, codes.UNKNOWN_MEMBER_ID]
    group = gc.groups["g"]
    assert (group.state, group.generation, group.members) == (GroupState.EMPTY, 2, {})
    assert gc.fetch_offsets("g", [("orders", 0), ("orders", 1)], 6.0) == {
        ("orders", 0): Committed(42, 3, "", 4.0), ("orders", 1): None}


def test_offset_commit_checks() -> None:
    gc = GroupCoordinator()
    assert gc.commit_check("solo", "", -1, 0.0) == codes.NONE  # assign() consumers commit without a group
    assert gc.groups["solo"].state is GroupState.EMPTY
    assert gc.commit_check("missing", "m", 3, 0.0) == codes.ILLEGAL_GENERATION
    m = _new_member(gc, 0.0)
    gc.poll_join("g", m, 3.0)
    assert gc.commit_check("g", m.member_id, 1, 3.0) == codes.REBALANCE_IN_PROGRESS
    gc.sync("g", m.member_id, 1, None, None, {}, 3.0)
    assert gc.commit_check("g", m.member_id, 0, 3.0) == codes.ILLEGAL_GENERATION
    assert gc.commit_check("g", "stranger", 1, 3.0) == codes.UNKNOWN_MEMBER_ID
    assert gc.commit_check("g", "", -1, 3.0) == codes.UNKNOWN_MEMBER_ID


def test_groups_survive_json_as_kafka_reloads_them() -> None:
    gc = GroupCoordinator()
    m = _new_member(gc, 0.0)
    gc.poll_join("g", m, 3.0)
    gc.sync("g", m.member_id, 1, None, None, {m.member_id: b"\x00\x01"}, 3.0)
    gc.commit_check("g", m.member_id, 1, 3.0)
    gc.store_offset("g", "t", 2, Committed(10, 0, "meta", 3.0))
    again = GroupCoordinator.from_json(json.loads(json.dumps(gc.to_json())), 100.0)
    group = again.groups["g"]
    assert (group.state, group.generation, group.protocol, group.leader) == (GroupState.STABLE, 1, "range", m.member_id)
    assert group.members[m.member_id].assignment == b"\x00\x01"
    assert group.offsets == {("t", 2): Committed(10, 0, "meta", 3.0)}
    assert again.heartbeat("g", m.member_id, 1, 109.0) == codes.NONE  # session restarts at load time
    assert again.heartbeat("g", m.member_id, 1, 119.0) == codes.UNKNOWN_MEMBER_ID


def test_coordinator_is_the_offsets_partition_mod_live_brokers() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("kreassign-consumer-group") == java_string_hash("kreassign-consumer-group")
    assert java_string_hash("polygenelubricants") == -2147483648  # Java's famous MIN_VALUE hash
    assert coordinator_for("hello", [3, 1, 2]) == [1, 2, 3][(99162322 % 50) % 3]
    assert coordinator_for("g", []) is None
