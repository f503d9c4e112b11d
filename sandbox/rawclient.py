"""A minimal raw client: send one request to one broker and decode the answer.

For tests that must reach a *specific* broker (routing, NOT_CONTROLLER, header versions) or
send bytes kafka-python would never send; kafka-python's admin client cannot do either.
"""
from __future__ import annotations

import socket
import struct
from typing import Any


def read_frame(sock: socket.socket) -> bytes:
    """One size-prefixed frame (without the size)."""
    def exactly(n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed by the sandbox")
            buf += chunk
        return buf

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def encode(request: Any, version: int, correlation_id: int) -> bytes:
    """A framed request with header, as a client would write it."""
    request.API_VERSION = version
    request.with_header(correlation_id=correlation_id, client_id="raw-test")
    return bytes(request.encode(header=True, framed=True))


def roundtrip(port: int, request: Any, version: int, correlation_id: int = 7, *, response: Any = None,
              timeout_s: float = 5.0) -> Any:
    """Send `request` at `version` to the broker on `port` and decode its response (of class
    `response`; default: the class the sandbox answers that API with)."""
    from kreassign.sandbox.wire import APIS

    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        sock.sendall(encode(request, version, correlation_id))
        payload = read_frame(sock)
    response_cls = response if response is not None else APIS[request.API_KEY][1]
    response = response_cls.decode(payload, version=version, header=True)
    assert response.header.correlation_id == correlation_id
    return response
