"""Publishing a committed checkpoint's sink outputs (docs/stream-runs.md, "Sinks"): after a
stream run's commit point, or by the next run's begin when the commit was interrupted.

File sinks: the staged parts are moved onto names holding the run's sequence number and the
stream's identity (`checkpoints.published_part_name`). Published sinks (SQL, Delta, Iceberg):
the staged records are handed to the sink's publisher with a `Publication` naming the
stream, so a repeated publication of a checkpoint writes nothing and another stream's
records never match. A pending publication uses the pipeline's current settings of a sink of
the same name, type and target (a fixed URL), else those recorded in the checkpoint.
"""

from __future__ import annotations

from typing import Optional

from airflow_flinkchain.graph.model import OperatorKind
from airflow_flinkchain.runtime.connectors.published import (Publication, PublicationError, publication_target,
                                                            publish_staged, publisher_of, read_descriptor,
                                                            same_target)
from airflow_flinkchain.runtime.exchange.checkpoints import (MANIFEST, CheckpointArea, chain_dir, published_part_name,
                                                             sink_dir, stream_id_of)
from airflow_flinkchain.runtime.exchange.layout import Location


def current_sinks(job) -> dict:
    """{sink key: descriptor} of the pipeline's published sinks as the DAG file has them now: a
    pending publication uses these settings (a fixed URL, say) for a sink of the same name,
    type and target."""
    return {n.key: n.function for n in job.stream_graph.nodes
            if n.kind is OperatorKind.SINK and publisher_of(n.function) is not None}


def publish_sinks(area: CheckpointArea, n: int, current: Optional[dict] = None) -> list[str]:
    """Move the staged parts of checkpoint n's file sinks onto their final names
    (`published_part_name`; done again after an interruption: what was moved is gone);
    hand the staged records of its published sinks to their publishers (which write nothing
    for a checkpoint of the stream they published already), then drop them. `current`: the
    pipeline's published sinks now (`current_sinks`)."""
    chk = area.checkpoint(n)
    if not chk.join(MANIFEST).exists():
        return []
    manifest = area.manifest(n)
    stream_id = stream_id_of(manifest)
    published = []
    for key, sink in manifest["sinks"].items():
        staged = sink_dir(chain_dir(chk, sink["chain"]), key)
        if not staged.exists():
            continue
        if sink.get("publish"):
            _publish_pending(area, manifest, key, staged, (current or {}).get(key))
            staged.delete()
            published.append(sink["target"])
            continue
        target = Location(sink["target"])
        target.makedirs()
        for path in staged.list_files():
            final = target.join(published_part_name(manifest["seq"], path.rsplit("/", 1)[-1], stream_id))
            target.fs.move(path, final.path)
            published.append(final.uri)
        staged.delete()
    return published


def _publish_pending(area: CheckpointArea, manifest: dict, key: str, staged: Location, current) -> dict:
    """One published sink's output of a committed checkpoint, with the sink's current settings
    when the pipeline still has it (same name, type and target), else with those recorded in
    the checkpoint; a failure says which were used and the way out."""
    n = manifest["checkpoint"]
    recorded = read_descriptor(staged)
    use = current if current is not None and same_target(current, recorded) else recorded
    label = f"sink {key!r}"
    try:
        return publish_staged(staged, Publication(manifest["pipeline"], key, n, label, manifest["run_id"],
                                                  stream_id_of(manifest)), use)
    except Exception as exc:
        name = area.checkpoint_name(n)
        if use is current:
            fix = (f"the next run (or a retry of the commit step) publishes it again with the settings of sink "
                   f"{key!r} in the DAG file: fix them there (keeping the sink's name and its target "
                   f"{publication_target(recorded)!r})")
        else:
            back = (f"`flinkchain checkpoints {area.root.uri} --restore {manifest['base']}` to drop {name} (the next "
                    "run reads its input again and publishes it to the pipeline's sinks)"
                    if manifest["base"] is not None else
                    f"reset the stream by deleting checkpoint_dir {area.root.uri}")
            fix = (f"the pipeline has no sink {key!r} of type {type(recorded).__name__} writing to "
                   f"{publication_target(recorded)!r} any more, so the settings recorded in {name} were used: put "
                   f"the sink back under that name and target with working settings, or {back}")
        first_line = (str(exc).splitlines() or [""])[0]
        raise PublicationError(f"{label}: publishing the output of committed checkpoint {name} to "
                               f"{use.describe()} failed ({type(exc).__name__}: {first_line}); {fix}") from exc


def published_name(seq: int, staged_name: str, stream_id: str = "") -> str:
    """The final name of a staged sink part (see `checkpoints.published_part_name`)."""
    return published_part_name(seq, staged_name, stream_id)
