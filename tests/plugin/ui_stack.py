"""A real Airflow api-server (SimpleAuthManager, auth on) serving the Airflow 3 UI and the
plugin, for the browser tests: the plugin tests' AIRFLOW_HOME, three plain DAGs
serialized into the metadata DB (no dag-processor, no scheduler: nothing runs), two DAG
runs of `orders_dag` created through the REST API, and the run store seeded with the
same runs. Much faster than a scheduler run through Spark."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

DAG_FILE = '''
from datetime import datetime

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG

for dag_id in ("orders_dag", "other_dag", "plain_dag"):
    with DAG(dag_id, schedule=None, start_date=datetime(2025, 1, 1), catchup=False) as dag:
        EmptyOperator(task_id="work")
    globals()[dag_id] = dag
'''
REPO = Path(__file__).resolve().parents[2]
DAG = "orders_dag"
RUNS = ("manual__run_1", "manual__run_2+late")  # run_2 is the latest; its id needs URL-encoding
# Stream runs in the store only (older than RUNS): one mid-stream, with epoch watermarks, and
# the drain that ended the stream (operators at Flink's MAX watermark, some without input).
STREAM_RUNS = ("stream__slice", "stream__drain")
MAX_WATERMARK = 9223372036854775807
SLICE_WATERMARK = 1735725600000  # 2025-01-01 10:00:00 UTC
# Runs in the store only that failed: a refused stream run (its setup task's reason), a run whose
# chain attempt failed (the runtime's error), and a stream run reading one source of each kind.
REFUSED_RUN, FAILED_RUN, SOURCES_RUN = "stream__refused", "manual__chain_failed", "stream__sources"
REFUSAL = ("pipeline 'orders' setup, run 'stream__refused': the checkpoint pointer _latest.json is damaged "
           "(not JSON); restore a checkpoint with `flinkchain checkpoints --restore N`")
CHAIN_ERROR = "operator 'parse' in chain 'read_orders', subtask 1 (process): ValueError: bad record"
CHECKPOINT_DIR = "/srv/flinkchain/checkpoints/orders_cdc"  # internal: never shown
LONG_LINK = "file:///srv/airflow/flinkchain/output/orders/customer_totals_by_region_and_month/"
LONG_PATH = "/srv/airflow/flinkchain/output/orders/customer_totals_by_region_and_month/part-000001-3f2a9c.parquet"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _airflow(env: dict, *args: str, timeout: float = 300) -> str:
    exe = str(Path(sys.executable).parent / "airflow")
    done = subprocess.run([exe, *args], env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"airflow {' '.join(args)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def seed_store(store) -> None:
    """Two runs of orders_dag (the second has a failed chain retried, operator times below a
    millisecond and durations with a fraction of a second) and a plan for other_dag."""
    from tests.store.sample import metrics, plan

    store.start_run(DAG, RUNS[0], plan=plan(), started_at="2025-01-01T10:00:00Z")
    for chain in ("read_orders", "by_customer", "write_rejects"):
        store.record_attempt(metrics(dag_id=DAG, run_id=RUNS[0], chain=chain), try_number=1)
    store.finish_run(DAG, RUNS[0], ended_at="2025-01-01T10:01:00Z")
    # The second run's plan gives a sink a link, as an integration (e.g. Airflow assets) would.
    # A source's asset is named by a long URI, a sink's output path is long: both wrap in the table.
    linked = plan()
    ops = {op["key"]: op for chain in linked["chains"] for op in chain["operators"]}
    ops["write_totals"]["links"] = [{"href": "assets", "text": "all assets"}]
    ops["read_orders"]["links"] = [{"href": "assets", "text": LONG_LINK}]
    store.start_run(DAG, RUNS[1], plan=linked, started_at="2025-01-02T10:00:00Z")
    for chain in ("read_orders", "by_customer", "write_rejects"):
        doc = metrics(dag_id=DAG, run_id=RUNS[1], chain=chain, scale=2)
        for out in doc["outputs"]:
            if out.get("sink") == "write_totals":
                out["path"] = LONG_PATH
        doc["started_at"], doc["ended_at"] = "2025-01-02T10:00:00.000Z", "2025-01-02T10:00:02.250Z"
        if chain == "write_rejects":
            for op in doc["operators"]:
                op["time_ms"] = 0.0625  # 62.5 µs per subtask
        store.record_attempt(doc, try_number=1)
    store.finish_run(DAG, RUNS[1], ended_at="2025-01-02T10:00:30Z")
    for day, run_id in enumerate(STREAM_RUNS, start=1):
        drained = run_id == STREAM_RUNS[1]
        store.start_run(DAG, run_id, plan=plan(), started_at=f"2024-12-0{day}T10:00:00Z")
        for chain in ("read_orders", "by_customer", "write_rejects"):
            store.record_attempt(stream_metrics(run_id, chain, drained), try_number=1)
        store.finish_run(DAG, run_id, ended_at=f"2024-12-0{day}T10:01:00Z")
    seed_failures(store)
    store.record_plan("other_dag", plan(pipeline="other"))


def seed_failures(store) -> None:
    """A refused stream run (nothing ran: the run's error is the reason), a run whose read_orders
    attempt failed (its error in the attempt) and a stream run of five sources, one per kind."""
    from tests.store.sample import metrics, plan

    store.start_run(DAG, REFUSED_RUN, plan=plan(), started_at="2024-11-01T10:00:00Z")
    store.refuse_run(DAG, REFUSED_RUN, REFUSAL)
    store.start_run(DAG, FAILED_RUN, plan=plan(), started_at="2024-11-02T10:00:00Z")
    doc = metrics(dag_id=DAG, run_id=FAILED_RUN, chain="read_orders", state="failed")
    doc["error"], doc["operators"], doc["outputs"] = CHAIN_ERROR, [], []
    store.record_attempt(doc, try_number=1)
    store.finish_run(DAG, FAILED_RUN, ended_at="2024-11-02T10:01:00Z")
    sources = sources_plan()
    store.start_run(DAG, SOURCES_RUN, plan=sources, started_at="2024-11-03T10:00:00Z")
    owner = f"pipeline 'orders' source 'cdc' checkpoint_dir {CHECKPOINT_DIR}"
    reads = {  # source key -> (ranges read [split, start, end), committed split positions)
        "cdc": ([["flinkchain_orders", {"lsn": 0x16B3748, "owner": owner}, {"lsn": 0x16B3990, "owner": owner}]],
                {"flinkchain_orders": {"lsn": 0x16B3990, "owner": owner}}),
        "nats": ([["orders.eu", 101, 251], ["orders.us", 7, 8]], {"orders.eu": 251, "orders.us": 8, "orders.asia": 40}),
        "delta": ([["versions", 3, 6]], {"versions": 6}),
        "sql": ([["rows", 120, 480]], None),
        "files": ([[f"/in/orders/part-{k}.json", 0, [4096, 1735725600000000000]] for k in range(3)], None),
    }
    for chain in sources["chains"]:
        key = chain["id"]
        read, splits = reads[key]
        op = {"node_id": chain["operators"][0]["id"], "key": key, "name": key, "subtask": 0, "records_in": 0,
              "records_out": 10, "side_outputs": {}, "time_ms": 1.0, "watermark": None}
        store.record_attempt({
            "pipeline": "orders", "dag_id": DAG, "run_id": SOURCES_RUN, "chain": key, "attempt": 1,
            "state": "success", "started_at": "2024-11-03T10:00:00Z", "ended_at": "2024-11-03T10:00:01Z",
            "operators": [op], "outputs": [],
            "stream": {"chain": key, "read": {key: read}, "sinks": {},
                       "sources": {key: {"splits": splits} if splits else {"value": 480} if key == "sql" else {}},
                       "operators": {key: {"chain": key, "parallelism": 1, "stateful": False, "bytes": 0,
                                           "written": 0, "watermark": None}}}}, try_number=1)
    store.finish_run(DAG, SOURCES_RUN, ended_at="2024-11-03T10:01:00Z")


def sources_plan() -> dict:
    """Five chains, each one source of a kind (the plan names its connector)."""
    connectors = {"cdc": "PostgresCdcSource", "nats": "NatsJetStreamSource", "delta": "DeltaSource",
                  "sql": "SqlSource", "files": "FileSource"}
    chains = []
    for number, (key, connector) in enumerate(connectors.items(), start=1):
        op = {"id": number, "key": key, "name": key, "uid": None, "kind": "source", "parallelism": 1,
              "chaining_strategy": "ALWAYS", "connector": connector}
        if key == "sql":
            op["incremental_column"] = "order_id"
        operators = [op]
        if key == "files":  # an operator of a long kind after it
            operators.append({"id": 10, "key": "stamp", "name": "stamp", "uid": None, "kind": "timestamps_and_watermarks",
                              "parallelism": 1, "chaining_strategy": "ALWAYS"})
        chains.append({"id": key, "name": key, "parallelism": 1, "slot_sharing_group": "default",
                       "in_edges": [], "out_edges": [], "operators": operators})
    return {"pipeline": "orders", "strategy": "flink", "runtime_mode": "streaming", "object_reuse": False,
            "chains": chains, "edges": [], "chained_edges": [
                {"id": "files__stamp", "chain": "files", "source_operator": "files", "target_operator": "stamp",
                 "output_tag": None, "selected_names": []}]}


def stream_metrics(run_id: str, chain: str, drained: bool) -> dict:
    """A stream run's metrics document: the runtime's `stream` entry per chain; watermarks are
    epoch times, or MAX in the drain's snapshots, whose by_customer chain got no record (its
    operators' gauges keep the event time reached before the drain's MAX, as the runtime notes)."""
    from tests.store.sample import metrics

    doc = metrics(dag_id=DAG, run_id=run_id, chain=chain)
    mark = MAX_WATERMARK if drained else SLICE_WATERMARK
    for op in doc["operators"]:
        if chain == "by_customer":
            op["watermark"] = SLICE_WATERMARK
            if drained:  # the drain fires what was pending: nothing came in
                op["records_in"], op["time_ms"] = 0, 0.0
    # The slice reads a file of a monitored directory; the drain's document, as an unbounded
    # source's, a position range of one split (the other split had nothing new).
    read = [["ORDERS", 101, 250]] if drained else [["/in/orders/part-1.json", 0, [4096, 1735725600000000000]]]
    sources = {"read_orders": {"splits": {"ORDERS": 250, "ORDERS.audit": 40}}} if drained else {}
    doc["stream"] = {"chain": chain, "read": {"read_orders": read} if chain == "read_orders" else {},
                     "sources": sources if chain == "read_orders" else {}, "sinks": {},
                     "operators": {op["key"]: {"chain": chain, "parallelism": 3, "stateful": True, "bytes": 2048,
                                               "written": 2048, "max_parallelism": 128,
                                               "watermark": mark if chain == "by_customer" else None}
                                   for op in doc["operators"] if op["subtask"] == 0}}
    return doc


class UiStack:
    """`airflow api-server` on a free loopback port; `base` is its URL."""

    def __init__(self, home: Path, env: dict):
        dags = home / "ui-dags"
        dags.mkdir(exist_ok=True)
        (dags / "flinkchain_ui_dags.py").write_text(DAG_FILE)
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.env = {
            **env,
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__API__BASE_URL": self.base,
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
            # SimpleAuthManager plus one DAG-level rule (the "outsider" may not read orders_dag).
            "AIRFLOW__CORE__AUTH_MANAGER": "tests.plugin.dag_level_auth.DagLevelSimpleAuthManager",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])),
        }
        _airflow(self.env, "dags", "reserialize")
        self.log_path = home / "ui-api-server.log"
        self.log = self.log_path.open("w")
        exe = str(Path(sys.executable).parent / "airflow")
        self.proc = subprocess.Popen([exe, "api-server", "--port", str(self.port)], env=self.env,
                                     stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self._wait_until_serving()

    def _wait_until_serving(self, timeout: float = 180) -> None:
        import urllib.request

        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                with urllib.request.urlopen(f"{self.base}/api/v2/monitor/health", timeout=5):
                    return
            except OSError:
                time.sleep(1)
        self.stop()
        raise AssertionError("the api-server did not start:\n" + self.log_path.read_text()[-4000:])

    def trigger_runs(self, token: str) -> None:
        """The DAG runs of RUNS, through Airflow's REST API (queued: no scheduler runs them)."""
        for run_id in RUNS:
            self.trigger_run(token, run_id)

    def trigger_run(self, token: str, run_id: str) -> None:
        """A DAG run of orders_dag through Airflow's REST API (queued: no scheduler runs it)."""
        import json
        import urllib.request

        request = urllib.request.Request(
            f"{self.base}/api/v2/dags/{DAG}/dagRuns", method="POST",
            data=json.dumps({"dag_run_id": run_id, "logical_date": None}).encode(),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as answer:
            assert answer.status == 200, answer.read()

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=30)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.log.close()
