import os

import pytest

from cli_helpers import KREASSIGN, Kreassign

pytest_plugins = ["conftest_sandbox", "conftest_spark", "conftest_kafka"]

# The execution lock waits `settle_s` after writing its marker (execute/lock.py) to let a racing
# writer show up; the suite's clusters answer in microseconds and the tests of the lock set their
# own wait, so the CLI runs of the suite (in process and in subprocesses) skip it.
os.environ.setdefault("KREASSIGN_LOCK_SETTLE_S", "0")

# The Spark driver's class-data archive (simulate/jvm_cache.py) lives in the user's cache dir and
# is recorded by a background process: the suite (and the CLI it runs in subprocesses) neither
# reads nor records one, except tests/test_jvm_cache.py, which uses a dir of its own.
os.environ.setdefault("KREASSIGN_SPARK_CDS", "0")


@pytest.fixture
def kreassign() -> Kreassign:
    """The one CLI runner every test uses: `kreassign.run(...)` in process (a fake cluster or a
    runtime injected), `kreassign.subprocess(...)`/`.start(...)` in a process of its own."""
    return KREASSIGN


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`make test` runs two pytest-xdist workers (`--dist loadgroup`): every test that starts or
    uses a JVM (real Kafka, Spark) on one of them, in order, on that worker's session clusters
    and Spark session (the real-Kafka tests share brokers, quota sensors and the lock marker; a
    second set of JVMs on 2 cores thrashed: a Spark cluster took 205 s to start instead of 54 s),
    and the rest (pure logic and the emulator) spread over both."""
    for item in items:
        if item.get_closest_marker("kafka") is not None or item.get_closest_marker("spark") is not None:
            item.add_marker(pytest.mark.xdist_group("jvm"))
