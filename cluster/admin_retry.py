"""The deadline, retry and quota-throttle machinery under `KafkaAdmin`.

Kept apart from the adapter so the operations in `kreassign.cluster.admin` read as requests and
results; everything here is about when to send a request and when to give up.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import kafka.errors as Errors

from kreassign.cluster.errors import NoAnswer

T = TypeVar("T")

# kafka-python 3.0.12 KafkaConnection._maybe_throttle logs this with (connection, response
# class name, throttle_time_ms) after pausing the connection for that long.
THROTTLE_LOG_FORMAT = "%s: %s throttled by broker (%d ms)"


class ThrottleGate:
    """Per-broker "not before" times from broker throttle_time_ms (KIP-13/KIP-219)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._until: dict[int, float] = {}
        self._lock = threading.Lock()

    def note(self, broker: int, throttle_ms: int) -> None:
        if throttle_ms <= 0:
            return
        until = self._clock() + throttle_ms / 1000
        with self._lock:
            self._until[broker] = max(until, self._until.get(broker, 0.0))

    def remaining(self, broker: int | None) -> float:
        if broker is None:
            return 0.0
        with self._lock:
            until = self._until.get(broker, 0.0)
        return max(0.0, until - self._clock())


def _timed_out(error: BaseException) -> bool:
    """Whether kafka-python gave up waiting, rather than being told something by the broker."""
    if isinstance(error, (Errors.KafkaTimeoutError, Errors.RequestTimedOutError)):
        return True
    # A TCP connect cut short by the deadline ("Connection timed out") or by the OS (ETIMEDOUT).
    return isinstance(error, Errors.KafkaConnectionError) and "timed out" in str(error)


class KafkaLogTap(logging.Filter):
    """Reads the two facts kafka-python logs but does not return from its public methods: the
    throttle_time_ms of each response (it pauses the connection itself, but public results drop
    the field) and the connection error that says most (bootstrap only says "Unable to bootstrap").
    A pure observer: it never suppresses a record."""

    LOGGERS = ("kafka.net.connection", "kafka.net.manager")

    def __init__(self, gate: ThrottleGate, *, final: Callable[[BaseException], bool] | None = None) -> None:
        super().__init__()
        self._gate = gate
        self._final = final
        self.last_error: BaseException | None = None
        self.gave_up = threading.Event()
        """Set on the first error `final` says no retry can fix (a refused login, a rejected
        certificate): kafka-python would retry it until its bootstrap timeout."""
        self._older: frozenset[threading.Thread] = frozenset()

    def filter(self, record: logging.LogRecord) -> bool:
        # Filters run on the logging thread. Compared as objects: the OS hands a finished
        # thread's ident to the next thread started, which may be this connect's IO thread.
        if threading.current_thread() in self._older:
            return True
        args = record.args if isinstance(record.args, tuple) else ()
        if record.msg == THROTTLE_LOG_FORMAT and len(args) == 3:
            node_id = getattr(args[0], "node_id", None)
            if isinstance(node_id, int) and isinstance(args[2], int):
                self._gate.note(node_id, args[2])
        elif record.levelno >= logging.WARNING:
            error = next((a for a in args if isinstance(a, BaseException)), None)
            # A timeout only says the deadline came first: kafka-python gives its last bootstrap
            # attempt just the time left, so on a slow broker that attempt times out however the
            # earlier ones ended. The error before it (refused, closed, TLS, authentication) is
            # what tells the operator what to fix; a timeout counts only when nothing else was seen.
            if error is not None and (self.last_error is None or not _timed_out(error)):
                self.last_error = error
                if self._final is not None and self._final(error):
                    self.gave_up.set()
        return True

    def attach(self) -> None:
        if self._final is not None:
            # A connect watches only the client it builds: a client given up on earlier still
            # retries on its own thread and must not decide this one's fate.
            self._older = frozenset(threading.enumerate())
        for name in self.LOGGERS:
            logging.getLogger(name).addFilter(self)

    def detach(self) -> None:
        for name in self.LOGGERS:
            logging.getLogger(name).removeFilter(self)


HEARTBEAT_S = 15.0
"""How often an operation still waiting for the cluster says so (an operator sees a line at
least every 30 s, issue 29), measured on the adapter's clock."""


def within(fn: Callable[[], T], timeout_s: float, *, interrupt: threading.Event | None = None,
           heartbeat: Callable[[], None] | None = None) -> T:
    """Run `fn` on a helper thread and wait at most `timeout_s` for it (or until `interrupt` is set),
    calling `heartbeat` every HEARTBEAT_S seconds of that wait.

    kafka-python bounds each request by request_timeout_ms, but not a connection that hangs in
    its handshake (socket_connection_setup_timeout_ms, 10-30s, is not a KafkaAdminClient
    setting), nor the sum of several requests in one call. The attempt is abandoned on timeout:
    kafka-python finishes or fails it on its IO thread and nobody reads the result.
    """
    if timeout_s <= 0:
        raise NoAnswer()
    outcome: list[tuple[bool, Any]] = []
    done = interrupt or threading.Event()

    def run() -> None:
        try:
            outcome.append((True, fn()))
        except BaseException as exc:  # handed to the caller's thread below
            outcome.append((False, exc))
        finally:
            done.set()

    threading.Thread(target=run, name="kreassign-admin-call", daemon=True).start()
    left, every_s = timeout_s, HEARTBEAT_S
    while not done.wait(min(left, every_s) if heartbeat is not None else left):
        left -= every_s
        if heartbeat is None or left <= 0:
            raise NoAnswer()
        heartbeat()
    if not outcome:
        raise NoAnswer()
    ok, value = outcome[0]
    if ok:
        return value  # type: ignore[no-any-return]
    raise value


def should_retry(error: Errors.KafkaError) -> bool:
    # Unknown topics are "retriable" in kafka.errors (metadata may be stale), but a topic the
    # user named that does not exist should fail now, not after a minute of retries.
    if isinstance(error, Errors.UnknownTopicOrPartitionError):
        return False
    return bool(error.retriable)


def each_broker(brokers: Iterable[int], ask: Callable[[int], T], *, workers: int) -> dict[int, T]:
    """`ask(broker)` for every broker, `workers` at a time: an operation over many brokers waits
    as long as its slowest broker, not as long as all of them together (kafka-python's client
    takes calls from several threads; its I/O thread does the sending)."""
    ids = list(dict.fromkeys(brokers))
    if workers <= 1 or len(ids) <= 1:
        return {b: ask(b) for b in ids}
    with ThreadPoolExecutor(max_workers=min(workers, len(ids)), thread_name_prefix="kreassign-broker") as pool:
        futures = {b: pool.submit(ask, b) for b in ids}
        return {b: futures[b].result() for b in ids}
