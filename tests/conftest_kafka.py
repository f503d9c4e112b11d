"""Pytest fixtures for real Apache Kafka (loaded from tests/conftest.py via `pytest_plugins`).

* `kafka_cluster`: a real KRaft cluster (1 controller, 5 brokers in 2 racks, 3 log dirs each) of
  the first release of $KREASSIGN_KAFKA_VERSIONS (default: the tested matrix), started once per
  session from the jars `make kafka` fetched.
* `kafka_matrix`: one such cluster per release of the matrix, for the compatibility tests.
* `live`: the backend of the live tests, parametrized over the emulator and real Kafka
  (`tests/live.py`). $KREASSIGN_LIVE_ENGINES=emulator limits it to the emulator (a quick run on a
  machine without Java); `make test` runs both. A test marked `live_wall_clock` gets an emulator
  on the wall clock (for clients that wait on replication, such as acks=all producers); one
  marked `live_metrics` gets its Prometheus endpoints (the real brokers always serve theirs,
  through the JMX exporter's agent).

The jars must be there: a missing Java, Maven or jar fails these tests with the reason, it does
not skip them. At the end of the session the count of live tests per engine is printed.
"""
from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kreassign.execute.lock import LOCK_KEY
from kreassign.sandbox.kafka_engine.dist import MATRIX

from live import BROKERS, LOG_DIRS, RACKS, EmulatorLive, KafkaLive

VERSIONS: tuple[str, ...] = tuple(os.environ.get("KREASSIGN_KAFKA_VERSIONS", " ".join(MATRIX)).split())
ENGINES: tuple[str, ...] = tuple(os.environ.get("KREASSIGN_LIVE_ENGINES", "emulator kafka").split())
_RAN: Counter[str] = Counter()


PORT_ATTEMPTS = 3
"""starts of a session cluster, each on new free ports, when a port was taken meanwhile"""


class KafkaPool:
    """Real clusters by release, started on first use, stopped at the end of the session."""

    def __init__(self) -> None:
        self.clusters: dict[str, Any] = {}
        self.failures: dict[str, BaseException] = {}

    def get(self, version: str) -> Any:
        if version in self.failures:
            raise self.failures[version]
        if version not in self.clusters:
            from kreassign.sandbox.errors import PortTaken
            from kreassign.sandbox.kafka_engine.cluster import KafkaCluster
            from kreassign.sandbox.kafka_engine.dist import locate

            cluster = None
            for attempt in range(1, PORT_ATTEMPTS + 1):
                try:
                    # 384 MB heaps and a generous start: several suites may run on one loaded machine
                    # with the Prometheus JMX exporter on every broker (tests/test_prometheus_vs_kafka.py)
                    cluster = KafkaCluster(locate(None, version), brokers=BROKERS, racks=RACKS, log_dirs=LOG_DIRS,
                                           topics=(), heap="384m", start_timeout_s=600.0, metrics_port=0)
                    cluster.start()
                    with cluster.admin() as port:
                        # The first FindCoordinator creates __consumer_offsets; its coordinator then
                        # loads for a few seconds, longer than the tests' short client timeouts.
                        port.read_markers([LOCK_KEY])
                    break
                except BaseException as exc:
                    if cluster is not None:
                        cluster.stop()
                    cluster = None
                    # Free ports are picked before the JVMs bind them: another process (the other
                    # worker's clients) took one in between once, and every real-Kafka test of the
                    # run failed. New ports, a new cluster.
                    if not isinstance(exc, PortTaken) or attempt == PORT_ATTEMPTS:
                        self.failures[version] = exc
                        raise
            self.clusters[version] = cluster
        return self.clusters[version]

    def stop(self) -> None:
        for cluster in self.clusters.values():
            cluster.stop()


@pytest.fixture(scope="session")
def kafka_pool() -> Iterator[KafkaPool]:
    pool = KafkaPool()
    yield pool
    pool.stop()


@pytest.fixture(scope="session")
def kafka_cluster(kafka_pool: KafkaPool) -> Any:
    return kafka_pool.get(VERSIONS[0])


@pytest.fixture(params=VERSIONS)
def kafka_matrix(request: pytest.FixtureRequest, kafka_pool: KafkaPool) -> Any:
    return kafka_pool.get(request.param)


@pytest.fixture(params=ENGINES)
def live(request: pytest.FixtureRequest, sandbox_factory: Callable[..., Any]) -> Iterator[Any]:
    _RAN[request.param] += 1
    if request.param == "emulator":
        from kreassign.sandbox.clock import ManualClock, ScaledClock

        wall = request.node.get_closest_marker("live_wall_clock") is not None
        metrics = 0 if request.node.get_closest_marker("live_metrics") is not None else None
        yield EmulatorLive(sandbox_factory(brokers=BROKERS, racks=RACKS, topics=(), log_dirs=LOG_DIRS,
                                           clock=ScaledClock(1.0) if wall else ManualClock(),
                                           metrics_port=metrics), wall_clock=wall)
        return
    yield from reset_after(request.getfixturevalue("kafka_cluster"))


@pytest.fixture
def kafka_live(kafka_cluster: Any) -> Iterator[KafkaLive]:
    """The `live` backend on the session's real cluster alone (a drill about real brokers)."""
    yield from reset_after(kafka_cluster)


def reset_after(cluster: Any) -> Iterator[KafkaLive]:
    """`live`'s API on a real cluster, put back after the test (`KafkaLive.reset`): a fixture's
    body (`yield from`)."""
    backend = KafkaLive(cluster)
    try:
        yield backend
    finally:
        backend.reset()


def mark_kafka_tests(items: list[pytest.Item]) -> None:
    """Tests on a real Kafka cluster are `kafka` tests, whether or not they say so (called by
    tests/conftest.py's collection hook, before the marks are read)."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("live") == "kafka" or "kafka_cluster" in getattr(
                item, "fixturenames", ()) or "kafka_matrix" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.kafka)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """An xdist worker hands its count of live tests to the controller (`pytest_testnodedown`)."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["live_ran"] = dict(_RAN)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    _RAN.update(getattr(node, "workeroutput", {}).get("live_ran", {}))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _RAN:
        counts = ", ".join(f"{engine} {_RAN[engine]}" for engine in ENGINES)
        terminalreporter.write_line(f"live tests per engine: {counts} (real Kafka {VERSIONS[0]}; matrix "
                                    f"{' '.join(VERSIONS)})")
