"""A Spark standalone master + workers on 127.0.0.1, from the installed pyspark.

Runs the very classes the docker/ stack runs (``org.apache.spark.deploy.master.Master``
and ``org.apache.spark.deploy.worker.Worker`` through ``$SPARK_HOME/bin/spark-class``).
Every JVM is started in its own session (process group) and stopped by process
group, executors included (the worker starts them in its group). With
``private_mounts=True`` each worker runs in its own mount namespace (mounts.py): its
work directory, scratch space and home are on a private /tmp, so the workers share no
disk with each other nor with the driver. Used by the cluster tests
(tests/cluster/conftest.py), ``make demo DEMO_ARGS=cluster`` and benchmarks/cluster_bench.py.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Optional

from airflow_flinkchain.localcluster.mounts import PRIVATE_HOME, PRIVATE_WORK, PrivateMounts

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
HOST = "127.0.0.1"


def spark_home() -> str:
    import pyspark

    return os.path.dirname(pyspark.__file__)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def spark_env(log_dir: str, python: str = sys.executable) -> dict:
    """Environment for spark-class / spark-submit: loopback only, small daemons, our Python."""
    env = dict(os.environ)
    env.update(
        SPARK_HOME=spark_home(),
        SPARK_LOCAL_IP=HOST,
        SPARK_LOCAL_HOSTNAME="localhost",
        SPARK_LOG_DIR=log_dir,
        SPARK_DAEMON_MEMORY="384m",
        PYSPARK_PYTHON=python,
        PYSPARK_DRIVER_PYTHON=python,
        SPARK_NO_DAEMONIZE="1",
    )
    return env


class StandaloneCluster:
    """``with StandaloneCluster(workdir, workers=1) as c: c.master_url``"""

    def __init__(self, workdir: os.PathLike | str, workers: int = 1, cores: int = 1, memory: str = "1g",
                 private_mounts: bool = False, env: Optional[dict] = None):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.n_workers = workers
        self.cores = cores
        self.memory = memory
        self.port = free_port()
        self.webui_port = free_port()
        self.master_url = f"spark://{HOST}:{self.port}"
        self.webui_url = f"http://{HOST}:{self.webui_port}"
        self.env = spark_env(str(self.workdir / "logs"))
        self.env.update(env or {})
        self.private_mounts = private_mounts
        self.mounts: dict[int, PrivateMounts] = {}  # worker index -> its namespace
        self._procs: list[tuple[str, subprocess.Popen]] = []
        self._stopped = False

    # -- commands (the docker/ compose file runs the same ones) -------------
    def master_command(self) -> list[str]:
        return [os.path.join(spark_home(), "bin", "spark-class"), MASTER_CLASS,
                "--host", HOST, "--port", str(self.port), "--webui-port", str(self.webui_port)]

    def worker_command(self, webui_port: int, work_dir: str) -> list[str]:
        return [os.path.join(spark_home(), "bin", "spark-class"), WORKER_CLASS, self.master_url,
                "--host", HOST, "--cores", str(self.cores), "--memory", self.memory,
                "--webui-port", str(webui_port), "--work-dir", work_dir]

    def _spawn(self, name: str, cmd: list[str], env: Optional[dict] = None) -> subprocess.Popen:
        log = open(self.workdir / f"{name}.log", "wb")
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env or self.env, cwd=self.workdir, start_new_session=True)
        log.close()
        self._procs.append((name, proc))
        return proc

    def start(self, timeout: float = 90.0) -> "StandaloneCluster":
        atexit.register(self.stop)
        try:
            (self.workdir / "logs").mkdir(exist_ok=True)
            self._spawn("master", self.master_command())
            self._wait(lambda s: s is not None, timeout, "the master web UI")
            for i in range(self.n_workers):
                self.add_worker(i)
            self._wait(lambda s: s is not None and self.alive_workers(s) >= self.n_workers, timeout,
                       f"{self.n_workers} ALIVE worker(s)")
        except BaseException:
            self.stop()
            raise
        return self

    def add_worker(self, index: int) -> None:
        name = f"worker{index}"
        if not self.private_mounts:
            work_dir = self.workdir / name
            work_dir.mkdir(exist_ok=True)
            self._spawn(name, self.worker_command(free_port(), str(work_dir)))
            return
        mounts = self.mounts[index] = PrivateMounts(name).start()
        env = dict(self.env, HOME=PRIVATE_HOME, TMPDIR="/tmp", SPARK_LOG_DIR=PRIVATE_WORK)
        self._spawn(name, mounts.command(self.worker_command(free_port(), PRIVATE_WORK)), env)

    def work_dir(self, index: int) -> Path:
        """Worker ``index``'s work directory (application folders with the executors' logs),
        as seen from here."""
        if index in self.mounts:
            return self.mounts[index].path(PRIVATE_WORK)
        return self.workdir / f"worker{index}"

    def worker_pid(self, index: int) -> int:
        return next(p.pid for n, p in self._procs if n == f"worker{index}")

    def executor_pids(self, index: int) -> list[int]:
        """The executor JVMs (``CoarseGrainedExecutorBackend``) worker ``index`` runs now: its children."""
        return [pid for pid in descendants(self.worker_pid(index)) if "CoarseGrainedExecutorBackend" in cmdline(pid)]

    # -- state --------------------------------------------------------------
    def state(self) -> Optional[dict]:
        """The master's web UI JSON, or None while it does not answer."""
        try:
            with urllib.request.urlopen(self.webui_url + "/json", timeout=2) as r:
                return json.loads(r.read().decode())
        except (OSError, ValueError):
            return None

    @staticmethod
    def alive_workers(state: dict) -> int:
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    def app_names(self) -> list[str]:
        s = self.state() or {}
        return [a.get("name") for a in s.get("activeapps", []) + s.get("completedapps", [])]

    def _wait(self, ready, timeout: float, what: str) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self._procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"Spark {name} exited with {proc.returncode} while waiting for {what}:\n"
                                       + self.log_tail(name))
            s = self.state()
            if ready(s):
                return s
            time.sleep(0.5)
        raise TimeoutError(f"No {what} after {timeout:.0f} s at {self.webui_url}:\n" + self.log_tail("master"))

    def log_tail(self, name: str, lines: int = 30) -> str:
        try:
            return "\n".join((self.workdir / f"{name}.log").read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    # -- stop ---------------------------------------------------------------
    def stop(self) -> None:
        """SIGTERM every process group (workers first: they take their executors along), then SIGKILL."""
        if self._stopped:
            return
        self._stopped = True
        for _, proc in reversed(self._procs):
            _signal_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for _, proc in reversed(self._procs):
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for _, proc in self._procs:  # the group may outlive its leader (executor JVMs): always KILL the group
            _signal_group(proc, signal.SIGKILL)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        for mounts in self.mounts.values():
            mounts.stop()
        try:
            atexit.unregister(self.stop)
        except Exception:
            pass

    def __enter__(self) -> "StandaloneCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (from /proc), parents before their children."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], list(children.get(pid, []))
    while todo:
        p = todo.pop(0)
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def kill_tree(pid: int) -> list[int]:
    """SIGKILL ``pid`` and its descendants at once (as a lost machine or an OOM kill would); the pids."""
    victims = [pid, *descendants(pid)]
    for p in victims:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return victims


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)  # start_new_session=True: pgid == pid
    except (ProcessLookupError, PermissionError):
        pass


def spark_submit_command(master: str, app: str, *app_args: str, deploy_mode: str = "client",
                         py_files: Optional[str] = None, conf: Optional[dict] = None, name: Optional[str] = None) -> list[str]:
    """The spark-submit command line (as SparkSubmitHook builds it, and as docker/ documents it)."""
    cmd = [os.path.join(spark_home(), "bin", "spark-submit"), "--master", master, "--deploy-mode", deploy_mode]
    for k, v in {"spark.ui.enabled": "false", "spark.executor.memory": "512m",
                 "spark.driver.memory": "512m", **(conf or {})}.items():
        cmd += ["--conf", f"{k}={v}"]
    if name:
        cmd += ["--name", name]
    if py_files:
        cmd += ["--py-files", py_files]
    return cmd + [app, *app_args]
