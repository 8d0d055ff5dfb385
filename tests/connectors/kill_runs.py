"""Stream runs of a published sink SIGKILLed and retried (the connector fault tests' loop).

`where`: "running" kills the run process while it reads (at a record chosen at random; the
same run is retried), "before-..." / "after-..." kill it after the commit point just before
or just after the external commit (`patch`: the function making it), and the roll-forward
of the next run's begin (or a retried commit step) publishes, twice to show it is idempotent.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.runtime.exchange.checkpoints import CheckpointArea
from airflow_flinkchain.runtime.stream_run import publish_sinks
from tests.conformance_cases import first_field, sum_values, watermark_strategy, window_assigner
from tests.streamruns.cases import FailOn, slices
from tests.streamruns.partitioned_log import PartitionedLog, append

REPO = Path(__file__).resolve().parents[2]


def as_row(r: tuple) -> dict:
    return {"key": r[0], "value": r[1], "ts": r[2]}


def window_sums(name: str, log: str, ckpt, sink=None, fail=None) -> StreamPipeline:
    """Tumbling-window sums of the partitioned log, as rows into `sink` (None: a collect sink
    only), the connector tests' pipeline."""
    p = StreamPipeline(name, runtime_mode="streaming", checkpoint_dir=ckpt)
    s = p.from_source(PartitionedLog(directory=log), name="log").uid("log").set_parallelism(1)
    s = s.assign_timestamps_and_watermarks(watermark_strategy({"bounded": 500})).uid("wm").set_parallelism(1)
    if fail is not None:
        s = s.map(fail).name("fail").set_parallelism(1)
    w = s.key_by(first_field).window(window_assigner(["tumbling", 1000])).reduce(sum_values).uid("win")
    w = w.set_parallelism(2)
    if sink is not None:
        w.map(as_row).name("row").set_parallelism(2).sink_to(sink, name="windows")
    w.collect("windows")
    return p

KILL_SCRIPT = """
import importlib, os, signal, sys
sys.path.insert(0, {repo!r})
where, patch = {where!r}, {patch!r}
if where != "running":
    owner = importlib.import_module(patch[0])
    *path, name = patch[1].split(".")
    for part in path:
        owner = getattr(owner, part)
    real = getattr(owner, name)
    def killing(*args, **kwargs):
        if where.startswith("before"):
            os.kill(os.getpid(), signal.SIGKILL)
        real(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)
    setattr(owner, name, killing)
from {module} import pipeline
from tests.streamruns.cases import FailOn
pipeline(*{args!r}, fail=FailOn({marker!r}, {value!r}, kill=True)).execute_local(run_id={run_id!r}, drain={drain!r})
"""


def runs_killed_and_retried(where: str, patch: tuple, module: str, pipeline, args: tuple, log: str, ckpt: str,
                            marker: Path, records: list, parts: int = 3) -> None:
    """`parts` runs over slices of `records` appended to `log` (the last one drains), each
    killed at `where` and finished; `pipeline(*args, fail=...)` (importable from `module`)
    builds the pipeline in the killed process and here."""
    rng = random.Random(where)
    fail = FailOn(str(marker), -1, kill=True)
    pieces = slices(records, parts)
    for k, part in enumerate(pieces):
        drain = k == len(pieces) - 1
        append(log, "p0", part)
        value = rng.choice(part)[1] if where == "running" else -1
        marker.write_text("")
        script = KILL_SCRIPT.format(repo=str(REPO), where=where, patch=patch, module=module, args=tuple(args),
                                    marker=str(marker), value=value, run_id=f"r{k}", drain=drain)
        proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, timeout=300)
        assert proc.returncode == -9, proc.stderr.decode()[-2000:]
        marker.unlink()
        if where == "running":  # nothing committed: the same run again
            pipeline(*args, fail=fail).execute_local(run_id=f"r{k}", drain=drain)
        else:  # killed after the commit point: the roll-forward the next begin (or commit retry) does
            latest = json.loads((Path(ckpt) / "_latest.json").read_text())
            assert latest["run_id"] == f"r{k}"
            publish_sinks(CheckpointArea(ckpt), latest["checkpoint"])
            publish_sinks(CheckpointArea(ckpt), latest["checkpoint"])  # once more: nothing happens
