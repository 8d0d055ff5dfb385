"""What a committed stream run published: per file sink its directory, the run's part files
and their records (`stream_run.published_sinks`, in the run's result and the manifest),
what the Airflow commit task announces in its sinks' asset events."""

from __future__ import annotations

import os
import sys

from airflow_flinkchain.runtime.exchange.checkpoints import CheckpointArea

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "dags"))
from flinkchain_stream_runs import click_slices, drop_slice, stream_runs_pipeline  # noqa: E402


def test_each_run_names_the_part_files_it_published(tmp_path):
    where = {"input_dir": str(tmp_path / "in"), "output_dir": str(tmp_path / "out"),
             "checkpoint_dir": str(tmp_path / "ckpt")}
    published = []
    for k, part in enumerate(click_slices(n_slices=2, per_slice=30)):
        drop_slice(where["input_dir"], k, part)
        result = stream_runs_pipeline(**where).execute_local(run_id=f"r{k + 1}", drain=k == 1)
        published.append(result.stream["sinks"])
    for seq, sinks in enumerate(published, start=1):
        assert set(sinks) == {"page_views_json", "sessions_json"}
        for key, sink in sinks.items():
            assert sink["path"] == os.path.join(where["output_dir"], key.removesuffix("_json"))
            assert (sink["seq"], sink["checkpoint"]) == (seq, seq)
            assert all(os.path.basename(f).startswith(f"part-{seq:06d}-") for f in sink["files"])
            lines = sum(1 for f in sink["files"] for line in open(f) if line.strip())
            assert lines == sink["records"], (key, sink)
    assert published[0]["page_views_json"]["files"] and published[1]["sessions_json"]["files"]
    for key in ("page_views_json", "sessions_json"):  # together, the runs' files are the whole directory
        directory = published[0][key]["path"]
        assert sorted(os.path.join(directory, f) for f in os.listdir(directory)) == sorted(
            published[0][key]["files"] + published[1][key]["files"])
    manifest = CheckpointArea(where["checkpoint_dir"]).read_latest()
    assert manifest["seq"] == 2
