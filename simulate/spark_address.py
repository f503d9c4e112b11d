"""Reaching the Spark a simulation runs on: a standalone master (`spark://`) or a Spark Connect
server (`sc://`), checked before any driver starts so an address with nothing behind it fails
in seconds with one line, not after Spark's own retries (a driver retries a master for 60 s, a
Connect client a server for more than 10 minutes).

The checks read sockets only; the driver's own start on a master that answers is watched by
`session.start_session` with `registration_deadline`.
"""
from __future__ import annotations

import socket
import urllib.parse

from kreassign.simulate.errors import SparkUnavailable

PROBE_TIMEOUT_S = 3.0
"""how long a TCP connect or Connect's gRPC handshake may take"""
REGISTRATION_TIMEOUT_S = 8.0
"""how long a standalone master may take to register the driver, once its JVM runs"""
EXECUTOR_TIMEOUT_S = 60.0
"""how long a standalone master may take to give the application its first executor (a
worker starts a JVM for it, which takes seconds on a busy machine)"""
CHECK = "check the address with `kreassign spark status`"
MASTER_PORT = 7077
CONNECT_PORT = 15002


def master_endpoints(master: str) -> list[tuple[str, int]]:
    """The (host, port) pairs of a standalone master URL, `spark://h1:7077,h2:7077` for HA.

    Raises:
        SparkUnavailable: a host without a name or a port that is not a number.
    """
    endpoints = []
    for item in master.removeprefix("spark://").split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep:
            host, port = item.strip(), str(MASTER_PORT)
        host = host.strip("[]")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise SparkUnavailable(f"'{master}' is not a Spark master URL: use spark://HOST:PORT")
        endpoints.append((host, int(port)))
    return endpoints


def connect_endpoint(url: str) -> tuple[str, int]:
    """The (host, port) of a Spark Connect URL, `sc://host:15002/;param=value`.

    Raises:
        SparkUnavailable: not an `sc://HOST[:PORT]` URL.
    """
    parsed = urllib.parse.urlparse("http" + url[2:]) if url.startswith("sc://") else None
    try:
        port = parsed.port if parsed is not None else None
    except ValueError:
        parsed = None
    if parsed is None or not parsed.hostname or parsed.path not in ("", "/"):
        raise SparkUnavailable(f"'{url}' is not a Spark Connect URL: use sc://HOST:PORT")
    return parsed.hostname, CONNECT_PORT if port is None else port


def tcp_refusal(host: str, port: int, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """Why nothing takes a TCP connection at host:port (None: something does)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except socket.gaierror:
        return f"cannot resolve {host}"
    except ConnectionRefusedError:
        return "connection refused"
    except (socket.timeout, TimeoutError):
        return f"no answer within {timeout_s:g} s"
    except OSError as exc:
        return (exc.strerror or str(exc)).lower()


def probe_master(master: str, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Fail at once when no host of a standalone master URL takes connections.

    Raises:
        SparkUnavailable: nothing listens at any of its addresses.
    """
    reasons = [tcp_refusal(host, port, timeout_s) for host, port in master_endpoints(master)]
    if all(reasons):
        raise SparkUnavailable(f"no Spark master answers at {master} ({reasons[0]}): {CHECK}, "
                               "or start one with `kreassign spark start`")


def probe_connect(url: str, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Fail at once when no Spark Connect server answers at `url`: nothing takes the connection,
    or what does never completes a gRPC handshake.

    Raises:
        SparkUnavailable: as above, or the URL is malformed.
    """
    import grpc
    from pyspark.errors import PySparkValueError
    from pyspark.sql.connect.client import DefaultChannelBuilder

    host, port = connect_endpoint(url)
    reason = tcp_refusal(host, port, timeout_s)
    if reason:
        raise SparkUnavailable(f"no Spark Connect server answers at {url} ({reason}): {CHECK}, "
                               "or start one with `kreassign spark start --connect`")
    try:
        channel = DefaultChannelBuilder(url).toChannel()
    except PySparkValueError as exc:
        raise SparkUnavailable(f"'{url}' is not a Spark Connect URL: {exc.getMessage()}") from exc
    try:
        grpc.channel_ready_future(channel).result(timeout=timeout_s)
    except grpc.FutureTimeoutError:
        raise SparkUnavailable(f"{url} takes connections but is not a Spark Connect server (no gRPC handshake "
                               f"within {timeout_s:g} s): {CHECK}") from None
    finally:
        channel.close()


def registration_failure(master: str, timeout_s: float) -> SparkUnavailable:
    """The error for a master that takes the connection but does not register the driver."""
    return SparkUnavailable(
        f"the Spark master at {master} took the connection but did not register this application within "
        f"{timeout_s:.0f} s: is it a Spark 4 master and not another port? {CHECK}")


def no_executor_failure(master: str, timeout_s: float | None) -> SparkUnavailable:
    """The error for a master that registered the driver but gives it no executor (None: it
    stopped the application)."""
    what = "stopped this application" if timeout_s is None else f"gave this application no executor within {timeout_s:g} s"
    return SparkUnavailable(f"the Spark master at {master} {what}: check that it has a live worker with free "
                            "cores and memory (`kreassign spark status`; --conf spark.executor.memory=... asks for less)")


def start_failure(where: str, exc: BaseException) -> SparkUnavailable:
    """A driver that failed to start on `where`, as one line (the Java or gRPC trace stays in the
    exception's cause, which --debug prints)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    first = next((line for line in lines if not line.startswith(("at ", "Traceback", "JVM stacktrace"))),
                 type(exc).__name__)
    first = first.rstrip(".")
    if len(first) > 200:
        first = first[:200] + "..."
    return SparkUnavailable(f"Spark did not start on {where}: {first}: {CHECK}")
