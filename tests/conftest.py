import os

import pytest

from cli_helpers import KREASSIGN, Kreassign

pytest.register_assert_rewrite("conftest_kafka", "conftest_spark")
from conftest_kafka import mark_kafka_tests  # noqa: E402
from conftest_spark import mark_spark_tests  # noqa: E402

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


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests that run a JVM (`kafka`: a real cluster; `spark`: a Spark session or
    cluster), then group them for `make test`'s two pytest-xdist workers (`--dist loadgroup`):
    the real-Kafka tests run in order on one worker's session clusters (they share brokers,
    quota sensors and the lock marker), the Spark tests in order on one worker's Spark session,
    and the rest (pure logic and the emulator) fill in. First of the collection hooks: `-m`
    deselection and xdist's group ids read these marks after it (as a last hook, the groups were
    never seen, and both workers started their own clusters and Spark sessions)."""
    mark_spark_tests(items)
    mark_kafka_tests(items)
    for item in items:
        if item.get_closest_marker("kafka") is not None:
            item.add_marker(pytest.mark.xdist_group("kafka"))
        elif item.get_closest_marker("spark") is not None:
            item.add_marker(pytest.mark.xdist_group("spark"))
