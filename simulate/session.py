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
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kreassign.cluster.java import find_java, java_version, parse_java_version  # noqa: F401 (re-exported)
from kreassign.cluster.errors import KreassignError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MIN_JAVA = 17
DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
_MASTER = re.compile(r"^(local(\[(\*|\d+)(,\d+)?\])?|spark://.+|yarn|k8s://.+|mesos://.+)$")


class SparkUnavailable(KreassignError):
    """Spark cannot start here: no Java, a bad master URL, or no Spark Connect client."""


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

    Raises:
        SparkUnavailable: Java is missing or too old, the master URL is malformed, or
            `remote` is given without Spark Connect's client libraries installed.
    """
    from pyspark.sql import SparkSession

    if options.remote is not None:
        missing = missing_connect_modules()
        if missing:
            raise SparkUnavailable(
                f"--remote needs the Spark Connect client ({', '.join(missing)} not installed): "
                "pip install 'kreassign[connect]' (or run embedded with --master local[*])"
            )
        builder = SparkSession.builder.remote(options.remote)
    else:
        check_master(options.master)
        check_java()
        if options.is_local or options.is_loopback:
            # Executors on this machine run this interpreter, where kreassign is installed.
            os.environ["PYSPARK_PYTHON"] = sys.executable
            os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
        builder = SparkSession.builder.master(options.master)
        local = {
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.driver.memory": options.driver_memory,
            # A simulation's JVM lives for seconds: the C2 compiler's threads cost more CPU than
            # its faster code saves (-29% CPU on the 1M-move case, bench/results/profile_simulate.jsonl).
            "spark.driver.extraJavaOptions": DRIVER_JAVA_OPTIONS,
        }
        for key, value in (local.items() if options.is_local or options.is_loopback else ()):
            builder = builder.config(key, value)
        builder = builder.config("spark.ui.enabled", "false")
    # A Connect session always moves data as Arrow and refuses (with a warning) the settings of
    # the classic client, so those go to classic sessions only.
    classic = {} if options.remote is not None else {
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.execution.arrow.pyspark.fallback.enabled": "false",
    }
    settings = {
        "spark.app.name": options.app_name,
        **classic,
        "spark.sql.shuffle.partitions": str(options.shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        **options.conf,
    }
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    if options.remote is None:
        session.sparkContext.setLogLevel("ERROR")
    return session
