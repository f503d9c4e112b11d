"""`close_producer` against a producer whose cluster went away (kafka-python 3.0.12's shapes)."""
from __future__ import annotations

import threading

from kafka.errors import KafkaTimeoutError

from kreassign.cluster.producers import close_producer


class Accumulator:
    def __init__(self) -> None:
        self.aborts: list[str] = []

    def abort_incomplete_batches(self) -> None:
        self.aborts.append(threading.current_thread().name)


class Sender(threading.Thread):
    """Fails the waiting records on its way out once forced closed (as kafka-python's does),
    unless it is stuck."""

    def __init__(self, accumulator: Accumulator, stuck: bool) -> None:
        super().__init__(name="load-network-thread", daemon=True)
        self.accumulator, self.stuck, self.forced = accumulator, stuck, threading.Event()

    def force_close(self) -> None:
        self.forced.set()

    def run(self) -> None:
        self.forced.wait()
        if self.stuck:
            threading.Event().wait(1.0)
        self.accumulator.abort_incomplete_batches()


class Producer:
    def __init__(self, stuck: bool = False) -> None:
        self._accumulator = Accumulator()
        self._sender = Sender(self._accumulator, stuck)
        self._sender.start()
        self.closes: list[float] = []

    def close(self, timeout: float) -> None:
        self.closes.append(timeout)
        if timeout > 0:
            raise KafkaTimeoutError("records still waiting")


def test_the_sender_alone_fails_the_waiting_records() -> None:
    producer = Producer()
    assert close_producer(producer, 5.0) is False
    assert producer._accumulator.aborts == ["load-network-thread"]  # once, never raced from here
    assert producer.closes == [5.0, 0]


def test_a_sender_that_does_not_stop_has_its_records_failed_from_here() -> None:
    producer = Producer(stuck=True)
    assert close_producer(producer, 0.05) is False
    assert producer._accumulator.aborts[0] == threading.current_thread().name
    producer._sender.join(5)
