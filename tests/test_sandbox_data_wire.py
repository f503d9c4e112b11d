"""The data path over TCP: purgatories on the sandbox's manual clock, request timings, restarts,
and bad input (malformed batches, oversized frames, unknown versions) that must never stop a broker."""
from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from kreassign.sandbox import codes
from kreassign.sandbox.clock import ScaledClock
from kreassign.sandbox.cluster import SandboxCluster
from kreassign.sandbox.rawclient import encode, read_frame, roundtrip
from kreassign.sandbox.topics import TopicSpec
from tests.test_sandbox_data import fetch_req, produce_req
from tests.test_sandbox_log import batch, record_values

pytestmark = pytest.mark.e2e


@pytest.fixture
def quiet(sandbox_factory: Callable[..., SandboxCluster]) -> SandboxCluster:
    """Three brokers, one client topic `t` (partition 0 on [1, 2, 3]), manual clock."""
    return sandbox_factory(brokers=3, racks=0, topics=[TopicSpec("t", 1, 3, 0, 0.0)])


def leader_port(sb: SandboxCluster) -> int:
    with sb.locked() as eng:
        return sb.ports[eng.partition("t", 0).leader]


@pytest.fixture
def conn(quiet: SandboxCluster) -> Iterator[socket.socket]:
    with socket.create_connection(("127.0.0.1", leader_port(quiet)), timeout=5) as sock:
        yield sock


def send(sock: socket.socket, request: Any, version: int, corr: int = 1) -> None:
    sock.sendall(encode(request, version, corr))


def parked(sb: SandboxCluster, n: int) -> None:
    """Wait until the server has parked `n` requests (the socket hand-off is asynchronous)."""
    deadline = time.monotonic() + 5
    while len(sb.server.parked) < n:
        assert time.monotonic() < deadline, f"{len(sb.server.parked)} requests parked, expected {n}"
        time.sleep(0.002)


def still_parked(sb: SandboxCluster) -> int:
    """Parked requests once the server has handled every notification sent so far (its loop runs
    callbacks in order, so a coroutine submitted now runs after them)."""
    sb.server.call(asyncio.sleep(0))
    return len(sb.server.parked)


def receive(sock: socket.socket, response_cls: Any, version: int) -> Any:
    return response_cls.decode(read_frame(sock), version=version, header=True)


def test_parked_fetch_records_its_wait_as_remote_time(quiet: SandboxCluster, conn: socket.socket) -> None:
    send(conn, fetch_req(0, 0, wait_ms=500), 12)
    parked(quiet, 1)  # no answer while sandbox time stands still
    quiet.advance(0.499)
    assert still_parked(quiet) == 1
    quiet.advance(0.001)
    resp = receive(conn, FetchResponse, 12)
    assert resp.responses[0].partitions[0].records in (b"", None)
    (timing,) = quiet.timings.of("FetchConsumer")
    assert timing.remote_ms == pytest.approx(500.0)
    assert (timing.throttle_ms, timing.client_id) == (0.0, "raw-test")


def test_acks_all_completes_after_the_followers_round(quiet: SandboxCluster, conn: socket.socket) -> None:
    send(conn, produce_req(0, batch([b"a", b"b"])), 9)
    parked(quiet, 1)
    quiet.advance(0.01)   # the followers' fetch round, but not yet the batch's transfer before it
    assert still_parked(quiet) == 1
    quiet.advance(0.001)
    resp = receive(conn, ProduceResponse, 9)
    part = resp.responses[0].partition_responses[0]
    assert (part.error_code, part.base_offset) == (codes.NONE, 0)
    (timing,) = quiet.timings.of("Produce")
    assert timing.remote_ms == pytest.approx(11.0)
    # a parked fetch on another connection is woken by the high watermark, not by the append
    with socket.create_connection(("127.0.0.1", leader_port(quiet)), timeout=5) as other:
        send(other, fetch_req(0, 2, wait_ms=1000), 12)
        parked(quiet, 1)
        send(conn, produce_req(0, batch([b"c"])), 9, corr=2)
        parked(quiet, 2)
        quiet.advance(0.011)
        assert receive(conn, ProduceResponse, 9).responses[0].partition_responses[0].base_offset == 2
        fetched = receive(other, FetchResponse, 12).responses[0].partitions[0]
    assert [v for _, _, v in record_values(fetched.records)] == [b"c"]
    assert quiet.timings.of("FetchConsumer")[-1].remote_ms == pytest.approx(11.0)


def test_produce_and_fetch_with_topic_ids(quiet: SandboxCluster) -> None:
    with quiet.locked() as eng:
        topic_id = eng.topics["t"].topic_id
    T = ProduceRequest.TopicProduceData
    P = T.PartitionProduceData
    req = ProduceRequest(version=13, transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
        T(version=13, topic_id=topic_id, partition_data=[P(version=13, index=0, records=batch([b"id"]))])])
    part = roundtrip(leader_port(quiet), req, 13).responses[0]
    assert (part.topic_id, part.partition_responses[0].error_code) == (topic_id, codes.NONE)
    unknown = ProduceRequest(version=13, transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
        T(version=13, topic_id=topic_id.__class__(int=12345), partition_data=[P(version=13, index=0,
                                                                                records=batch([b"x"]))])])
    assert roundtrip(leader_port(quiet), unknown, 13).responses[0].partition_responses[0].error_code == \
        codes.UNKNOWN_TOPIC_ID


# ---- bad input ------------------------------------------------------------------------------------
def metadata_still_answers(sb: SandboxCluster, port: int) -> None:
    resp = roundtrip(port, MetadataRequest(topics=None, allow_auto_topic_creation=False), 12)
    assert {b.node_id for b in resp.brokers} == {1, 2, 3}


@pytest.mark.parametrize("records", [
    b"\x00" * 70,                              # a zero-length batch header
    b"garbage",                                # shorter than any batch
    b"",                                       # empty
])
def test_malformed_batches_get_kafkas_error_codes(quiet: SandboxCluster, records: bytes) -> None:
    part = roundtrip(leader_port(quiet), produce_req(0, records, acks=1), 9).responses[0].partition_responses[0]
    assert part.error_code in (codes.CORRUPT_MESSAGE, codes.INVALID_RECORD)
    assert part.base_offset == -1
    metadata_still_answers(quiet, leader_port(quiet))


def test_corrupted_crc_and_old_magic(quiet: SandboxCluster) -> None:
    bad_crc = bytearray(batch([b"hello"]))
    bad_crc[-1] ^= 0x55
    old = bytearray(batch([b"hello"]))
    old[16] = 1
    for records, code in ((bad_crc, codes.CORRUPT_MESSAGE), (old, codes.UNSUPPORTED_FOR_MESSAGE_FORMAT)):
        part = roundtrip(leader_port(quiet), produce_req(0, bytes(records), acks=1), 9).responses[0]
        assert part.partition_responses[0].error_code == code


def test_oversized_batch_is_message_too_large(quiet: SandboxCluster) -> None:
    part = roundtrip(leader_port(quiet), produce_req(0, batch([b"x" * 1_100_000]), acks=1), 9).responses[0]
    assert part.partition_responses[0].error_code == codes.MESSAGE_TOO_LARGE


@pytest.mark.parametrize("frame", [
    struct.pack(">i", 200 * 1024 * 1024),           # larger than socket.request.max.bytes
    struct.pack(">i", -5),                          # negative size
    struct.pack(">i", 12) + struct.pack(">hhi", 0, 99, 1) + b"\0\0\0\0",   # Produce v99
    struct.pack(">i", 10) + struct.pack(">hhi", 0, 9, 1) + b"\0\0",        # Produce v9, body missing
    struct.pack(">i", 12) + struct.pack(">hhi", 999, 0, 1) + b"\0\0\0\0",  # unknown API key
])
def test_bad_frames_close_the_connection_and_the_broker_lives_on(quiet: SandboxCluster, frame: bytes) -> None:
    port = leader_port(quiet)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(frame)
        assert sock.recv(100) == b""  # closed by the sandbox
    metadata_still_answers(quiet, port)


# ---- restarts -----------------------------------------------------------------------------------------
def produce_values(bootstrap: str, topic: str, count: int, partitions: int = 2) -> None:
    """`v0`, `v1`, ... with kafka-python (acks=all), round robin over the topic's partitions."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(count):
        producer.send(topic, value=f"v{i}".encode(), partition=i % partitions)
    producer.flush(10)
    producer.close()


def test_offsets_and_records_survive_a_state_dir_restart(tmp_path: Path) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    def start() -> SandboxCluster:
        return SandboxCluster(brokers=3, racks=0, topics=[TopicSpec("t", 2, 3, 0, 0.0)], clock=ScaledClock(1.0),
                              state_dir=tmp_path / "state").start()

    sb = start()
    try:
        produce_values(sb.bootstrap, "t", 50)
    finally:
        sb.stop()
    assert sorted(p.name for p in (tmp_path / "state" / "logs").iterdir()) == ["checkpoint.json", "t-0", "t-1"]
    sb = start()
    try:
        consumer = KafkaConsumer(bootstrap_servers=sb.bootstrap, enable_auto_commit=False,
                                 auto_offset_reset="earliest", consumer_timeout_ms=2000)
        tps = [KTP("t", 0), KTP("t", 1)]
        consumer.assign(tps)
        assert consumer.end_offsets(tps) == {tps[0]: 25, tps[1]: 25}
        values = sorted((m.partition, m.offset, m.value) for m in consumer)
        consumer.close()
        assert values == sorted((i % 2, i // 2, f"v{i}".encode()) for i in range(50))
        with sb.locked() as eng:
            p0 = eng.partition("t", 0)
            assert eng.log_end[p0.row] == sb.data.log(p0).byte_end > 25 * 3  # the bytes are the partition's size
    finally:
        sb.stop()


# ---- quota throttle: the response goes out at once, then the connection stays muted -------------------
def test_throttled_response_mutes_the_connection(sandbox_factory: Callable[..., SandboxCluster]) -> None:
    class Throttle:
        def produce_throttle_ms(self, client_id: str, user: str, nbytes: int, now: float) -> int:
            return 100 if nbytes > 0 else 0

        def fetch_throttle_ms(self, client_id: str, user: str, nbytes: int, now: float) -> int:
            return 0

    sb = sandbox_factory(brokers=1, racks=0, topics=[TopicSpec("t", 1, 1, 0, 0.0)], client_quotas=Throttle())
    with socket.create_connection(("127.0.0.1", sb.ports[1]), timeout=5) as sock:
        send(sock, produce_req(0, batch([b"a"]), acks=1), 9)
        first = receive(sock, ProduceResponse, 9)
        assert first.throttle_time_ms == 100
        parked(sb, 1)                       # muted: the next request waits
        send(sock, MetadataRequest(topics=None, allow_auto_topic_creation=False), 12, corr=2)
        sb.advance(0.1)
        assert read_frame(sock)[:4] == struct.pack(">i", 2)
    (timing,) = sb.timings.of("Produce")
    assert timing.throttle_ms == 100.0
    # acks=0 gets no answer, yet its throttle mutes the connection just the same
    with socket.create_connection(("127.0.0.1", sb.ports[1]), timeout=5) as sock:
        send(sock, produce_req(0, batch([b"b"]), acks=0), 9, corr=3)
        parked(sb, 1)
        send(sock, MetadataRequest(topics=None, allow_auto_topic_creation=False), 12, corr=4)
        assert still_parked(sb) == 1
        sb.advance(0.1)
        assert read_frame(sock)[:4] == struct.pack(">i", 4)
    assert [t.throttle_ms for t in sb.timings.of("Produce")] == [100.0, 100.0]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(api=st.sampled_from([0, 1, 2, 22, 23]), version=st.integers(0, 20), body=st.binary(max_size=300))
def test_random_data_requests_never_stop_the_broker(quiet: SandboxCluster, api: int, version: int,
                                                    body: bytes) -> None:
    header = struct.pack(">hhih", api, version, 9, 4) + b"fuzz"
    frame = header + body
    port = leader_port(quiet)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        sock.shutdown(socket.SHUT_WR)
        while sock.recv(65536):  # an answer or a close, then the close
            pass
    metadata_still_answers(quiet, port)
