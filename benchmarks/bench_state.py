"""State section of `make bench`: the keyed state backends at many keys.

One keyed operator (a KeyedProcessFunction counting records per key in a ValueState, STREAMING,
emitting nothing) runs in its OperatorChain inside a fresh Python process per measurement, fed
N records with N distinct keys from a generator (no input held in memory). Then:

  ingest    records/s and the process's peak RSS (VmHWM) while the state fills
  snapshot  the portable snapshot cut key group by key group (`snapshot(key_groups=[kg])`),
            each group pickled to its own file: seconds, total bytes
  touch     one record of an existing key, then `changed_key_groups()`: the groups an
            incremental snapshot rewrites (expected: exactly one), its bytes and seconds
  restore   a fresh operator restores from the files, one group at a time: seconds and the
            peak RSS of the restore alone (Linux clear_refs resets the mark)

Runs: the heap and the RocksDB backend at a size both hold (HEAP_KEYS), and RocksDB at
ROCKSDB_KEYS (5M) whose worker memory stays bounded by RocksDB's caches, not by the key count.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
import time

from airflow_flinkchain.functions import KeyedProcessFunction
from airflow_flinkchain.state import ValueStateDescriptor
from benchmarks.bench_common import REPO, proc_bytes

HEAP_KEYS = 1_000_000
ROCKSDB_KEYS = 5_000_000
COUNT = ValueStateDescriptor("count")


class CountPerKey(KeyedProcessFunction):
    def open(self, runtime_context):
        self.count = runtime_context.get_state(COUNT)

    def process_element(self, value, ctx):
        self.count.update((self.count.value() or 0) + 1)


def record_key(r):
    return r[0]


def _reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass


def _peak() -> int:
    return proc_bytes("/proc/self/status", "VmHWM")


def _operator(kind: str):
    from airflow_flinkchain import StreamPipeline
    from airflow_flinkchain.runtime.core.memory import MemoryWriters
    from airflow_flinkchain.runtime.core.operator_chain import OperatorChain

    p = StreamPipeline("state_bench", runtime_mode="streaming").set_state_backend(kind)
    p.from_collection([]).key_by(record_key).process(CountPerKey()).name("count").collect("out")
    job = p.plan()
    node = next(n for n in job.stream_graph.nodes if n.name == "count")
    writers = MemoryWriters()
    chain = OperatorChain(job, job.chain_of(node.id).id, 0, "bench", writers.record_writer_factory,
                          writers.sink_writer_factory)
    chain._setup()
    for op in reversed(chain.all_operators):
        op.open()
    return chain, chain.head


def _du(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _s, fs in os.walk(path) for f in fs)


def child(kind: str, keys: int, snap_dir: str) -> dict:
    """One measurement in this (fresh) process."""
    chain, op = _operator(kind)
    backend = op.state_backend
    process = op.handler(False)
    _reset_peak()
    t = time.perf_counter()
    for i in range(keys):
        process((f"user{i:09d}", i))
    ingest = time.perf_counter() - t
    result = {"backend": kind, "keys": keys, "ingest_seconds": round(ingest, 2),
              "ingest_records_per_s": round(keys / ingest), "ingest_peak_rss_bytes": _peak()}
    if kind == "rocksdb":
        result["db_bytes_on_disk"] = _du(backend.directory)

    def write(kg: int) -> int:
        data = pickle.dumps(backend.snapshot(key_groups=[kg]), protocol=5)
        with open(os.path.join(snap_dir, f"kg-{kg}.pkl"), "wb") as fh:
            fh.write(data)
        return len(data)

    t = time.perf_counter()
    sizes = {kg: write(kg) for kg in backend.key_group_range}
    result["snapshot_seconds"] = round(time.perf_counter() - t, 2)
    result["snapshot_bytes"] = sum(sizes.values())
    result["snapshot_files"] = len(sizes)
    result["snapshot_peak_rss_bytes"] = _peak()

    touched = "user000000007"
    process((touched, 0))
    changed = sorted(backend.changed_key_groups())
    t = time.perf_counter()
    rewritten = {kg: write(kg) for kg in changed}
    result["touch_one_key"] = {
        "key_group": backend.key_group_of(touched), "changed_key_groups": changed,
        "rewritten_files": len(rewritten), "rewritten_bytes": sum(rewritten.values()),
        "seconds": round(time.perf_counter() - t, 3), "unchanged_files_kept": len(sizes) - len(rewritten)}
    op.dispose()
    del chain, op, backend, process

    chain, op = _operator(kind)
    backend = op.state_backend
    _reset_peak()

    def snapshots():
        for kg in backend.key_group_range:
            with open(os.path.join(snap_dir, f"kg-{kg}.pkl"), "rb") as fh:
                yield pickle.load(fh)

    t = time.perf_counter()
    backend.restore(snapshots())
    result["restore_seconds"] = round(time.perf_counter() - t, 2)
    result["restore_peak_rss_bytes"] = _peak()
    state = backend.get_state(COUNT)
    checks = {}
    for k in (touched, "user000000000", f"user{keys - 1:09d}"):
        backend.set_current_key(k)
        checks[k] = state.value()
    result["restored_values"] = checks
    result["restored_ok"] = checks == {touched: 2, "user000000000": 1, f"user{keys - 1:09d}": 1}
    op.dispose()
    return result


def _run_child(kind: str, keys: int, tmp: str) -> dict:
    snap_dir = os.path.join(tmp, f"state-{kind}-{keys}")
    os.makedirs(snap_dir, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.run([sys.executable, "-m", "benchmarks.bench_state", kind, str(keys), snap_dir],
                          capture_output=True, text=True, env=env, cwd=REPO)
    shutil.rmtree(snap_dir, ignore_errors=True)
    if proc.returncode != 0:
        raise RuntimeError(f"state bench {kind} {keys}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_state(tmp: str, heap_keys: int = HEAP_KEYS, rocksdb_keys: int = ROCKSDB_KEYS) -> dict:
    runs = [_run_child("hashmap", heap_keys, tmp), _run_child("rocksdb", heap_keys, tmp),
            _run_child("rocksdb", rocksdb_keys, tmp)]
    heap, rocks_small, rocks_big = runs
    return {
        "repeat": 1, "runs": runs, "heap_keys": heap_keys, "rocksdb_keys": rocksdb_keys,
        "peak_rss_rocksdb_over_heap_same_keys": round(rocks_small["ingest_peak_rss_bytes"]
                                                      / heap["ingest_peak_rss_bytes"], 2),
        "rocksdb_rss_growth_small_to_big": round(rocks_big["ingest_peak_rss_bytes"]
                                                 / rocks_small["ingest_peak_rss_bytes"], 2),
        "incremental_rewrites_one_group": all(r["touch_one_key"]["rewritten_files"] == 1 for r in runs),
        "restored_ok": all(r["restored_ok"] for r in runs),
    }


def summary_lines(st: dict) -> list:
    lines = []
    for r in st["runs"]:
        lines.append(f"state {r['backend']:>8} {r['keys']:>9,} keys: {r['ingest_records_per_s']:,}/s, "
                     f"peak rss {r['ingest_peak_rss_bytes'] / 2**20:.0f} MiB, snapshot "
                     f"{r['snapshot_bytes'] / 2**20:.0f} MiB in {r['snapshot_seconds']}s, restore "
                     f"{r['restore_seconds']}s (rss {r['restore_peak_rss_bytes'] / 2**20:.0f} MiB), one key touched "
                     f"-> {r['touch_one_key']['rewritten_files']} of {r['snapshot_files']} groups rewritten")
    return lines


if __name__ == "__main__":
    print(json.dumps(child(sys.argv[1], int(sys.argv[2]), sys.argv[3])))
