"""Pytest plugin: one SparkSession for the whole run, and the `spark` marker on every test using it.

Starting the JVM is the main cost of the Spark tests, so every test shares this session.
"""
from __future__ import annotations

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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that use the `spark` fixture are Spark tests, whether or not they say so."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
