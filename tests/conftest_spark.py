"""Pytest plugin: one SparkSession for the whole run, the `spark` marker on every test using it,
and a port that is not Spark.

Starting the JVM is the main cost of the Spark tests, so every test shares this session.
"""
from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from kreassign.simulate.session import SparkOptions, start_session

    session = start_session(SparkOptions(master="local[2]", shuffle_partitions=2, driver_memory="1g"))
    yield session
    session.stop()


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port on 127.0.0.1 that takes connections and never says anything: not Spark, or a
    master that ignores the application."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield int(server.getsockname()[1])
    server.close()
    for conn in held:
        conn.close()


def mark_spark_tests(items: list[pytest.Item]) -> None:
    """Tests that use the `spark` fixture are Spark tests, whether or not they say so (called by
    tests/conftest.py's collection hook, before the marks are read)."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
