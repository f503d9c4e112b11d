"""The data path without sockets: Produce/Fetch/ListOffsets handlers on an engine and its logs,
with acks=all and fetch purgatories on sandbox time (broker-semantics Part B §3-§4)."""
from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import DescribeLogDirsRequest
from kafka.protocol.consumer import FetchRequest, FetchResponse, ListOffsetsRequest
from kafka.protocol.producer import ProduceRequest

from kreassign.sandbox import codes
from kreassign.sandbox.dataplane import DataPlane
from kreassign.sandbox.engine import Engine
from kreassign.sandbox.context import Context
from kreassign.sandbox.handlers_admin import describe_log_dirs
from kreassign.sandbox.handlers_data import NoResponse, fetch, list_offsets, produce
from kreassign.sandbox.purgatory import Delayed
from kreassign.sandbox.wire import encode_response
from tests.test_sandbox_log import batch, record_values

ROUND = 0.01  # FetchConfig.round_s: in-sync followers fetch once per round


def in_sync_after(nbytes: int, network_bps: float = 100e6) -> float:
    """How long a batch takes to reach idle in-sync followers: its transfer, then one fetch round."""
    return nbytes / network_bps + ROUND


class Recorder:
    """A client quota hook that records what it is told and throttles by a fixed amount."""

    def __init__(self, throttle: int = 0) -> None:
        self.calls: list[tuple[str, str, int, float]] = []
        self.throttle = throttle

    def produce_throttle_ms(self, client_id: str, user: str, nbytes: int, now: float) -> int:
        self.calls.append(("produce", client_id, nbytes, now))
        return self.throttle

    def fetch_throttle_ms(self, client_id: str, user: str, nbytes: int, now: float) -> int:
        self.calls.append(("fetch", client_id, nbytes, now))
        return self.throttle


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[Engine, DataPlane]]:
    eng = Engine({1: None, 2: None, 3: None, 4: None}, seed=3)
    assert eng.create_topic("t", assignments={0: [1, 2, 3], 1: [2, 3, 1]}) == (codes.NONE, None)
    data = DataPlane(eng, tmp_path / "logs")
    yield eng, data
    data.close()


def ctx(eng: Engine, data: DataPlane, broker: int, now: float, quotas: Any = None) -> Context:
    extra = {"quotas": quotas} if quotas is not None else {}
    return Context(eng, broker, {b: 0 for b in eng.brokers}, {}, data=data, now=now, client_id="c1", **extra)


def produce_req(partition: int, records: bytes, *, acks: int = -1, timeout_ms: int = 30000, v: int = 9) -> Any:
    T = ProduceRequest.TopicProduceData
    P = T.PartitionProduceData
    return ProduceRequest(version=v, transactional_id=None, acks=acks, timeout_ms=timeout_ms,
                          topic_data=[T(version=v, name="t", partition_data=[P(version=v, index=partition,
                                                                                records=records)])])


def fetch_req(partition: int, offset: int, *, epoch: int = -1, min_bytes: int = 1, wait_ms: int = 500,
              v: int = 12) -> Any:
    T = FetchRequest.FetchTopic
    P = T.FetchPartition
    return FetchRequest(version=v, replica_id=-1, max_wait_ms=wait_ms, min_bytes=min_bytes, max_bytes=1 << 20,
                        isolation_level=0, session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
                        topics=[T(version=v, topic="t", partitions=[P(
                            version=v, partition=partition, current_leader_epoch=epoch, fetch_offset=offset,
                            last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)])])


def part_result(resp: Any) -> Any:
    (t,) = resp.responses
    (p,) = t.partition_responses if hasattr(t, "partition_responses") else t.partitions
    return p


def test_acks_all_waits_one_follower_fetch_round(world: tuple[Engine, DataPlane]) -> None:
    eng, data = world
    records = batch([b"a", b"b"])
    op = produce(ctx(eng, data, 1, 10.0), 9, produce_req(0, records))
    assert isinstance(op, Delayed)
    assert (op.parked_at, op.deadline) == (10.0, 40.0)
    done = 10.0 + in_sync_after(len(records))
    assert op.wake(10.0) == done
    assert not op.ready(done - 1e-9)
    assert op.ready(done)
    p = part_result(op.complete(done, False))
    assert (p.error_code, p.base_offset, p.log_start_offset) == (codes.NONE, 0, 0)
    assert data.high_watermark(eng.partition("t", 0), done) == 2


def test_acks_all_waits_longer_when_the_followers_are_busy(tmp_path: Path) -> None:
    """Remote time grows with the ISR's load: each follower broker receives through its network
    in order, so a burst queues behind earlier bytes."""
    eng = Engine({1: None, 2: None, 3: None}, seed=3, network_bps=1_000_000)
    eng.create_topic("t", assignments={0: [1, 2, 3], 1: [1, 3, 2]})
    data = DataPlane(eng, tmp_path / "logs")
    big = batch([b"x" * 50_000])                 # 50 ms on a 1 MB/s follower
    small = batch([b"y"])
    first = produce(ctx(eng, data, 1, 0.0), 9, produce_req(0, big))
    second = produce(ctx(eng, data, 1, 0.0), 9, produce_req(1, small))  # same followers, other partition
    assert isinstance(first, Delayed) and isinstance(second, Delayed)
    assert first.wake(0.0) == pytest.approx(len(big) / 1e6 + ROUND)
    assert second.wake(0.0) == pytest.approx((len(big) + len(small)) / 1e6 + ROUND)  # queued behind
    alone = produce(ctx(eng, data, 1, 10.0), 9, produce_req(1, small))
    assert isinstance(alone, Delayed) and alone.wake(10.0) == pytest.approx(10.0 + len(small) / 1e6 + ROUND)
    data.close()


@pytest.mark.parametrize("throttle", [None, 100_000])
def test_acks_all_waits_behind_the_catch_up_a_move_sends_over_the_same_links(tmp_path: Path,
                                                                             throttle: int | None) -> None:
    """A move out of leader 1 (unthrottled: full 1 MiB responses, back to back) puts the rest of
    the catch-up response in flight and the whole next one ahead of an in-sync batch leaving
    broker 1 (its link's catch-up share, an exponential average, is 1 - e^-5 after 5 s of a full
    link: over `LINK_FILLED`). A 100 kB/s throttle leaves that link idle but for one fetch now
    and then."""
    from test_throttle_fidelity import set_lists, set_rates

    eng = Engine({1: None, 2: None, 3: None}, seed=3, network_bps=10e6)
    eng.create_topic("t", assignments={0: [1, 2]})
    eng.create_topic("big", assignments={0: [1]}, sizes=[10**12])
    if throttle is not None:
        set_rates(eng, throttle)
        set_lists(eng, "big", "*", "*")
    data = DataPlane(eng, tmp_path / "logs")
    records = batch([b"a"])
    idle = produce(ctx(eng, data, 1, 0.0), 9, produce_req(0, records))
    assert isinstance(idle, Delayed) and idle.wake(0.0) == pytest.approx(len(records) / 10e6 + ROUND)
    eng.alter_reassignment("big", 0, [1, 3])
    eng.advance(5.0)
    op = produce(ctx(eng, data, 1, 5.0), 9, produce_req(0, records))
    assert isinstance(op, Delayed)
    if throttle is None:
        assert eng.replication.catchup_link(0, 1)[0] == pytest.approx(1 - math.exp(-5.0))
        # the draws (seeded) say where in the response in flight the batch arrived: one to two
        # responses ahead of it
        ahead = (op.wake(5.0) - 5.0 - ROUND) * 10e6 - len(records)
        assert 1024 * 1024 <= ahead <= 2 * 1024 * 1024
        # batches appended at the same instant share one response behind one catch-up response:
        # each waits for the in-sync bytes queued before it, not for a catch-up response apiece
        for _ in range(4):
            produce(ctx(eng, data, 1, 5.0), 9, produce_req(0, records))
        in_sync = [at - 5.0 for at in data.log(eng.partition("t", 0)).cols["in_sync_at"][-5:]]
        assert in_sync == pytest.approx([(ahead + (i + 1) * len(records)) / 10e6 + ROUND for i in range(5)], rel=1e-9)
    else:
        assert op.wake(5.0) - 5.0 < 0.1 * 1024 * 1024 / 10e6 + ROUND  # under a tenth of the unthrottled wait
    data.close()


def test_acks_all_times_out_with_request_timed_out(world: tuple[Engine, DataPlane]) -> None:
    eng, data = world
    op = produce(ctx(eng, data, 1, 0.0), 9, produce_req(0, batch([b"a"]), timeout_ms=5))
    assert isinstance(op, Delayed) and op.deadline == pytest.approx(0.005)
    p = part_result(op.complete(0.005, True))
    assert (p.error_code, p.base_offset) == (codes.REQUEST_TIMED_OUT, -1)
    # the records were appended all the same, as in Kafka: a retry finds them as a duplicate
    assert data.log(eng.partition("t", 0)).leo == 1


def test_acks_one_and_zero_answer_at_once_and_leader_alone_advances_the_hw(world: tuple[Engine, DataPlane]) -> None:
    eng, data = world
    resp = produce(ctx(eng, data, 1, 0.0), 9, produce_req(0, batch([b"a"]), acks=1))
    assert part_result(resp).base_offset == 0
    assert produce(ctx(eng, data, 1, 0.0), 9, produce_req(0, batch([b"b"]), acks=0)) == NoResponse(0)
    assert data.log(eng.partition("t", 0)).leo == 2
    eng.stop_broker(2)
    eng.stop_broker(3)
    assert eng.partition("t", 0).isr == [1]
    resp = produce(ctx(eng, data, 1, 5.0), 9, produce_req(0, batch([b"c"])))
    assert not isinstance(resp, Delayed) and part_result(resp).base_offset == 2
    assert data.log(eng.partition("t", 0)).hw == 3


def test_min_insync_replicas_refuses_acks_all(world: tuple[Engine, DataPlane]) -> None:
    eng, data = world
    eng.configs.alter_topic("t", [("min.insync.replicas", "2")], validate_only=False)
    eng.stop_broker(2)
    eng.stop_broker(3)
    p = part_result(produce(ctx(eng, data, 1, 0.0), 9, produce_req(0, batch([b"a"]))))
    assert p.error_code == codes.NOT_ENOUGH_REPLICAS


def test_not_leader_and_leader_epochs_after_a_leader_change(world: tuple[Engine, DataPlane]) -> None:
    eng, data = world
    p0 = eng.partition("t", 0)
    assert part_result(produce(ctx(eng, data, 2, 0.0), 9, produce_req(0, batch([b"a"]), acks=1))).error_code == \
        codes.NOT_LEADER_OR_FOLLOWER
    old_epoch = p0.leader_epoch
    eng.stop_broker(1)
    assert p0.leader == 2 and p0.leader_epoch == old_epoch + 1
    assert part_result(fetch(ctx(eng, data, 2, 0.0), 12, fetch_req(0, 0, epoch=old_epoch))).error_code == \
        codes.FENCED_LEADER_EPOCH
    assert part_result(fetch(ctx(eng, data, 2, 0.0), 12, fetch_req(0, 0, epoch=old_epoch + 5))).error_code == \
        codes.UNKNOWN_LEADER_EPOCH
    assert part_result(fetch(ctx(eng, data, 3, 0.0), 12, fetch_req(0, 0, epoch=old_epoch + 1))).error_code == \
        codes.NOT_LEADER_OR_FOLLOWER
    # KIP-951: the answer names the new leader (and, from Fetch v16 / Produce v10, where it listens)
    stale = fetch(ctx(eng, data, 3, 0.0), 16, fetch_req(0, 0, epoch=old_epoch + 1, v=16))
    p = part_result(stale)
    assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (2, old_epoch + 1)
    assert [(n.node_id, n.host) for n in stale.node_endpoints] == [(2, "127.0.0.1")]
    moved = produce(ctx(eng, data, 3, 0.0), 10, produce_req(0, batch([b"a"]), acks=1, v=10))
    assert part_result(moved).current_leader.leader_id == 2 and [n.node_id for n in moved.node_endpoints] == [2]
    decoded = FetchResponse.decode(encode_response(stale, 5)[4:], version=16, header=True)
    assert part_result(decoded).current_leader.leader_id == 2  # the tagged fields survive the wire


def test_fetch_waits_for_min_bytes_below_the_high_watermark(world: tuple[Engine, DataPlane]) -> None:
    eng, data = world
    op = fetch(ctx(eng, data, 1, 0.0), 12, fetch_req(0, 0))
    assert isinstance(op, Delayed) and op.deadline == pytest.approx(0.5)
    records = batch([b"hello"])
    produced = produce(ctx(eng, data, 1, 0.1), 9, produce_req(0, records))
    assert isinstance(produced, Delayed)
    done = 0.1 + in_sync_after(len(records))
    assert op.wake(0.1) == done
    assert not op.ready(0.1)              # appended, but not yet below the high watermark
    assert op.ready(done)                 # the followers' next round moved the HW
    p = part_result(op.complete(done, False))
    assert (p.error_code, p.high_watermark, p.log_start_offset) == (codes.NONE, 1, 0)
    assert [v for _, _, v in record_values(p.records)] == [b"hello"]


def test_fetch_expires_empty_and_out_of_range_answers_at_once(world: tuple[Engine, DataPlane]) -> None:
    eng, data = world
    op = fetch(ctx(eng, data, 1, 0.0), 12, fetch_req(0, 0))
    assert isinstance(op, Delayed)
    p = part_result(op.complete(0.5, True))
    assert (p.error_code, p.high_watermark, p.records) == (codes.NONE, 0, b"")
    p = part_result(fetch(ctx(eng, data, 1, 0.0), 12, fetch_req(0, 7)))
    assert p.error_code == codes.OFFSET_OUT_OF_RANGE


def test_quota_hook_sees_bytes_and_sets_throttle(world: tuple[Engine, DataPlane]) -> None:
    eng, data = world
    hook = Recorder(throttle=250)
    records = batch([b"x" * 100])
    resp = produce(ctx(eng, data, 1, 1.0, hook), 9, produce_req(0, records, acks=1))
    assert resp.throttle_time_ms == 250
    assert hook.calls == [("produce", "c1", len(records), 1.0)]
    data.high_watermark(eng.partition("t", 0), 2.0)
    resp = fetch(ctx(eng, data, 1, 2.0, hook), 12, fetch_req(0, 0, wait_ms=0))
    # a throttled fetch is answered at once without records (KIP-219)
    assert (resp.throttle_time_ms, resp.responses) == (250, [])
    assert hook.calls[-1] == ("fetch", "c1", len(records), 2.0)


def test_list_offsets_earliest_latest_and_by_time(world: tuple[Engine, DataPlane]) -> None:
    eng, data = world
    for ts in (100, 200):
        produce(ctx(eng, data, 1, 0.0), 9, produce_req(0, batch([b"a", b"b"], ts=ts), acks=1))
    data.high_watermark(eng.partition("t", 0), 1.0)
    T = ListOffsetsRequest.ListOffsetsTopic
    P = T.ListOffsetsPartition
    answers = {}
    for ts in (-1, -2, -3, 150, 999):
        req = ListOffsetsRequest(version=7, replica_id=-1, isolation_level=0, topics=[
            T(version=7, name="t", partitions=[P(version=7, partition_index=0, current_leader_epoch=-1,
                                                  timestamp=ts)])])
        r = list_offsets(ctx(eng, data, 1, 1.0), 7, req).topics[0].partitions[0]
        answers[ts] = (r.error_code, r.offset, r.timestamp)
    assert answers == {-1: (0, 4, -1), -2: (0, 0, -1), -3: (0, 3, 201), 150: (0, 2, 201), 999: (0, -1, -1)}


def test_client_bytes_count_in_log_dirs_and_a_new_replica_must_copy_them(tmp_path: Path) -> None:
    eng = Engine({1: None, 2: None, 3: None, 4: None}, seed=3, network_bps=50_000)  # 5 kB per tick
    eng.create_topic("t", assignments={0: [1, 2, 3]})
    data = DataPlane(eng, tmp_path / "logs")
    p0 = eng.partition("t", 0)
    sizes = []
    for i in range(20):
        records = batch([bytes([i]) * 4000])
        produce(ctx(eng, data, 1, 0.0), 9, produce_req(0, records, acks=1))
        sizes.append(len(records))
    assert eng.log_end[p0.row] == sum(sizes)
    assert {r.size for rs in eng.describe_log_dirs(2, None).values() for r in rs} == {sum(sizes)}
    assert eng.alter_reassignment("t", 0, [1, 2, 4]) == (codes.NONE, None)
    now, seen = 2.0, []                    # the in-sync followers hold all 20 batches by 1.6 s
    hw_before = data.high_watermark(p0, now)
    assert hw_before == 20
    while p0.reassigning and now < 100:
        eng.advance(0.1)
        now += 0.1
        if p0.reassigning:
            seen.append(data.replica_leo(p0, 4, now))
            held = eng.replica_size(p0, 4)
            assert sum(sizes[:seen[-1]]) <= held < sum(sizes[:seen[-1] + 1])  # whole batches only
            (lag,) = [q.offset_lag for r in describe_log_dirs(ctx(eng, data, 4, now), 4, DescribeLogDirsRequest(
                version=4, topics=None)).results for t in r.topics for q in t.partitions]
            assert lag == hw_before - seen[-1]  # DescribeLogDirs: HW minus the replica's log end offset
        assert data.high_watermark(p0, now) == hw_before  # the adding replica never holds the HW back
    assert p0.replicas == [1, 2, 4] and not p0.reassigning
    assert seen[0] < 5 and seen == sorted(seen) and len(set(seen)) > 5
    assert data.replica_leo(p0, 4, now + ROUND) == 20
    data.close()


def test_offsets_and_records_survive_a_restart(tmp_path: Path) -> None:
    eng = Engine({1: None, 2: None}, seed=1)
    eng.create_topic("t", assignments={0: [1, 2]})
    data = DataPlane(eng, tmp_path / "logs")
    produce(ctx(eng, data, 1, 0.0), 9, produce_req(0, batch([b"a", b"b"]), acks=1))
    data.high_watermark(eng.partition("t", 0), 1.0)
    data.allocate_producer_id()
    data.checkpoint()
    saved = eng.to_json()
    data.close()
    eng2 = Engine.from_json(saved)
    data2 = DataPlane(eng2, tmp_path / "logs")
    log = data2.log(eng2.partition("t", 0))
    assert (log.leo, log.hw, data2.next_producer_id) == (2, 2, 1001)
    assert [v for _, _, v in record_values(log.read(0, 1 << 20, 2))] == [b"a", b"b"]
    data2.close()


def test_records_appended_after_the_last_state_save_are_kept(tmp_path: Path) -> None:
    eng = Engine({1: None}, seed=1)
    eng.create_topic("t", assignments={0: [1]})
    data = DataPlane(eng, tmp_path / "logs")
    stale = eng.to_json()                      # saved before the append
    produce(ctx(eng, data, 1, 0.0), 9, produce_req(0, batch([b"late"]), acks=1))
    data.close()
    eng2 = Engine.from_json(stale)
    data2 = DataPlane(eng2, tmp_path / "logs")
    p = eng2.partition("t", 0)
    assert data2.log(p).leo == 1
    assert eng2.log_end[p.row] == data2.log(p).byte_end
    data2.close()


def test_unclean_election_truncates_the_log(world: tuple[Engine, DataPlane]) -> None:
    eng, data = world
    p0 = eng.partition("t", 0)
    produce(ctx(eng, data, 1, 0.0), 9, produce_req(0, batch([b"a"]), acks=1))
    # broker 4 joins while 1, 2, 3 hold one batch; then the others die and 4 is elected uncleanly
    eng.configs.alter_topic("t", [("unclean.leader.election.enable", "true")], validate_only=False)
    eng.alter_reassignment("t", 0, [4, 1, 2, 3])
    for b in (1, 2, 3):
        eng.stop_broker(b)
    assert p0.leader == -1
    assert eng.elect_leaders(1, {"t": [0]}) == [("t", 0, codes.NONE, None)]
    assert p0.leader == 4
    assert data.log(p0).leo == 0


def test_acks_all_answers_not_leader_when_leadership_moves_while_waiting(world: tuple[Engine, DataPlane]) -> None:
    eng, data = world
    op = produce(ctx(eng, data, 1, 0.0), 9, produce_req(0, batch([b"a"])))
    assert isinstance(op, Delayed)
    eng.stop_broker(1)
    assert op.ready(0.0)  # the wait ends at once, as DelayedProduce's leadership check does
    p = part_result(op.complete(0.0, False))
    assert (p.error_code, p.base_offset) == (codes.NOT_LEADER_OR_FOLLOWER, -1)
    assert data.log(eng.partition("t", 0)).leo == 1
