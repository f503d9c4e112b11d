"""A Spark standalone cluster on this machine, for `kreassign spark start|stop|status`.

pip's pyspark ships the jars and `bin/spark-class` but not `sbin/start-master.sh`, so the master,
the workers and the Spark Connect server (`SparkConnectServer`, whose jar pip's pyspark 4
includes) are started here through `spark-class`, each as its own process group, every listener
on 127.0.0.1 (web UIs too: Spark binds them to SPARK_LOCAL_IP). `spark.json` in the state dir
records the URLs and process ids; `stop` signals exactly those process groups.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kreassign.cluster.errors import InputError
from kreassign.cluster.processes import default_state_dir as shared_state_dir
from kreassign.cluster.processes import pid_alive

STATE_FILE = "spark.json"
LOOPBACK = "127.0.0.1"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
CONNECT_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def default_state_dir() -> Path:
    return shared_state_dir("spark")


@dataclass(frozen=True)
class ClusterOptions:
    """What `kreassign spark start` accepts."""

    workers: int = 1
    cores_per_worker: int = field(default_factory=lambda: os.cpu_count() or 1)
    memory_per_worker: str = "2g"
    connect: bool = False
    daemon_memory: str = "512m"
    """heap of the master and worker JVMs (SPARK_DAEMON_MEMORY)"""
    connect_driver_memory: str = "1g"
    connect_executor_memory: str = "512m"
    timeout_s: float = 180.0

    def __post_init__(self) -> None:
        if self.workers < 1 or self.cores_per_worker < 1:
            raise InputError("a local Spark cluster needs at least one worker with one core")


@dataclass(frozen=True)
class LocalCluster:
    """What `spark.json` records about a running local cluster."""

    master_url: str
    master_ui: str
    connect_url: str | None
    pids: dict[str, int]
    """role (master, worker-1, ..., connect) -> process id (each leads its process group)"""
    state_dir: str
    started_at: str
    logs: dict[str, str] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path) -> LocalCluster:
        d = json.loads(path.read_text())
        return cls(d["master_url"], d["master_ui"], d.get("connect_url"), {k: int(v) for k, v in d["pids"].items()},
                   d["state_dir"], d["started_at"], dict(d.get("logs", {})))

    def write(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        os.replace(tmp, path)

    def alive(self) -> dict[str, bool]:
        return {role: pid_alive(pid) for role, pid in self.pids.items()}


def spark_home() -> Path:
    """The Spark distribution inside the installed pyspark package (no JVM is started)."""
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home())


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def _environment(state_dir: Path, options: ClusterOptions) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": LOOPBACK,
        "SPARK_LOCAL_HOSTNAME": LOOPBACK,
        "SPARK_LOG_DIR": str(state_dir / "logs"),
        "SPARK_PID_DIR": str(state_dir),
        "SPARK_DAEMON_MEMORY": options.daemon_memory,
        "SPARK_CONNECT_MODE": "0",
        # Executors run kreassign's model: they need this interpreter, where kreassign is installed.
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    })
    return env


def _launch(role: str, args: list[str], state_dir: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], Path]:
    log_path = state_dir / "logs" / f"{role}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *args], env=env,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)
    return proc, log_path


def start_cluster(options: ClusterOptions, state_dir: Path) -> LocalCluster:
    """Start a master, `options.workers` workers and, with `options.connect`, a Spark Connect
    server on the master; return once every worker has registered and Connect listens.

    Raises:
        InputError: a cluster already runs from this state dir, Java is missing, or a process
            exited or did not come up within the timeout (everything started is stopped again).
    """
    from kreassign.simulate.session import check_java

    check_java()
    running = read_status(state_dir)
    if running is not None:
        raise InputError(f"a Spark cluster is already running from {state_dir} ({running.master_url}); "
                         f"stop it with: kreassign spark stop --state-dir {state_dir}")
    state_dir.mkdir(parents=True, exist_ok=True)
    env = _environment(state_dir, options)
    master_port, ui_port = free_port(), free_port()
    master_url, master_ui = f"spark://{LOOPBACK}:{master_port}", f"http://{LOOPBACK}:{ui_port}"
    procs: dict[str, subprocess.Popen[bytes]] = {}
    logs: dict[str, str] = {}
    deadline = time.monotonic() + options.timeout_s
    try:
        procs["master"], log = _launch("master", [MASTER_CLASS, "--host", LOOPBACK, "--port", str(master_port),
                                                  "--webui-port", str(ui_port)], state_dir, env)
        logs["master"] = str(log)
        _wait(lambda: _master_state(master_ui) is not None, procs, logs, deadline, "the master")
        for n in range(1, options.workers + 1):
            role = f"worker-{n}"
            procs[role], log = _launch(role, [
                WORKER_CLASS, "--host", LOOPBACK, "--webui-port", "0", "--cores", str(options.cores_per_worker),
                "--memory", options.memory_per_worker, "--work-dir", str(state_dir / "work"), master_url,
            ], state_dir, env)
            logs[role] = str(log)
        _wait(lambda: _alive_workers(master_ui) >= options.workers, procs, logs, deadline, "the workers")
        connect_url = None
        if options.connect:
            port = free_port()
            procs["connect"], log = _launch("connect", [
                "org.apache.spark.deploy.SparkSubmit", "--class", CONNECT_CLASS, "--name", "kreassign Spark Connect",
                "--master", master_url, "--driver-memory", options.connect_driver_memory,
                "--conf", f"spark.connect.grpc.binding.address={LOOPBACK}",
                "--conf", f"spark.connect.grpc.binding.port={port}",
                "--conf", f"spark.driver.host={LOOPBACK}", "--conf", f"spark.driver.bindAddress={LOOPBACK}",
                "--conf", "spark.ui.enabled=false", "--conf", f"spark.pyspark.python={sys.executable}",
                # A standalone app takes every core it can: leave half for `simulate --master`.
                "--conf", f"spark.cores.max={max(1, options.workers * options.cores_per_worker // 2)}",
                "--conf", f"spark.executor.memory={options.connect_executor_memory}",
                "spark-internal",
            ], state_dir, env)
            logs["connect"] = str(log)
            _wait(lambda: _listens(port), procs, logs, deadline, "the Spark Connect server")
            connect_url = f"sc://{LOOPBACK}:{port}"
    except BaseException:
        _terminate({role: p.pid for role, p in procs.items()})
        raise
    cluster = LocalCluster(master_url=master_url, master_ui=master_ui, connect_url=connect_url,
                           pids={role: p.pid for role, p in procs.items()}, state_dir=str(state_dir),
                           started_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), logs=logs)
    cluster.write(state_dir / STATE_FILE)
    return cluster


def _wait(ready: Callable[[], bool], procs: dict[str, subprocess.Popen[bytes]], logs: dict[str, str],
          deadline: float, what: str) -> None:
    while not ready():
        for role, proc in procs.items():
            if proc.poll() is not None:
                raise InputError(f"the Spark {role} exited during start-up (code {proc.returncode}):\n"
                                 f"{_tail(Path(logs[role]))}\nfull log: {logs[role]}")
        if time.monotonic() > deadline:
            raise InputError(f"{what} did not come up in time; logs: {', '.join(logs.values())}")
        time.sleep(0.2)


def _master_state(ui: str) -> dict[str, object] | None:
    """The master's status document (its web UI's /json), or None while it is not up."""
    try:
        with urllib.request.urlopen(f"{ui}/json", timeout=2) as response:
            doc: dict[str, object] = json.loads(response.read())
            return doc
    except (OSError, ValueError):
        return None


def _alive_workers(ui: str) -> int:
    doc = _master_state(ui) or {}
    workers = doc.get("workers", [])
    return sum(1 for w in workers if isinstance(w, dict) and w.get("state") == "ALIVE") if isinstance(workers, list) else 0


def _listens(port: int) -> bool:
    try:
        with socket.create_connection((LOOPBACK, port), timeout=1):
            return True
    except OSError:
        return False


def read_status(state_dir: Path) -> LocalCluster | None:
    """The cluster started from this state dir while its master runs, else None (a stale state
    file is removed)."""
    path = state_dir / STATE_FILE
    try:
        cluster = LocalCluster.read(path)
    except FileNotFoundError:
        return None
    except (ValueError, KeyError) as exc:
        raise InputError(f"{path} is damaged ({exc}); delete it if no Spark cluster is running") from exc
    if not any(cluster.alive().values()):
        path.unlink(missing_ok=True)
        return None
    return cluster


def cluster_address(state_dir: Path, via: str = "master") -> tuple[str, str | None]:
    """The (master, remote) a simulation passes to Spark to run on the cluster started from this
    state dir: its master, or with `via="connect"` its Spark Connect server.

    Raises:
        InputError: no cluster runs from this state dir, or it has no Connect server.
    """
    cluster = read_status(state_dir)
    if cluster is None:
        raise InputError(f"no Spark cluster is running from {state_dir}: start one with `kreassign spark start"
                         f"{' --connect' if via == 'connect' else ''}` (or run embedded without --spark-local-cluster)")
    if via != "connect":
        return cluster.master_url, None
    if cluster.connect_url is None:
        raise InputError(f"the Spark cluster running from {state_dir} has no Connect server: restart it with "
                         "`kreassign spark stop` and `kreassign spark start --connect`, or use "
                         "--spark-local-cluster master")
    return cluster.master_url, cluster.connect_url


def stop_cluster(state_dir: Path, *, timeout_s: float = 30.0) -> LocalCluster | None:
    """Stop the cluster started from this state dir (Connect, workers, then the master); None if
    none runs."""
    cluster = read_status(state_dir)
    if cluster is None:
        return None
    order = sorted(cluster.pids, key=lambda role: (role == "master", role != "connect", role))
    _terminate({role: cluster.pids[role] for role in order}, timeout_s=timeout_s)
    (state_dir / STATE_FILE).unlink(missing_ok=True)
    return cluster


def _terminate(pids: dict[str, int], *, timeout_s: float = 30.0) -> None:
    """SIGTERM each process group we started (a worker's executors are in its group), then
    SIGKILL what is left after the timeout."""
    for pid in pids.values():
        _signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for pid in pids.values():
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if pid_alive(pid):
            _signal_group(pid, signal.SIGKILL)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
