"""Pytest fixtures for the sandbox cluster (loaded from tests/conftest.py via `pytest_plugins`).

* `sandbox`: a started 6-broker, 3-rack sandbox with the demo topics and a manual clock;
  time moves only through `sandbox.advance(seconds)`.
* `sandbox_factory(**kwargs)`: start more (or differently shaped) sandboxes; all stop at teardown.
* `sandbox_admin`: a kafka-python `KafkaAdminClient` bootstrapped from `sandbox`.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

with warnings.catch_warnings():
    # kafka-python 3.0.12 calls importlib.resources.read_text at import time; the suite turns
    # warnings into errors, so import it once here, quietly.
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka  # noqa: F401

from kreassign.sandbox.clock import ManualClock
from kreassign.sandbox.cluster import SandboxCluster


@pytest.fixture
def sandbox_factory() -> Iterator[Callable[..., SandboxCluster]]:
    started: list[SandboxCluster] = []

    def make(**kwargs: Any) -> SandboxCluster:
        kwargs.setdefault("clock", ManualClock())
        kwargs.setdefault("seed", 7)
        cluster = SandboxCluster(**kwargs).start()
        started.append(cluster)
        return cluster

    yield make
    for cluster in started:
        cluster.stop()


@pytest.fixture
def sandbox(sandbox_factory: Callable[..., SandboxCluster]) -> SandboxCluster:
    return sandbox_factory()


@pytest.fixture
def sandbox_admin(sandbox: SandboxCluster) -> Iterator[Any]:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=sandbox.bootstrap, request_timeout_ms=5000,
                             client_id="kreassign-tests")
    yield admin
    admin.close()
