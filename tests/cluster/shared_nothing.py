"""A cluster whose machines share nothing but an S3 server.

- an S3 server (moto) on 127.0.0.1: the only storage every process reaches;
- a Spark standalone master and two workers, each worker in its own mount namespace
  (a private tmpfs /tmp holding its work directory, scratch space and home);
- the driver side, i.e. Airflow: another mount namespace, where `dag.test()` runs with its
  AIRFLOW_HOME (metadata DB, run store, SQLite outputs) on its private /tmp and every chain
  task spark-submits to the master in client mode.

The workers get no storage settings of their own: the AWS_* variables are set on the driver
side only, and reach the executors the way the storage layer hands them over (Spark conf).
The test process reads the driver's and the workers' private files through /proc/<pid>/root.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Optional

from airflow_flinkchain.localcluster.mounts import PRIVATE_HOME, PrivateMounts
from airflow_flinkchain.localcluster.s3_server import S3Server
from airflow_flinkchain.localcluster.standalone import StandaloneCluster, descendants, kill_tree

REPO = Path(__file__).resolve().parents[2]
DAGS = REPO / "dags"
RUN_DAG = Path(__file__).resolve().parent / "run_dag.py"
DRIVER_HOME = f"{PRIVATE_HOME}/airflow"
DRIVER_DAGS = f"{PRIVATE_HOME}/dags"  # the examples of dags/ and the tests' DAG files, copied in


class SharedNothingCluster:
    def __init__(self, workdir: Path, dag_files: tuple = (), workers: int = 2, s3: Optional[S3Server] = None):
        """`s3`: a running S3 server to use (the test session's); else the cluster starts its own."""
        self.dag_files = [Path(f) for f in dag_files]
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.own_s3 = s3 is None
        self.s3 = s3 or S3Server()
        self.cluster = StandaloneCluster(self.workdir / "spark", workers=workers, cores=1, memory="1g",
                                         private_mounts=True)
        self.driver = PrivateMounts("driver")
        self.dag_servers: dict[str, DagServer] = {}
        self.bucket = ""

    # -- lifecycle -------------------------------------------------------------
    def start(self) -> "SharedNothingCluster":
        try:
            if self.own_s3:
                self.s3.start(str(self.workdir / "moto.log"))
            self.bucket = self.s3.new_bucket("cluster")
            self.driver.start()
            files = [str(p) for p in [*DAGS.glob("*.py"), *self.dag_files]]
            subprocess.run(self.driver.command(["sh", "-c", 'mkdir -p "$0" && cp "$@" "$0"', DRIVER_DAGS, *files]),
                           check=True)
            self.cluster.start()
            self._airflow_db()
        except BaseException:
            self.stop()
            raise
        return self

    def _airflow_db(self) -> None:
        """The driver side's metadata DB: a copy of the migrated one of this process's AIRFLOW_HOME
        (`make test` migrates it first), else `airflow db migrate` (a minute or two)."""
        src = Path(os.environ.get("AIRFLOW_HOME") or "/nonexistent") / "airflow.db"
        if not src.is_file():
            self.airflow("db", "migrate", timeout=900)
            return
        snapshot = self.workdir / "airflow.db"
        source, copy = sqlite3.connect(f"file:{src}?mode=ro", uri=True), sqlite3.connect(snapshot)
        try:
            source.backup(copy)
        finally:
            source.close()
            copy.close()
        home = self.driver.path(DRIVER_HOME)  # written from here through /proc/<pid>/root (sqlite
        home.mkdir(parents=True, exist_ok=True)  # itself would resolve that link to our own /tmp)
        shutil.copyfile(snapshot, home / "airflow.db")

    def stop(self) -> None:
        for server in self.dag_servers.values():
            server.stop()
        self.cluster.stop()
        self.driver.stop()
        if self.own_s3:
            self.s3.stop()

    # -- locations ---------------------------------------------------------------
    def uri(self, *parts: str) -> str:
        return "/".join([f"s3://{self.bucket}", *parts])

    def driver_path(self, inside: str) -> Path:
        """A file of the driver side, as seen from here (through /proc/<pid>/root)."""
        return self.driver.path(inside)

    def copy_from_driver(self, inside: str, dest: Path) -> Path:
        """A copy of a file of the driver side, e.g. its SQLite database: SQLite opening the
        /proc/<pid>/root path would resolve the link to this process's own root, and its
        journal would land there."""
        shutil.copyfile(self.driver.path(inside), dest)
        return dest

    # -- the driver side ---------------------------------------------------------
    def driver_env(self, **extra: str) -> dict:
        keep = ("PATH", "LANG", "LC_ALL", "JAVA_HOME", "SPARK_HOME", "SPARK_LOCAL_IP", "SPARK_LOCAL_HOSTNAME",
                "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")
        env = {k: v for k, v in self.cluster.env.items() if k in keep}
        env.update(self.s3.env)
        env.update({
            "HOME": PRIVATE_HOME,
            "TMPDIR": "/tmp",
            "AIRFLOW_HOME": DRIVER_HOME,
            "AIRFLOW__CORE__DAGS_FOLDER": DRIVER_DAGS,
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__FLINKCHAIN__EXCHANGE_ROOT": self.uri("exchange"),
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "spark://127.0.0.1",
                                                      "port": self.cluster.port,
                                                      "extra": {"deploy-mode": "client"}}),
            "FLINKCHAIN_EXAMPLES_ROOT": self.uri("flinkchain"),
            "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
            "PYTHONPATH": os.pathsep.join([str(REPO), DRIVER_DAGS]),
            "PYTHONDONTWRITEBYTECODE": "1",
        })
        env.update(extra)
        return env

    def airflow(self, *args: str, timeout: float = 600) -> str:
        cmd = self.driver.command([os.path.join(os.path.dirname(sys.executable), "airflow"), *args])
        out = subprocess.run(cmd, env=self.driver_env(), capture_output=True, text=True, timeout=timeout)
        assert out.returncode == 0, f"airflow {' '.join(args)}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
        return out.stdout

    def start_dag(self, dag_file: str, dag_id: str, conf: Optional[dict] = None, log_name: str = "") -> "DagRun":
        """dag.test() of `dag_id` of the DAG file named `dag_file` (in the driver's DAG folder),
        running in the background in the driver side's DAG process of that file (one per file,
        kept between runs; `run_dag.py --serve`)."""
        server = self.dag_servers.get(dag_file)
        if server is None or server.proc.poll() is not None:
            server = self.dag_servers[dag_file] = DagServer(self, dag_file)
        return server.submit(dag_id, conf, self.workdir / f"dag-{log_name or dag_id}.log")

    def run_dag(self, dag_file: str, dag_id: str, conf: Optional[dict] = None, log_name: str = "",
                timeout: float = 900) -> dict:
        return self.start_dag(dag_file, dag_id, conf, log_name).result(timeout)

    # -- faults ------------------------------------------------------------------
    def worker_of(self, pid: int) -> int:
        """The worker whose namespace runs `pid`."""
        return next(i for i, m in self.cluster.mounts.items() if m.contains(pid))

    def kill_executor_of(self, pid: int) -> tuple[int, list[int]]:
        """SIGKILL the executor JVM running Python worker `pid`, with its Python processes:
        (the worker it ran on, the killed pids)."""
        worker = self.worker_of(pid)
        for executor in self.cluster.executor_pids(worker):
            if pid in descendants(executor):
                return worker, kill_tree(executor)
        raise AssertionError(f"pid {pid} is no executor's process on worker {worker}")

    def spark_submits(self, chain_id: str) -> list[int]:
        """The spark-submit JVMs of the driver side that run chain `chain_id` now."""
        out = []
        for pid in self.driver.pids():
            try:
                args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"org.apache.spark.deploy.SparkSubmit" in args and chain_id.encode() in args:
                out.append(pid)
        return out


class DagServer:
    """`run_dag.py --serve` of one DAG file on the driver side: DAG runs one after the other; its
    output goes to the log of the run in progress."""

    def __init__(self, cluster: SharedNothingCluster, dag_file: str):
        args = [sys.executable, str(RUN_DAG), f"{DRIVER_DAGS}/{dag_file}", "--serve"]
        self.log = open(cluster.workdir / f"dag-server-{dag_file}.log", "ab")
        self.proc = subprocess.Popen(cluster.driver.command(args), env=cluster.driver_env(), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        self.current: Optional[DagRun] = None
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            run = self.current
            if run is None:
                self.log.write(line)
                self.log.flush()
            else:
                run.feed(line)
        if self.current is not None:
            self.current.done.set()  # the process ended: no result

    def submit(self, dag_id: str, conf: Optional[dict], log: Path) -> "DagRun":
        assert self.current is None or self.current.done.is_set(), "a DAG run is still in progress"
        self.current = DagRun(self, log)
        self.proc.stdin.write((json.dumps({"dag_id": dag_id, "conf": conf}) + "\n").encode())
        self.proc.stdin.flush()
        return self.current

    def stop(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            kill_tree(self.proc.pid)
        self.log.close()


class DagRun:
    def __init__(self, server: DagServer, log: Path):
        self.server, self.log = server, log
        self.file = open(log, "wb")
        self.done = threading.Event()
        self.line: Optional[bytes] = None

    def feed(self, line: bytes) -> None:
        self.file.write(line)
        self.file.flush()
        if line.startswith(b'{"run_id"'):
            self.line = line
            self.file.close()
            self.done.set()

    def running(self) -> bool:
        return not self.done.is_set()

    def result(self, timeout: float = 900) -> dict:
        if not self.done.wait(timeout):
            kill_tree(self.server.proc.pid)
            raise AssertionError(f"dag.test() still running after {timeout:.0f} s; log {self.log}")
        text = self.log.read_text(errors="replace")
        assert self.line, f"dag.test() printed no result (exit {self.server.proc.poll()}); log {self.log}:\n{text[-6000:]}"
        result = json.loads(self.line)
        result["log"] = text
        return result


def wait_for(what: str, probe, timeout: float, interval: float = 1.0, while_=None):
    """Poll `probe()` until it returns something truthy; fail naming `what` after `timeout`
    or as soon as `while_()` turns false (the process that should get there ended)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = probe()
        if got:
            return got
        if while_ is not None and not while_():
            raise AssertionError(f"ended before {what}")
        time.sleep(interval)
    raise AssertionError(f"no {what} after {timeout:.0f} s")
