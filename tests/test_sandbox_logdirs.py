"""The emulator's log-dir moves (KIP-113), fetch by fetch as Kafka's ReplicaAlterLogDirsThread
makes them, on a manual clock: these check the pacing at exact sandbox times, which only the
emulator can step. `test_logdir_moves_e2e.py` runs the moves on both engines through the CLI."""
from __future__ import annotations

import pytest

from kreassign.sandbox import codes
from kreassign.sandbox.configs import ALTER_LOG_DIRS_RATE
from kreassign.sandbox.engine import Engine
from kreassign.sandbox.fetch import FetchConfig, fetcher_id
from kreassign.sandbox.logdir_moves import LogDirMoves

DIRS = ("/var/lib/kafka/data-0", "/var/lib/kafka/data-1")
FETCH = 4000  # replica.fetch.max.bytes of these engines: a move of 10 kB takes three fetches


def moves_of(sizes: list[int], *, rate: int | None = None) -> tuple[Engine, LogDirMoves]:
    """Brokers 1 and 2 with two log dirs (two copy threads each) and topic t (replicas 1, 2)."""
    eng = Engine({1: None, 2: None}, seed=1, log_dirs_per_broker=2, fetch=FetchConfig(partition_max_bytes=FETCH))
    eng.create_topic("t", assignments={i: [1, 2] for i in range(len(sizes))}, sizes=sizes)
    if rate is not None:
        assert eng.configs.alter_broker(1, [(ALTER_LOG_DIRS_RATE, str(rate))], validate_only=False) == (
            codes.NONE, None)
    moves = LogDirMoves(eng)
    moves.advance(0.0)
    return eng, moves


def copied(moves: LogDirMoves, index: int) -> float | None:
    f = moves.future(1, "t", index)
    return None if f is None else f.copied


def dir_of(eng: Engine, index: int, topic: str = "t", broker: int = 1) -> str:
    p = eng.partition(topic, index)
    assert p is not None
    return p.log_dirs.get(broker, DIRS[0])


def away(eng: Engine, index: int) -> str:
    """The dir of broker 1 that t-<index> is not in."""
    return DIRS[1] if dir_of(eng, index) == DIRS[0] else DIRS[0]


def test_new_replicas_go_to_the_dir_holding_the_fewest() -> None:
    """As Kafka's LogManager places a new log (checked on Kafka 4.4.0): the dir with the fewest
    replicas, the first such dir on a tie; replicas that leave or move free their dir."""
    eng, _ = moves_of([0, 0, 0])
    assert [dir_of(eng, i) for i in range(3)] == [DIRS[0], DIRS[1], DIRS[0]]
    eng.create_topic("u", assignments={0: [2, 1], 1: [1, 2]})
    assert [dir_of(eng, i, "u") for i in range(2)] == [DIRS[1], DIRS[0]]
    eng.delete_topic("t")
    eng.create_topic("v", assignments={0: [1], 1: [1]})
    assert [dir_of(eng, i, "v") for i in range(2)] == [DIRS[0], DIRS[1]]  # t freed one of each


def test_partitions_share_copy_threads_by_kafkas_fetcher_id() -> None:
    assert [fetcher_id("t", i, 2) for i in range(4)] == [0, 1, 0, 1]


def test_an_unthrottled_move_fetches_up_to_the_fetch_size_and_swaps_at_the_fetch_after_catching_up() -> None:
    eng, moves = moves_of([10_000])
    assert dir_of(eng, 0) == DIRS[0] and moves.start(1, DIRS[1], "t", 0) == codes.NONE
    moves.advance(0.0)      # the first fetch goes out at once
    assert copied(moves, 0) == 4000.0
    moves.advance(0.025)    # 0.01 s and 0.02 s: the rest; caught up, the swap is asked for
    assert copied(moves, 0) == 10_000.0 and dir_of(eng, 0) == DIRS[0]
    moves.advance(0.035)    # the next fetch makes it
    assert moves.moves == {} and dir_of(eng, 0) == DIRS[1]


def test_a_throttled_move_waits_until_the_quota_windows_forget_each_fetch() -> None:
    """At 1 B/s a fetch of 4000 B keeps the rate over the bound until the sample is 11 windows
    old (Kafka's 11 one-second windows); the thread looks again every replica.fetch.backoff.ms."""
    _, moves = moves_of([10_000], rate=1)
    moves.start(1, DIRS[1], "t", 0)
    moves.advance(10.99)
    assert copied(moves, 0) == 4000.0
    moves.advance(11.02)    # the look at 11.01 s finds the sample gone
    assert copied(moves, 0) == 8000.0


def test_a_thread_copies_one_replica_at_a_time_and_a_brokers_threads_share_its_quota() -> None:
    eng, moves = moves_of([10_000, 10_000, 10_000])
    for index in (2, 1, 0):
        moves.start(1, away(eng, index), "t", index)
    moves.advance(0.025)    # thread 0 takes t-0 before t-2; thread 1 copies t-1 meanwhile
    assert (copied(moves, 0), copied(moves, 1), copied(moves, 2)) == (10_000.0, 10_000.0, 0.0)

    eng, moves = moves_of([10_000, 10_000], rate=5000)
    moves.start(1, away(eng, 0), "t", 0)
    moves.start(1, away(eng, 1), "t", 1)
    moves.advance(0.0)      # both fetch at once: 8000 B in the broker's first window
    assert (copied(moves, 0), copied(moves, 1)) == (4000.0, 4000.0)
    moves.advance(2.5)      # 8000 B over 2.01 s is under 5000 B/s again: thread 0 fetches, thread 1 then may not
    assert (copied(moves, 0), copied(moves, 1)) == (8000.0, 4000.0)


def test_moves_refused_moved_back_or_asked_before_the_replica_arrives() -> None:
    eng, moves = moves_of([10_000])
    eng.create_topic("u", assignments={0: [2]})  # in broker 2's second dir: its first holds t-0
    assert moves.start(1, "/nowhere", "t", 0) == codes.LOG_DIR_NOT_FOUND
    assert moves.start(1, DIRS[1], "ghost", 0) == codes.UNKNOWN_TOPIC_OR_PARTITION  # as Kafka 3.9.2 and 4.4.0
    assert moves.start(1, DIRS[1], "t", 0) == codes.NONE
    assert moves.start(1, DIRS[0], "t", 0) == codes.NONE  # back to where it is: the future goes away
    assert moves.moves == {}
    # broker 1 does not hold u-0 yet: refused, and the replica is created in that dir when it comes
    assert moves.start(1, DIRS[1], "u", 0) == codes.REPLICA_NOT_AVAILABLE
    assert eng.alter_reassignment("u", 0, [2, 1]) == (codes.NONE, None)
    p = eng.partition("u", 0)
    assert p is not None and p.log_dirs == {2: DIRS[1], 1: DIRS[1]} and moves.moves == {}


def test_a_move_is_saved_and_resumed() -> None:
    eng, moves = moves_of([10_000], rate=1)
    moves.start(1, DIRS[1], "t", 0)
    moves.advance(1.0)
    again = LogDirMoves(eng)
    again.load(moves.to_json())
    assert again.to_json() == [{"broker": 1, "topic": "t", "partition": 0, "dir": DIRS[1], "copied": 4000.0,
                                "caught_up": False}]
    eng.configs.alter_broker(1, [], validate_only=False)  # legacy AlterConfigs: every dynamic key goes
    again.advance(1.0)
    again.advance(1.05)
    assert again.moves == {} and dir_of(eng, 0) == DIRS[1]


@pytest.mark.parametrize("stopped", [True, False])
def test_a_stopped_broker_copies_nothing(stopped: bool) -> None:
    eng, moves = moves_of([10_000])
    moves.start(1, DIRS[1], "t", 0)
    if stopped:
        eng.stop_broker(1)
    moves.advance(5.0)
    assert copied(moves, 0) == (0.0 if stopped else None)


def test_sandbox_start_takes_log_dirs() -> None:
    from kreassign.sandbox.daemon import SandboxOptions

    cluster = SandboxOptions(brokers=2, racks=0, topics=("t:1:1",), log_dirs=3).build(None)
    try:
        assert cluster.engine.brokers[1].log_dirs == ("/var/lib/kafka/data-0", "/var/lib/kafka/data-1",
                                                      "/var/lib/kafka/data-2")
    finally:
        cluster.stop()
