"""A topic just created is used once the broker asked knows it and its partitions have leaders."""
from __future__ import annotations

from typing import Any

import pytest

from kreassign.cluster.errors import ClusterError, UnknownTopicError
from kreassign.cluster.model import PartitionInfo
from kreassign.cluster.new_topic import POLL_S, wait_until_led


class LaggingBroker:
    """Answers Metadata as a broker that learns of the topic late: unknown, then without leaders."""

    def __init__(self, answers: list[Any]) -> None:
        self.answers, self.asked = answers, 0

    def describe_topics(self, topics: list[str]) -> list[PartitionInfo]:
        answer = self.answers[min(self.asked, len(self.answers) - 1)]
        self.asked += 1
        if answer is None:
            raise UnknownTopicError(topics)
        return answer


def led(*leaders: int | None) -> list[PartitionInfo]:
    return [PartitionInfo("c", p, (1, 2), leader) for p, leader in enumerate(leaders)]


def clock() -> tuple[list[float], Any, Any]:
    now = [0.0]
    return now, (lambda: now[0]), (lambda s: now.__setitem__(0, now[0] + s))


def test_it_waits_through_unknown_and_leaderless_answers() -> None:
    broker = LaggingBroker([None, None, led(1, None), led(1, -1), led(1, 2)])
    now, read, sleep = clock()
    parts = wait_until_led(broker, "c", 2, timeout_s=10.0, clock=read, sleep=sleep)  # type: ignore[arg-type]
    assert [p.leader for p in parts] == [1, 2]
    assert broker.asked == 5 and now[0] == pytest.approx(4 * POLL_S)


def test_a_topic_that_never_gets_leaders_is_one_error_after_the_timeout() -> None:
    broker = LaggingBroker([None, led(1, None)])
    now, read, sleep = clock()
    with pytest.raises(ClusterError) as raised:
        wait_until_led(broker, "c", 2, timeout_s=2.0, clock=read, sleep=sleep)  # type: ignore[arg-type]
    assert str(raised.value).startswith("topic c was created, but after 2s the brokers report 1 of its 2 "
                                        "partition(s) with a leader")
    assert 2.0 <= now[0] <= 2.0 + POLL_S + 1e-9  # given up within one poll of the timeout
