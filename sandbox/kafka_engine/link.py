"""A replication network for a local Kafka cluster: each broker's link, at a given capacity.

On one machine brokers replicate over loopback, which carries gigabytes a second, so a copy is
never held by the network as it is on an operator's cluster, and an acks=all produce never waits
behind catch-up data on a busy link (what `canary` measures and `simulate` predicts). With a link,
every broker advertises its inter-broker listener at a port of this process, which forwards to the
broker's real listener and lets the bytes a leader sends its followers (fetch responses) through
no faster than `rate_bps` out of that leader and `rate_bps` into each follower, one queue per
direction and broker, as a host's network interface does. Requests (small) pass at once, and clients
reach the brokers directly: only replication crosses the links.

The follower a connection serves is read from the first request's client id: Kafka's replica
fetchers call themselves `broker-<id>-fetcher-<n>` (ReplicaFetcherManager); any other connection
(an admin or a producer on the inter-broker listener) is held by the leader's link alone.
"""
from __future__ import annotations

import asyncio
import contextlib
import re
import struct
import threading
import time
from collections.abc import Mapping

from kreassign.sandbox.kafka_engine.node_config import LOOPBACK

CHUNK = 16 * 1024
"""bytes forwarded at a time: links interleave connections at this grain, as packets do"""
LATE_S = 0.02
"""how late the forwarding may wake without the link losing the time (see `reserve`)"""
FETCHER_CLIENT_ID = re.compile(rb"^broker-(\d+)-fetcher-\d+$")
_HEADER = struct.Struct(">ihhih")
"""request size, api key, api version, correlation id, client id length (request header v1+)"""


class Wire:
    """One direction of one broker's link: bytes leave in order, `rate_bps` of them a second."""

    def __init__(self, rate_bps: float) -> None:
        self.rate_bps = rate_bps
        self.free_at = 0.0
        self.bytes = 0


def reserve(wires: list[Wire], nbytes: int, now: float) -> float:
    """The time `nbytes` crossing all of `wires` (the leader's way out, the follower's way in)
    have left the last of them: they start when every wire is free, and hold each until then.

    A wire that came free less than LATE_S ago counts as busy until then: the forwarding thread
    wakes late (the OS, other processes), and bytes it could not send on time go at once, so a
    busy link keeps its rate; an idle one banks nothing."""
    start = max(w.free_at if now - w.free_at <= LATE_S else now for w in wires)
    done = start + nbytes / min(w.rate_bps for w in wires)
    for w in wires:
        w.free_at = done
        w.bytes += nbytes
    return done


def fetcher_of(request_start: bytes) -> int | None:
    """The broker whose replica fetcher sent a request (the first bytes of a connection), or None
    when the client id is not a fetcher's or the bytes end before it."""
    if len(request_start) < _HEADER.size:
        return None
    _, _, _, _, length = _HEADER.unpack_from(request_start)
    client_id = request_start[_HEADER.size:_HEADER.size + max(length, 0)]
    if length < 0 or len(client_id) < length:
        return None
    match = FETCHER_CLIENT_ID.match(client_id)
    return int(match.group(1)) if match else None


class ReplicationLinks:
    """The links of a cluster's brokers, served by one thread.

    Args:
        upstream: broker id -> the port of its inter-broker listener.
        ports: broker id -> the port its link listens on (what the broker advertises).
        rate_bps: each broker's capacity, each direction.
    """

    def __init__(self, upstream: Mapping[int, int], ports: Mapping[int, int], rate_bps: float) -> None:
        if rate_bps <= 0:
            raise ValueError("a link's capacity must be positive")
        self.upstream = dict(upstream)
        self.ports = dict(ports)
        self.rate_bps = rate_bps
        self.out = {b: Wire(rate_bps) for b in self.upstream}
        """each broker's way out: what it sends as a leader"""
        self.into = {b: Wire(rate_bps) for b in self.upstream}
        """each broker's way in: what it receives as a follower"""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._servers: list[asyncio.AbstractServer] = []

    def start(self) -> ReplicationLinks:
        """Listen on every link port (raises OSError at once if one is taken)."""
        ready = threading.Event()
        failed: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self._loop = loop
            try:
                for broker, port in self.ports.items():
                    self._servers.append(loop.run_until_complete(asyncio.start_server(
                        lambda r, w, b=broker: self._serve(b, r, w), LOOPBACK, port)))
            except BaseException as exc:  # reported to start()'s caller
                failed.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()
            for server in self._servers:
                server.close()
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()

        self._thread = threading.Thread(target=run, name="kreassign-replication-links", daemon=True)
        self._thread.start()
        ready.wait()
        if failed:
            raise failed[0]
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        self._thread = None

    def sent(self) -> dict[int, int]:
        """Bytes each broker has sent over its link as a leader."""
        return {b: w.bytes for b, w in self.out.items()}

    def received(self) -> dict[int, int]:
        """Bytes each broker has received over its link as a follower."""
        return {b: w.bytes for b, w in self.into.items()}

    async def _serve(self, leader: int, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection(LOOPBACK, self.upstream[leader])
        except OSError:  # the broker is down: the follower sees a refused connection, as without a link
            client_w.close()
            return
        # the follower this connection serves, once its first request named it
        follower: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()
        tasks = [asyncio.ensure_future(self._requests(client_r, up_w, follower)),
                 asyncio.ensure_future(self._responses(leader, up_r, client_w, follower))]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            # either side going away ends the connection: its error is no one's to report
            await asyncio.gather(*tasks, return_exceptions=True)
            for writer in (client_w, up_w):
                with contextlib.suppress(Exception):
                    writer.close()

    @staticmethod
    async def _requests(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                        follower: asyncio.Future[int | None]) -> None:
        start = b""
        while data := await reader.read(CHUNK):
            if not follower.done():
                start += data
                size = struct.unpack_from(">i", start)[0] if len(start) >= 4 else None
                if size is not None and len(start) >= min(4 + size, _HEADER.size + 255):
                    follower.set_result(fetcher_of(start))
            writer.write(data)
            await writer.drain()

    async def _responses(self, leader: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                         follower: asyncio.Future[int | None]) -> None:
        fetcher = await follower  # nothing comes back before the first request
        wires = [self.out[leader]] + ([self.into[fetcher]] if fetcher in self.into else [])
        while data := await reader.read(CHUNK):
            done = reserve(wires, len(data), time.monotonic())
            wait = done - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
