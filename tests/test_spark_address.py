"""Spark addresses checked before a driver starts (`simulate.spark_address`), without a JVM."""
from __future__ import annotations

import pytest

from kreassign.simulate.local_cluster import free_port
from kreassign.simulate.errors import SparkUnavailable
from kreassign.simulate.spark_address import (
    connect_endpoint,
    master_endpoints,
    probe_connect,
    probe_master,
    start_failure,
    tcp_refusal,
)


@pytest.mark.parametrize(("master", "endpoints"), [
    ("spark://127.0.0.1:7077", [("127.0.0.1", 7077)]),
    ("spark://a:7077,b:7078", [("a", 7077), ("b", 7078)]),
    ("spark://master", [("master", 7077)]),
    ("spark://[::1]:7077", [("::1", 7077)]),
])
def test_master_endpoints(master: str, endpoints: list[tuple[str, int]]) -> None:
    assert master_endpoints(master) == endpoints


@pytest.mark.parametrize("master", ["spark://:7077", "spark://h:port", "spark://h:0"])
def test_malformed_masters(master: str) -> None:
    with pytest.raises(SparkUnavailable, match="is not a Spark master URL"):
        master_endpoints(master)


@pytest.mark.parametrize(("url", "endpoint"), [
    ("sc://127.0.0.1:15003", ("127.0.0.1", 15003)),
    ("sc://connect", ("connect", 15002)),
    ("sc://connect:443/;use_ssl=true;token=x", ("connect", 443)),
])
def test_connect_endpoint(url: str, endpoint: tuple[str, int]) -> None:
    assert connect_endpoint(url) == endpoint


@pytest.mark.parametrize("url", ["http://h:15002", "sc://", "sc://h:port", "sc://h:15002/path"])
def test_malformed_connect_urls(url: str) -> None:
    with pytest.raises(SparkUnavailable, match="is not a Spark Connect URL"):
        connect_endpoint(url)


def test_nothing_at_a_master_fails_in_one_line_naming_it() -> None:
    port = free_port()
    assert tcp_refusal("127.0.0.1", port) == "connection refused"
    with pytest.raises(SparkUnavailable) as info:
        probe_master(f"spark://127.0.0.1:{port}")
    assert str(info.value) == (f"no Spark master answers at spark://127.0.0.1:{port} (connection refused): check "
                               "the address with `kreassign spark status`, or start one with `kreassign spark start`")


def test_a_master_with_one_live_host_of_two_passes(silent_port: int) -> None:
    probe_master(f"spark://127.0.0.1:{free_port()},127.0.0.1:{silent_port}")


def test_nothing_at_a_connect_address_fails_in_one_line_naming_it() -> None:
    port = free_port()
    with pytest.raises(SparkUnavailable) as info:
        probe_connect(f"sc://127.0.0.1:{port}")
    assert str(info.value) == (
        f"no Spark Connect server answers at sc://127.0.0.1:{port} (connection refused): check the address with "
        "`kreassign spark status`, or start one with `kreassign spark start --connect`")


def test_a_connect_address_that_is_not_grpc_fails_after_the_handshake_timeout(silent_port: int) -> None:
    pytest.importorskip("grpc")
    with pytest.raises(SparkUnavailable) as info:
        probe_connect(f"sc://127.0.0.1:{silent_port}", timeout_s=0.5)
    assert str(info.value) == (f"sc://127.0.0.1:{silent_port} takes connections but is not a Spark Connect server "
                               "(no gRPC handshake within 0.5 s): check the address with `kreassign spark status`")


def test_a_start_failure_keeps_the_first_line_of_the_java_error() -> None:
    error = RuntimeError("\n  java.lang.IllegalStateException: Cannot call methods on a stopped SparkContext.\n"
                         "\tat org.apache.spark.SparkContext.assertNotStopped(SparkContext.scala:120)\n")
    assert str(start_failure("spark://m:7077", error)) == (
        "Spark did not start on spark://m:7077: java.lang.IllegalStateException: Cannot call methods on a stopped "
        "SparkContext: check the address with `kreassign spark status`")
