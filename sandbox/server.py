"""The network side: one asyncio listener per broker on 127.0.0.1, all in one background thread.

Each connection is served strictly in order (read, answer, write), as Kafka's muted channels
do, so pipelined requests get their responses in request order. Engine access goes through
one lock shared with the test thread (`SandboxCluster.advance`).
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kreassign.sandbox.clock import Clock
from kreassign.sandbox.engine import Engine
from kreassign.sandbox.faults import Faults
from kreassign.sandbox.context import Context
from kreassign.sandbox.handlers import dispatch, overwrite_errors
from kreassign.sandbox.wire import API_VERSIONS, decode_request, encode_response, peek, unsupported_api_versions

log = logging.getLogger(__name__)
MAX_FRAME = 100 * 1024 * 1024
TICK_WALL_SECONDS = 0.05
SLICE_WALL_SECONDS = 0.02


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
                 on_save: Callable[[], object] | None = None, save_every: float = 2.0) -> None:
        self.engine = engine
        self.lock = lock
        self.clock = clock
        self.faults = faults
        self.ranges = ranges
        self.host = host
        self.listeners = {b: Listener(b, port) for b, port in ports.items()}
        self.on_save = on_save
        self.save_every = save_every
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
            lambda r, w: self._serve(broker_id, r, w), self.host, lst.port, reuse_address=True)
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
        """Run the engine up to the clock, one engine tick at a time, in slices of at most
        SLICE_WALL_SECONDS of work, each followed by as long again for the connections: a heavy
        load (100,000 moves) makes sandbox time lag the clock rather than stop the brokers
        answering."""
        while True:
            await asyncio.sleep(TICK_WALL_SECONDS)
            target = self.clock.now()
            while True:
                start = time.perf_counter()
                with self.lock:
                    while self.engine.now < target - 1e-9 and time.perf_counter() - start < SLICE_WALL_SECONDS:
                        self.engine.run_until(min(target, self.engine.now + self.engine.tick))
                    behind = self.engine.now < target - 1e-9
                if not behind:
                    break
                await asyncio.sleep(time.perf_counter() - start)

    async def _saver(self) -> None:
        assert self.on_save is not None
        while True:
            await asyncio.sleep(self.save_every)
            self.on_save()

    # ---- connections --------------------------------------------------------------------------
    async def _serve(self, broker_id: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        lst = self.listeners[broker_id]
        lst.writers.add(writer)
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                if not 8 <= size <= MAX_FRAME:
                    break
                payload = await reader.readexactly(size)
                head = peek(payload)
                if self.faults.take("drop", head.api_key, broker_id):
                    break
                data = self._answer(broker_id, head, payload)
                if data is None:
                    break
                delay = self.faults.take("delay", head.api_key, broker_id)
                if delay is not None:
                    await self._hold(delay.seconds)
                writer.write(data)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            lst.writers.discard(writer)
            writer.transport.abort()

    async def _hold(self, seconds: float | None) -> None:
        assert self._release is not None
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._release.wait(), timeout=seconds)

    def _answer(self, broker_id: int, head: Any, payload: bytes) -> bytes | None:
        """The framed response, or None to close the connection as Kafka does on a bad request."""
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
        ctx = Context(self.engine, broker_id, self.ports, self.ranges, self.host)
        with self.lock:
            response = dispatch(ctx, head.api_key, head.api_version, request)
        rule = self.faults.take("error", head.api_key, broker_id)
        if rule is not None:
            overwrite_errors(response, rule.code, rule.message, per_item=rule.per_item)
        return encode_response(response, head.correlation_id)
