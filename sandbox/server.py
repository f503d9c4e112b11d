"""The network side: one asyncio listener per broker on 127.0.0.1, all in one background thread.

Each connection is served strictly in order (read, answer, write), as Kafka's muted channels
do, so pipelined requests get their responses in request order. A request parked in a
purgatory (acks=all produce, fetch waiting for min_bytes) holds its connection until it
completes, and a response carrying a quota throttle keeps the connection muted for that long
(KIP-219). Engine access goes through one lock shared with the test thread
(`SandboxCluster.advance`). With TLS the listeners wrap connections in the server context;
with SASL each connection runs a `SaslSession` first and its principal goes into the handlers'
`Context` after the ACL check (`acl.refusal`).
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kreassign.sandbox.acl import refusal, report_operations
from kreassign.sandbox.client_quota_hook import ClientQuotaHook, NoClientQuotas
from kreassign.sandbox.client_quotas import QuotaConfigs
from kreassign.sandbox.clock import Clock, ClockKeeper, ScaledClock
from kreassign.sandbox.context import Context
from kreassign.sandbox.dataplane import DataPlane
from kreassign.sandbox.engine import Engine
from kreassign.sandbox.faults import Faults
from kreassign.sandbox.groups import GroupCoordinator
from kreassign.sandbox.handlers import dispatch, overwrite_errors
from kreassign.sandbox.handlers_data import NoResponse, replica_id
from kreassign.sandbox.purgatory import Delayed, Purgatory
from kreassign.sandbox.sasl import SaslSession, not_sasl_listener
from kreassign.sandbox.security import Security
from kreassign.sandbox.telemetry import TelemetryReceiver
from kreassign.sandbox.timings import RequestTiming, RequestTimings
from kreassign.sandbox.wire import (
    APIS, API_VERSIONS, SASL_AUTHENTICATE, SASL_HANDSHAKE, decode_request, encode_response, peek,
    unsupported_api_versions,
)

log = logging.getLogger(__name__)
MAX_FRAME = 100 * 1024 * 1024
TICK_WALL_SECONDS = 0.05
SLICE_WALL_SECONDS = 0.02
FAILED_AUTHENTICATION_DELAY_S = 0.1
"""a refused login's connection is closed this long after the answer, as Kafka's
connection.failed.authentication.delay.ms (default 100) does; a client that reads later than
that sees the answer and the end of the stream together (kafka-python then drops the answer)"""


@dataclass
class Listener:
    broker_id: int
    port: int
    server: asyncio.Server | None = None
    writers: set[asyncio.StreamWriter] = field(default_factory=set)


CLOSE = object()
POKING_APIS = frozenset({0, 11, 13, 14, 20})  # Produce, JoinGroup, LeaveGroup, SyncGroup, DeleteTopics
SAVING_APIS = frozenset({19, 20})  # CreateTopics, DeleteTopics: saved before answered, as KRaft commits them
TRUNCATING_APIS = frozenset({43, 45})  # unclean ElectLeaders, a cancel needing an unclean election


@dataclass
class Parked:
    """A request waiting in the purgatory; `future` gets its response and its remote time."""

    op: Delayed
    future: asyncio.Future[Any]
    broker_id: int


class SandboxServer:
    """Runs the listeners, the ticker and periodic saves on a private event loop thread."""

    def __init__(self, engine: Engine, lock: threading.RLock, *, clock: Clock, faults: Faults,
                 ranges: dict[int, tuple[int, int]], ports: dict[int, int], host: str = "127.0.0.1",
                 on_save: Callable[[], object] | None = None, save_every: float = 2.0,
                 data: DataPlane | None = None, quotas: ClientQuotaHook | None = None,
                 broker_quotas: Callable[[int], ClientQuotaHook] | None = None,
                 groups: GroupCoordinator | None = None, quota_configs: QuotaConfigs | None = None,
                 telemetry: TelemetryReceiver | None = None,
                 security: Security | None = None) -> None:
        self.engine = engine
        self.telemetry = telemetry
        self.broker_quotas = broker_quotas  # each broker's own quota manager, as Kafka's quotas are per broker
        self.groups = groups
        self.quota_configs = quota_configs
        self.data = data
        self.quotas: ClientQuotaHook = quotas if quotas is not None else NoClientQuotas()
        self.purgatory = Purgatory()
        self.parked: dict[int, Parked] = {}
        self.timings = RequestTimings()
        self._wake_handle: asyncio.TimerHandle | None = None
        self._wake_at: float | None = None
        self.lock = lock
        self.clock = clock
        self.keeper = ClockKeeper(clock) if isinstance(clock, ScaledClock) else None
        """holds a scaled clock to the engine's work and measures the lag (`sandbox status`)"""
        self.faults = faults
        self.ranges = ranges
        self.host = host
        self.listeners = {b: Listener(b, port) for b, port in ports.items()}
        self.on_save = on_save
        self.save_every = save_every
        self.security = security or Security()
        self._ssl = self.security.server_context()
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._release: asyncio.Event | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._stopped: asyncio.Event | None = None

    # ---- lifecycle (called from other threads) -------------------------------------------
    def start(self) -> None:
        ready: threading.Event = threading.Event()
        failure: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, args=(ready, failure), name="kreassign-sandbox",
                                        daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            self._thread.join()
            raise failure[0]

    def stop(self) -> None:
        if self.loop is None or self._thread is None:
            return
        with contextlib.suppress(RuntimeError):
            asyncio.run_coroutine_threadsafe(self._shutdown(), self.loop).result(timeout=10)
        self._thread.join(timeout=10)
        self.loop = None

    def call(self, coro: Any) -> Any:
        assert self.loop is not None, "the sandbox is not running"
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=10)

    @property
    def ports(self) -> dict[int, int]:
        return {b: lst.port for b, lst in self.listeners.items()}

    def notify(self) -> None:
        """Sandbox time moved (or state changed) from another thread: re-check parked requests."""
        if self.loop is not None:
            with contextlib.suppress(RuntimeError):
                self.loop.call_soon_threadsafe(self.poke)

    # ---- loop thread ------------------------------------------------------------------------
    def _run(self, ready: threading.Event, failure: list[BaseException]) -> None:
        loop = asyncio.new_event_loop()
        self.loop = loop
        try:
            loop.run_until_complete(self._startup())
        except BaseException as exc:  # noqa: BLE001 - handed to the starting thread
            failure.append(exc)
            ready.set()
            loop.run_until_complete(self._close_all())
            loop.close()
            self.loop = None
            return
        ready.set()
        try:
            loop.run_until_complete(self._wait_stopped())
        finally:
            # A connection accepted while the listeners closed (a TLS handshake finishing late)
            # still has its serving task: end it while the loop can still run its cleanup.
            leftover = asyncio.all_tasks(loop)
            for task in leftover:
                task.cancel()
            if leftover:
                loop.run_until_complete(asyncio.gather(*leftover, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _startup(self) -> None:
        self._release = asyncio.Event()
        self._stopped = asyncio.Event()
        for b in self.listeners:
            if self.engine.brokers[b].alive:
                await self.open_listener(b)
        if self.clock.ticking:
            self._tasks.append(asyncio.create_task(self._ticker()))
            self._tasks.append(asyncio.create_task(self._data_ticker()))
        if self.on_save is not None:
            self._tasks.append(asyncio.create_task(self._saver()))

    async def _wait_stopped(self) -> None:
        assert self._stopped is not None
        await self._stopped.wait()

    async def _shutdown(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._close_all()
        await asyncio.sleep(0)  # let cancelled connections unwind
        assert self._stopped is not None
        self._stopped.set()

    async def _close_all(self) -> None:
        for b in list(self.listeners):
            await self.close_listener(b)

    async def open_listener(self, broker_id: int) -> None:
        lst = self.listeners[broker_id]
        if lst.server is not None:
            return
        server = await asyncio.start_server(
            lambda r, w: self._serve(broker_id, r, w), self.host, lst.port, reuse_address=True, ssl=self._ssl)
        lst.server = server
        lst.port = server.sockets[0].getsockname()[1]

    async def close_listener(self, broker_id: int) -> None:
        lst = self.listeners[broker_id]
        if lst.server is not None:
            lst.server.close()
            await self.drop_connections(broker_id)
            await lst.server.wait_closed()
            lst.server = None

    async def drop_connections(self, broker_id: int | None = None) -> None:
        for b, lst in self.listeners.items():
            if broker_id in (None, b):
                for w in list(lst.writers):
                    w.transport.abort()
                lst.writers.clear()
        for key, parked in list(self.parked.items()):
            if broker_id in (None, parked.broker_id):
                with self.lock:
                    self.purgatory.cancel(parked.op)
                del self.parked[key]
                if not parked.future.done():
                    parked.future.set_exception(ConnectionResetError("connection closed"))

    async def release(self) -> None:
        assert self._release is not None
        self._release.set()
        self._release = asyncio.Event()

    async def _ticker(self) -> None:
        """Run the engine up to the clock in slices of at most SLICE_WALL_SECONDS of work, each
        followed by as long again for the connections (`keep_up`)."""
        while True:
            await asyncio.sleep(TICK_WALL_SECONDS)
            while True:
                start = time.perf_counter()
                if not self.keep_up():
                    break
                await asyncio.sleep(time.perf_counter() - start)

    def keep_up(self, budget_s: float = SLICE_WALL_SECONDS, work: Callable[[], float] = time.perf_counter) -> bool:
        """One slice of the ticker: run the engine toward the clock, one engine tick at a time,
        for at most `budget_s` of `work` time. Where the engine falls short, a scaled clock is
        held back to the time it reached (`ClockKeeper`): a heavy load (100,000 moves, a busy
        machine) slows sandbox time to the work done rather than letting it run on without the
        work, or stopping the brokers answering; one that keeps too little of its speed slows
        down, and the brokers report the speed it runs at. True if the slice ran out before the
        clock."""
        start = work()
        with self.lock:
            target = self.clock.now()
            while self.engine.now < target - 1e-9 and work() - start < budget_s:
                self.engine.run_until(min(target, self.engine.now + self.engine.tick))
            behind = self.engine.now < target - 1e-9
            if self.keeper is not None:
                self.keeper.beat(self.engine.now, behind)
                self.engine.time_scale = self.keeper.clock.speed
        return behind

    async def _data_ticker(self) -> None:
        """Beside the engine's ticker: log-dir copies follow sandbox time, and parked requests are
        looked at again (ISR changes and replica progress happen in engine ticks)."""
        while True:
            await asyncio.sleep(TICK_WALL_SECONDS)
            if self.data is not None:
                with self.lock:
                    self.data.tick(self.engine.now)
            self.poke()

    async def _saver(self) -> None:
        assert self.on_save is not None
        while True:
            await asyncio.sleep(self.save_every)
            self.on_save()

    # ---- purgatory --------------------------------------------------------------------------
    def poke(self) -> None:
        """Complete the parked requests that are ready or expired; arm the next wake-up."""
        if not self.parked:
            return
        with self.lock:
            now = self.clock.now()
            done = self.purgatory.poke(now)
            wake = self.purgatory.next_wake(now)
        for op, response in done:
            parked = self.parked.pop(id(op), None)
            if parked is None or parked.future.done():
                continue
            if isinstance(response, Exception):
                log.error("closing connection: a parked request failed", exc_info=response)
                parked.future.set_exception(ConnectionAbortedError("the request failed"))
            else:
                parked.future.set_result((response, (now - op.parked_at) * 1000.0))
        self._arm(wake, now)

    def _arm(self, wake: float | None, now: float) -> None:
        """Call `poke` again when sandbox time reaches `wake` (scaled clocks only: a manual clock
        moves through `advance`, which notifies)."""
        if wake is None or not isinstance(self.clock, ScaledClock) or self.loop is None:
            return
        if self._wake_handle is not None and self._wake_at is not None and self._wake_at <= wake:
            return
        if self._wake_handle is not None:
            self._wake_handle.cancel()
        self._wake_at = wake
        self._wake_handle = self.loop.call_later(max(wake - now, 0.0) / self.clock.speed, self._woken)

    def _woken(self) -> None:
        self._wake_handle = None
        self._wake_at = None
        self.poke()

    async def _mute(self, broker_id: int, throttle_ms: int) -> None:
        """Keep the connection muted for a quota throttle, measured on the sandbox clock."""
        with self.lock:
            start = self.clock.now()
        end = start + throttle_ms / 1000.0
        op = Delayed(start, end, lambda now: now >= end, lambda now, expired: None, lambda now: end)
        await self._park(op, broker_id)

    async def _park(self, op: Delayed, broker_id: int) -> tuple[Any, float]:
        assert self.loop is not None
        future: asyncio.Future[Any] = self.loop.create_future()
        with self.lock:
            self.purgatory.park(op)
            now = self.clock.now()
            wake = self.purgatory.next_wake(now)
        self.parked[id(op)] = Parked(op, future, broker_id)
        self._arm(wake, now)
        try:
            result: tuple[Any, float] = await future
        except asyncio.CancelledError:
            with self.lock:
                self.purgatory.cancel(op)
            self.parked.pop(id(op), None)
            raise
        return result

    # ---- connections --------------------------------------------------------------------------
    async def _serve(self, broker_id: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        lst = self.listeners[broker_id]
        lst.writers.add(writer)
        session = SaslSession(self.security) if self.security.sasl else None
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                bare = session is not None and session.bare_tokens  # a SASL token: no request header
                if not (0 if bare else 8) <= size <= MAX_FRAME:
                    log.info("closing connection: frame of %d bytes", size)
                    break
                payload = await reader.readexactly(size)
                if bare:
                    assert session is not None
                    answer = session.bare_token(payload)
                    if answer is None:
                        break
                    writer.write(struct.pack(">i", len(answer)) + answer)
                    await writer.drain()
                    continue
                received = time.perf_counter()
                head = peek(payload)
                if self.faults.take("drop", head.api_key, broker_id):
                    break
                data, throttle_ms = await self._respond(broker_id, head, payload, received, session)
                if data is CLOSE:
                    break
                if data is None:  # acks=0: nothing to send, but a throttle still mutes
                    if throttle_ms > 0:
                        await self._mute(broker_id, throttle_ms)
                    continue
                delay = self.faults.take("delay", head.api_key, broker_id)
                if delay is not None:
                    await self._hold(delay.seconds)
                writer.write(data)
                await writer.drain()
                if session is not None and session.closing:
                    await self._close_after_refusal(reader, writer)
                    break
                if throttle_ms > 0:
                    await self._mute(broker_id, throttle_ms)
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            lst.writers.discard(writer)
            writer.transport.abort()

    @staticmethod
    async def _close_after_refusal(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Close FAILED_AUTHENTICATION_DELAY_S after a refused login (sooner if the client hangs
        up first), with the end of the stream after the answer, not a reset."""
        async def until_eof() -> None:
            while await reader.read(65536):
                pass

        with contextlib.suppress(ConnectionError, ssl.SSLError, asyncio.TimeoutError):
            await asyncio.wait_for(until_eof(), timeout=FAILED_AUTHENTICATION_DELAY_S)
        writer.close()

    async def _respond(self, broker_id: int, head: Any, payload: bytes, received: float,
                       session: SaslSession | None) -> tuple[Any, int]:
        """(encoded response, CLOSE, or None for no answer; throttle ms), parking the request if it must wait."""
        started = time.perf_counter()
        outcome, client_id, name = self._answer(broker_id, head, payload, session)
        local_ms = (time.perf_counter() - started) * 1000.0
        remote_ms = 0.0
        if isinstance(outcome, _Encoded):
            return bytes(outcome), 0
        if isinstance(outcome, Delayed):
            response, remote_ms = await self._park(outcome, broker_id)
        else:
            response = outcome
        if response is CLOSE:
            return CLOSE, 0
        throttle = int(getattr(response, "throttle_time_ms", 0) or 0)
        with self.lock:  # the metrics endpoints read the timings under the lock
            self.timings.add(RequestTiming(name, head.api_version, client_id, broker_id, (started - received) * 1000.0,
                                           local_ms, remote_ms, float(throttle), self.clock.now()))
        if head.api_key in SAVING_APIS and self.on_save is not None:
            self.on_save()
        if head.api_key in POKING_APIS:
            # an append may complete parked fetches, a join or sync parked group requests, a
            # deletion every request parked on the topic's partitions
            self.poke()
        if isinstance(response, NoResponse):
            return None, throttle
        rule = self.faults.take("error", head.api_key, broker_id)
        if rule is not None:
            overwrite_errors(response, rule.code, rule.message, per_item=rule.per_item)
        return encode_response(response, head.correlation_id), throttle

    async def _hold(self, seconds: float | None) -> None:
        assert self._release is not None
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._release.wait(), timeout=seconds)

    def _answer(self, broker_id: int, head: Any, payload: bytes,
                session: SaslSession | None) -> tuple[Any, str, str]:
        """(response, Delayed, NoResponse or CLOSE; client id; request name); CLOSE closes the connection as
        Kafka does on a request it cannot parse or an API version it does not serve, and on any request
        but ApiVersions and the SASL ones before SASL authentication completed."""
        if session is not None and not session.admits(head.api_key):
            log.info("closing connection: API %s before SASL authentication completed", head.api_key)
            return CLOSE, "", ""
        lo_hi = self.ranges.get(head.api_key)
        if lo_hi is None or not lo_hi[0] <= head.api_version <= lo_hi[1]:
            if head.api_key == API_VERSIONS:
                return _Encoded(unsupported_api_versions(head.correlation_id, self.ranges)), "", "ApiVersions"
            log.info("closing connection: unsupported API %s v%s", head.api_key, head.api_version)
            return CLOSE, "", ""
        try:
            request = decode_request(payload, head)
        except Exception:  # noqa: BLE001 - a malformed request closes the connection, like Kafka
            log.info("closing connection: cannot decode API %s v%s", head.api_key, head.api_version)
            return CLOSE, "", ""
        client_id = request.header.client_id or ""
        name = request_name(head.api_key, request)
        if head.api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
            return _Encoded(encode_response(self._sasl(session, head, request), head.correlation_id)), client_id, name
        principal = session.principal if session is not None else None
        refused = refusal(principal, head.api_key, head.api_version, request)
        if refused is not None:
            return refused, client_id, name
        with self.lock:
            quotas = self.broker_quotas(broker_id) if self.broker_quotas is not None else self.quotas
            ctx = Context(self.engine, broker_id, self.ports, self.ranges, self.host, data=self.data,
                          now=self.clock.now(), client_id=client_id, quotas=quotas, groups=self.groups,
                          quota_configs=self.quota_configs, telemetry=self.telemetry,
                          principal=principal)
            try:
                outcome = dispatch(ctx, head.api_key, head.api_version, request)
                report_operations(principal, head.api_key, head.api_version, request, outcome)
                if self.data is not None and head.api_key in TRUNCATING_APIS:
                    self.data.follow_truncations()
                return outcome, client_id, name
            except Exception:  # noqa: BLE001 - a request the handlers cannot serve must not stop the broker
                log.exception("closing connection: failed to handle API %s v%s", head.api_key, head.api_version)
                return CLOSE, client_id, name

    @staticmethod
    def _sasl(session: SaslSession | None, head: Any, request: Any) -> Any:
        if session is None:
            return not_sasl_listener(head.api_key, head.api_version)
        if head.api_key == SASL_HANDSHAKE:
            return session.handshake(head.api_version, request)
        return session.authenticate(head.api_version, request)


def request_name(api_key: int, request: Any) -> str:
    """Kafka's request metric name: the API name, with Fetch split into FetchConsumer/FetchFollower."""
    if api_key == 1:
        return "FetchConsumer" if replica_id(request, request.API_VERSION) < 0 else "FetchFollower"
    return str(APIS[api_key][0].__name__.removesuffix("Request"))


class _Encoded(bytes):
    """An already framed response (the KIP-511 ApiVersions fallback)."""

