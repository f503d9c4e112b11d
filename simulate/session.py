"""Starting Spark: embedded `local[*]` by default, a real cluster with `master`, or Spark Connect.

Everything here runs only inside `kreassign simulate` (and the test fixture): pyspark and the
JVM are never started by importing kreassign.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from kreassign.cluster.java import find_java, java_version, parse_java_version  # noqa: F401 (re-exported)
from kreassign.simulate.errors import SparkUnavailable
from kreassign.simulate.spark_address import (
    EXECUTOR_TIMEOUT_S,
    REGISTRATION_TIMEOUT_S,
    no_executor_failure,
    probe_connect,
    probe_master,
    registration_failure,
    start_failure,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from kreassign.simulate.jvm_cache import JvmCache

__all__ = ["SparkOptions", "start_session", "stop_session"]

MIN_JAVA = 17
DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
QUIET_LOG_CONFIG = Path(__file__).with_name("log4j2-quiet.properties")
"""the driver JVM's logging until the session runs: nothing (kreassign reports a failed start in
one line); --debug keeps Spark's own (warnings and their Java stack traces)"""
_MASTER = re.compile(r"^(local(\[(\*|\d+)(,\d+)?\])?|spark://.+|yarn|k8s://.+|mesos://.+)$")


@dataclass(frozen=True)
class SparkOptions:
    """Where and how Spark runs.

    `remote` (a Spark Connect URL, `sc://host:15002`) wins over `master`. `conf` is passed to
    the session builder as is, after kreassign's own settings, so it can override them.
    """

    master: str = "local[*]"
    remote: str | None = None
    shuffle_partitions: int = 8
    driver_memory: str = "3g"
    app_name: str = "kreassign-simulate"
    conf: Mapping[str, str] = field(default_factory=dict)
    debug: bool = False
    """keep Spark's own logging (warnings, Java stack traces) instead of kreassign's one line"""
    registration_timeout_s: float = REGISTRATION_TIMEOUT_S
    executor_timeout_s: float = EXECUTOR_TIMEOUT_S
    jvm_cache: Literal["off", "use", "record"] = "off"
    """the driver JVM's class-data archive (`jvm_cache`): `use` it if there is one and have one
    recorded in the background when the session stops if not (the CLI); `record` it"""

    @property
    def address(self) -> str:
        """Where the session runs, as the user gave it."""
        return self.remote if self.remote is not None else self.master

    @property
    def is_standalone(self) -> bool:
        """A standalone master (`spark://`), whose driver registers at start."""
        return self.remote is None and self.master.startswith("spark://")

    @property
    def is_local(self) -> bool:
        return self.remote is None and self.master.startswith("local")

    @property
    def is_loopback(self) -> bool:
        """A standalone master on this machine (`kreassign spark start`): the driver listens on
        127.0.0.1 too, where that master's executors reach it."""
        host = self.master.removeprefix("spark://").rsplit(":", 1)[0]
        return self.remote is None and self.master.startswith("spark://") and host in ("127.0.0.1", "localhost")


def check_java(env: Mapping[str, str] | None = None) -> None:
    """Raise SparkUnavailable with what to do when no usable Java is installed."""
    java = find_java(env)
    hint = (f"Spark needs Java {MIN_JAVA} or newer: install it (for example "
            "`apt-get install openjdk-17-jre-headless`) and set JAVA_HOME, or run on a Spark "
            "Connect server with --remote sc://HOST:15002.")
    if java is None:
        where = "JAVA_HOME" if (env or os.environ).get("JAVA_HOME") else "PATH"
        raise SparkUnavailable(f"Java was not found (looked in {where}). {hint}")
    version = java_version(java)
    if version is None or version < MIN_JAVA:
        found = "an unknown version" if version is None else f"Java {version}"
        raise SparkUnavailable(f"{java} is {found}. {hint}")


def check_master(master: str) -> None:
    if not _MASTER.match(master):
        raise SparkUnavailable(
            f"'{master}' is not a Spark master: use local[*], local[N], spark://HOST:7077, yarn "
            "or k8s://https://HOST:PORT (or --remote sc://HOST:15002 for Spark Connect)"
        )


CONNECT_MODULES = ("grpc", "grpc_status", "google.protobuf", "google.rpc", "zstandard")
"""What pyspark's Connect client imports (the `connect` extra: grpcio, grpcio-status, protobuf,
googleapis-common-protos, zstandard)."""


def missing_connect_modules() -> list[str]:
    """The Spark Connect client's modules that are not installed, without importing them."""
    from importlib.util import find_spec

    def found(name: str) -> bool:
        try:
            return find_spec(name) is not None
        except ModuleNotFoundError:  # the parent package is missing
            return False

    return [name for name in CONNECT_MODULES if not found(name)]


def active_session() -> SparkSession | None:
    """The session already running in this process, if any (an embedding application's)."""
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession()


def start_session(options: SparkOptions) -> SparkSession:
    """Start (or join) the Spark session the simulation runs on.

    A standalone master or a Connect server is probed first, and a master that takes the
    connection has `registration_timeout_s` to register the driver and `executor_timeout_s` to
    give it an executor; a start that fails ends in one line naming the address.

    Raises:
        SparkUnavailable: Java is missing or too old, the master URL is malformed, `remote` is
            given without Spark Connect's client libraries installed, or nothing (or not Spark)
            answers at the address.
    """
    if options.remote is not None:
        return _connect_session(options)
    from pyspark import SparkContext

    from kreassign.simulate import jvm_cache

    check_master(options.master)
    check_java()
    if options.is_standalone:
        probe_master(options.master)
    if options.is_local or options.is_loopback:
        # Executors on this machine run this interpreter, where kreassign is installed.
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    java = find_java()
    cache = None
    if options.jvm_cache != "off" and java is not None and SparkContext._gateway is None:
        cache = jvm_cache.plan(java, record=options.jvm_cache == "record")
    settings = _classic_settings(options, cache)
    try:
        session = _standalone_session(options, settings) if options.is_standalone else _builder(settings).getOrCreate()
    except SparkUnavailable:
        raise
    except Exception as exc:  # py4j and pyspark errors of a driver that did not start
        raise start_failure(options.address, exc) from exc
    jvm_cache.start_recording(cache, getattr(SparkContext._gateway, "proc", None))
    if not options.debug:
        session.sparkContext.setLogLevel("ERROR")
    return session


def stop_session(session: SparkSession, options: SparkOptions) -> None:
    """Stop a session `start_session` started with `options`. A driver JVM that records its
    class-data archive (`jvm_cache`) is let exit and waited for, so the archive is in place for
    the next run; one that found none to `use` has one recorded in the background."""
    from pyspark import SparkContext

    from kreassign.simulate import jvm_cache

    session.stop()
    jvm_cache.finish_recording(lambda: _close_gateway(SparkContext))
    java = find_java()
    if options.jvm_cache == "use" and options.remote is None and java is not None:
        jvm_cache.record_in_background(java)


def _close_gateway(context_class: type) -> None:
    """End this process's driver JVM the way it ends when Python exits (its stdin closes), and
    forget it, so a later session starts a new one."""
    gateway = getattr(context_class, "_gateway", None)
    proc = getattr(gateway, "proc", None)
    try:
        gateway.shutdown()  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001 - the JVM exits below in any case
        pass
    if proc is not None and proc.stdin is not None:
        proc.stdin.close()
    for name in ("_gateway", "_jvm"):
        setattr(context_class, name, None)


def _classic_settings(options: SparkOptions, cache: JvmCache | None = None) -> dict[str, str]:
    """The session's settings: kreassign's, then `options.conf`, which may override them."""
    java = DRIVER_JAVA_OPTIONS if options.debug else f"{DRIVER_JAVA_OPTIONS} -Dlog4j2.configurationFile={QUIET_LOG_CONFIG}"
    if cache is not None:
        java = f"{java} {cache.java_options}"
    settings = {"spark.master": options.master, "spark.ui.enabled": "false"}
    if options.is_local or options.is_loopback:
        settings.update({
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.driver.memory": options.driver_memory,
        })
    # A simulation's JVM lives for seconds: the C2 compiler's threads cost more CPU than its
    # faster code saves (-29% CPU on the 1M-move case, bench/results/profile_simulate.jsonl).
    settings["spark.driver.extraJavaOptions"] = java
    return {
        **settings,
        "spark.app.name": options.app_name,
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.execution.arrow.pyspark.fallback.enabled": "false",
        **_common_settings(options),
    }


def _common_settings(options: SparkOptions) -> dict[str, str]:
    return {
        "spark.sql.shuffle.partitions": str(options.shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        **options.conf,
    }


def _builder(settings: Mapping[str, str]) -> SparkSession.Builder:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder


def _connect_session(options: SparkOptions) -> SparkSession:
    """A Spark Connect session, once a server answers at `options.remote`. A Connect session
    always moves data as Arrow and refuses (with a warning) the settings of the classic client,
    so those stay out."""
    from pyspark.sql import SparkSession

    assert options.remote is not None
    missing = missing_connect_modules()
    if missing:
        raise SparkUnavailable(
            f"--remote needs the Spark Connect client ({', '.join(missing)} not installed): "
            "pip install 'kreassign[connect]' (or run embedded with --master local[*])"
        )
    probe_connect(options.remote)
    builder = SparkSession.builder.remote(options.remote)
    for key, value in {"spark.app.name": options.app_name, **_common_settings(options)}.items():
        builder = builder.config(key, value)
    try:
        return builder.getOrCreate()
    except Exception as exc:  # the Connect client's errors: the server refused the session
        raise start_failure(options.remote, exc) from exc


def _standalone_session(options: SparkOptions, settings: Mapping[str, str]) -> SparkSession:
    """A session on a standalone master that takes connections: the driver JVM starts first,
    then its registration with the master runs under a deadline (Spark retries a master that
    does not answer for 60 s), then the session waits for its first executor.

    The deadline runs from when the driver's JVM is up and stretches with the machine's load, so
    a busy machine's slow start is not taken for a master that does not answer."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    conf = SparkConf(loadDefaults=False).setAll(list(settings.items()))
    gateway = launch_gateway(conf)
    outcome: dict[str, BaseException | None] = {}

    def register() -> None:
        try:
            SparkContext(conf=conf, gateway=gateway)
            outcome["error"] = None
        except BaseException as exc:  # noqa: BLE001 - reported by the caller, not by the thread
            outcome["error"] = exc

    thread = threading.Thread(target=register, name="spark-registration", daemon=True)
    thread.start()
    waited = registration_timeout(options.registration_timeout_s)
    thread.join(waited)
    if "error" not in outcome:
        _abandon(gateway, SparkContext)
        raise registration_failure(options.master, waited)
    error = outcome["error"]
    if error is not None:
        _abandon(gateway, SparkContext)
        raise start_failure(options.master, error) from error
    session = _builder(settings).getOrCreate()
    _wait_for_executor(session, options)
    return session


def registration_timeout(base_s: float) -> float:
    """`base_s`, longer in proportion to the load when more runs than there are cores (at most
    six times)."""
    busy = os.getloadavg()[0] / (os.cpu_count() or 1)
    return base_s * min(max(busy, 1.0), 6.0)


def _wait_for_executor(session: SparkSession, options: SparkOptions) -> None:
    """Return once the application has an executor besides the driver."""
    context = session.sparkContext._jsc.sc()
    deadline = time.monotonic() + options.executor_timeout_s
    while len(context.statusTracker().getExecutorInfos()) < 2:
        if context.isStopped():
            session.stop()
            raise no_executor_failure(options.master, None)
        if time.monotonic() > deadline:
            session.stop()
            raise no_executor_failure(options.master, options.executor_timeout_s)
        time.sleep(0.1)


def _abandon(gateway: object, context_class: type) -> None:
    """Stop a driver JVM whose start is given up, and forget it, so nothing waits on it."""
    proc = getattr(gateway, "proc", None)
    if proc is not None:
        proc.kill()
        proc.wait()
    shutdown = getattr(gateway, "shutdown", None)
    if shutdown is not None:
        try:
            shutdown()
        except Exception:  # noqa: BLE001 - the JVM is gone already
            pass
    for name in ("_gateway", "_jvm", "_active_spark_context"):
        setattr(context_class, name, None)
