"""The network side: one asyncio listener per broker on 127.0.0.1, all in one background thread.

Each connection is served strictly in order (read, answer, write), as Kafka's muted channels
do, so pipelined requests get their responses in request order. Engine access goes through
one lock shared with the test thread (`SandboxCluster.advance`). With TLS the listeners wrap
connections in the server context; with SASL each connection runs a `SaslSession` first and its
principal goes into the handlers' `Context` after the ACL check (`acl.refusal`).
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kreassign.sandbox.acl import refusal, report_operations
from kreassign.sandbox.clock import Clock
from kreassign.sandbox.engine import Engine
from kreassign.sandbox.faults import Faults
from kreassign.sandbox.context import Context
from kreassign.sandbox.handlers import dispatch, overwrite_errors
from kreassign.sandbox.sasl import SaslSession, not_sasl_listener
from kreassign.sandbox.security import Security
from kreassign.sandbox.wire import (
    API_VERSIONS, SASL_AUTHENTICATE, SASL_HANDSHAKE, decode_request, encode_response, peek,
    unsupported_api_versions,
)

log = logging.getLogger(__name__)
MAX_FRAME = 100 * 1024 * 1024
TICK_WALL_SECONDS = 0.05
MAX_STEPS_PER_TICK = 2000
CLOSE_WAIT_SECONDS = 2.0


@dataclass
class Listener:
    broker_id: int
    port: int
    server: asyncio.Server | None = None
    writers: set[asyncio.StreamWriter] = field(default_factory=set)


class SandboxServer:
    """Runs the listeners, the ticker and periodic saves on a private event loop thread."""

    def __init__(self, engine: Engine, lock: threading.RLock, *, clock: Clock, faults: Faults,
                 ranges: dict[int, tuple[int, int]], ports: dict[int, int], host: str = "127.0.0.1",
                 on_save: Callable[[], object] | None = None, save_every: float = 2.0,
                 security: Security | None = None) -> None:
        self.engine = engine
        self.lock = lock
        self.clock = clock
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

    async def release(self) -> None:
        assert self._release is not None
        self._release.set()
        self._release = asyncio.Event()

    async def _ticker(self) -> None:
        while True:
            await asyncio.sleep(TICK_WALL_SECONDS)
            target = self.clock.now()
            with self.lock:
                limit = self.engine.now + MAX_STEPS_PER_TICK * self.engine.tick
                self.engine.run_until(min(target, limit))

    async def _saver(self) -> None:
        assert self.on_save is not None
        while True:
            await asyncio.sleep(self.save_every)
            self.on_save()

    # ---- connections --------------------------------------------------------------------------
    async def _serve(self, broker_id: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        lst = self.listeners[broker_id]
        lst.writers.add(writer)
        session = SaslSession(self.security) if self.security.sasl else None
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                if not 8 <= size <= MAX_FRAME:
                    break
                payload = await reader.readexactly(size)
                head = peek(payload)
                if self.faults.take("drop", head.api_key, broker_id):
                    break
                data = self._answer(broker_id, head, payload, session)
                if data is None:
                    break
                delay = self.faults.take("delay", head.api_key, broker_id)
                if delay is not None:
                    await self._hold(delay.seconds)
                writer.write(data)
                await writer.drain()
                if session is not None and session.closing:
                    await self._close_gently(reader, writer)
                    break
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            lst.writers.discard(writer)
            writer.transport.abort()

    @staticmethod
    async def _close_gently(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """After a refused login, give the client a moment to read the answer and hang up first:
        kafka-python drops data that arrives together with the end of the stream. Kafka likewise
        delays the close (connection.failed.authentication.delay.ms)."""
        async def until_eof() -> None:
            while await reader.read(65536):
                pass

        with contextlib.suppress(ConnectionError, ssl.SSLError, asyncio.TimeoutError):
            await asyncio.wait_for(until_eof(), timeout=CLOSE_WAIT_SECONDS)
        writer.close()

    async def _hold(self, seconds: float | None) -> None:
        assert self._release is not None
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._release.wait(), timeout=seconds)

    def _answer(self, broker_id: int, head: Any, payload: bytes, session: SaslSession | None) -> bytes | None:
        """The framed response, or None to close the connection as Kafka does on a bad request
        (and on any request but ApiVersions and the SASL ones before authentication)."""
        if session is not None and not session.admits(head.api_key):
            log.info("closing connection: API %s before SASL authentication completed", head.api_key)
            return None
        lo_hi = self.ranges.get(head.api_key)
        if lo_hi is None or not lo_hi[0] <= head.api_version <= lo_hi[1]:
            if head.api_key == API_VERSIONS:
                return unsupported_api_versions(head.correlation_id, self.ranges)
            log.info("closing connection: unsupported API %s v%s", head.api_key, head.api_version)
            return None
        try:
            request = decode_request(payload, head)
        except Exception:  # noqa: BLE001 - a malformed request closes the connection, like Kafka
            log.info("closing connection: cannot decode API %s v%s", head.api_key, head.api_version)
            return None
        if head.api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
            return encode_response(self._sasl(session, head, request), head.correlation_id)
        principal = session.principal if session is not None else None
        ctx = Context(self.engine, broker_id, self.ports, self.ranges, self.host, principal)
        response = refusal(principal, head.api_key, head.api_version, request)
        if response is None:
            with self.lock:
                response = dispatch(ctx, head.api_key, head.api_version, request)
        report_operations(principal, head.api_key, head.api_version, request, response)
        rule = self.faults.take("error", head.api_key, broker_id)
        if rule is not None:
            overwrite_errors(response, rule.code, rule.message, per_item=rule.per_item)
        return encode_response(response, head.correlation_id)

    @staticmethod
    def _sasl(session: SaslSession | None, head: Any, request: Any) -> Any:
        if session is None:
            return not_sasl_listener(head.api_key, head.api_version)
        if head.api_key == SASL_HANDSHAKE:
            return session.handshake(head.api_version, request)
        return session.authenticate(head.api_version, request)
