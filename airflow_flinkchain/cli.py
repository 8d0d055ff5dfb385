"""`flinkchain plan DAG_FILE [--format text|json|dot|mermaid] [--strategy flink|none]` (reads the
footers of the Parquet files of sources that declare no schema, where they exist);
`flinkchain checkpoints CHECKPOINT_DIR [--verify [N]] [--restore N] [--json]`.

`checkpoints` lists the checkpoints of a stream's `checkpoint_dir` with their runs (and
the runs in progress); `--verify` reads every file of one checkpoint (default: the
latest), exit status 1 when one is missing or damaged, naming it; `--restore N` makes
checkpoint N the latest again (docs/stream-runs.md, "Damaged checkpoints").

Imports the DAG file the way Airflow's DAG processor would (its folder on
sys.path) but starts nothing: no scheduler, no Spark. Pipelines are found
among the module's globals and among every StreamPipeline created during
the import (so one built inside `with DAG(...)` without a global name is
found too). Exit status: 0 planned, 1 a pipeline cannot be planned (the
planner's message on stderr), 2 the file cannot be imported or has no
pipeline.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import traceback
import uuid
import warnings
from pathlib import Path
from typing import Optional, Sequence

from airflow_flinkchain.api.pipeline import StreamPipeline
from airflow_flinkchain.graph.errors import PlanningError, PlanningWarning
from airflow_flinkchain.planner.formats import FORMATS, render

EXIT_OK, EXIT_PLANNING, EXIT_USAGE = 0, 1, 2


class DagFileError(Exception):
    """The DAG file could not be imported (message says why)."""


def load_pipelines(path: Path) -> list[StreamPipeline]:
    """Import `path` and return its pipelines in creation order (globals not
    created during this import come last). PlanningError raised by the file
    itself (e.g. a select() without split()) propagates unchanged."""
    if not path.is_file():
        raise DagFileError(f"no such file: {path}")
    module_name = f"flinkchain_dag_{uuid.uuid4().hex}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise DagFileError(f"cannot import {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    folder = str(path.resolve().parent)
    sys.path.insert(0, folder)
    sys.modules[module_name] = module
    try:
        with StreamPipeline.recording() as created:
            spec.loader.exec_module(module)
    except PlanningError:
        raise
    except Exception as exc:
        detail = "".join(traceback.format_exception(exc)[-3:]).rstrip()
        raise DagFileError(f"importing {path} failed:\n{detail}") from exc
    finally:
        sys.modules.pop(module_name, None)
        if folder in sys.path:
            sys.path.remove(folder)
    found: dict[int, StreamPipeline] = {id(p): p for p in created}
    for value in vars(module).values():
        if isinstance(value, StreamPipeline):
            found.setdefault(id(value), value)
    return list(found.values())


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="flinkchain", description="Flink-style operator chaining for Airflow.")
    sub = parser.add_subparsers(dest="command", required=True)
    plan = sub.add_parser("plan", help="print the chains and edges of every pipeline in a DAG file")
    plan.add_argument("dag_file", type=Path)
    plan.add_argument("--format", "-f", choices=FORMATS, default="text")
    plan.add_argument("--strategy", "-s", choices=("flink", "none"), default="flink",
                      help="chaining strategy: Flink's rules (default) or none (every operator alone)")
    chk = sub.add_parser("checkpoints", help="list the checkpoints of a stream's checkpoint_dir and their runs")
    chk.add_argument("checkpoint_dir")
    chk.add_argument("--verify", nargs="?", type=int, const=-1, default=None, metavar="N",
                     help="read every file of checkpoint N (default: the latest); exit 1 naming a bad file")
    chk.add_argument("--restore", type=int, metavar="N",
                     help="make checkpoint N the latest again: later checkpoints and the sink files their "
                          "runs published are deleted (the next run reads their input again)")
    chk.add_argument("--json", action="store_true", help="print the listing as JSON")
    return parser


def checkpoints_command(checkpoint_dir: str, verify: Optional[int], restore: Optional[int], as_json: bool) -> int:
    import json

    from airflow_flinkchain.runtime.exchange.checkpoint_check import (list_checkpoints, restore_checkpoint,
                                                                      verify_checkpoint)
    from airflow_flinkchain.runtime.exchange.checkpoints import CheckpointArea, CheckpointFileError

    area = CheckpointArea(checkpoint_dir)
    if not area.root.exists():
        print(f"flinkchain: no checkpoint_dir at {checkpoint_dir}", file=sys.stderr)
        return EXIT_USAGE
    try:
        if restore is not None:
            done = restore_checkpoint(area, restore)
            print(f"{area.checkpoint_name(restore)} is the latest checkpoint (run {done['pointer']['run_id']!r}, "
                  f"seq {done['pointer']['seq']})")
            for deleted in done["deleted"]:
                print(f"deleted {deleted}")
            return EXIT_OK
        listing = list_checkpoints(area)
        if verify is not None:
            n = verify if verify >= 0 else (listing["latest"] or {}).get("checkpoint")
            if n is None:
                print("flinkchain: no latest checkpoint to verify; give its number", file=sys.stderr)
                return EXIT_USAGE
            verify_checkpoint(area, n, read_snapshots=True)
            print(f"{area.checkpoint_name(n)}: every file read")
            return EXIT_OK
    except CheckpointFileError as exc:
        print(f"flinkchain: {exc}", file=sys.stderr)
        return EXIT_PLANNING
    if as_json:
        print(json.dumps(listing, indent=1, default=str))
        return EXIT_OK
    print(_checkpoint_listing(area, listing))
    return EXIT_PLANNING if listing["pointer_error"] else EXIT_OK


def _checkpoint_listing(area, listing: dict) -> str:
    lines = [f"checkpoint_dir {area.root.uri}"]
    if listing["pointer_error"]:
        lines.append(f"pointer: {listing['pointer_error']}")
    elif listing["latest"] is None:
        lines.append("no committed checkpoint yet")
    for c in listing["checkpoints"]:
        name = area.checkpoint_name(c["checkpoint"])
        if c["error"]:
            lines.append(f"{name}  DAMAGED: {c['error']}")
            continue
        base = area.checkpoint_name(c["base"]) if c["base"] is not None else "none"
        stream = c["stream_id"] or "none (begun before stream identities)"
        lines.append(f"{name}  run {c['run_id']}  seq {c['seq']}  base {base}  stream {stream}  "
                     f"committed {c['committed_at']}"
                     + ("  drained" if c["drained"] else "") + ("  LATEST" if c["latest"] else ""))
    for r in listing["runs"]:
        base = area.checkpoint_name(r["base"]) if r["base"] is not None else "none"
        lines.append(f"run in progress: {r['run_id']} (on {base})")
    if listing["history"]:
        lines.append("committed runs: " + ", ".join(f"{run} -> {area.checkpoint_name(n)}"
                                                    for run, n in listing["history"]))
    return "\n".join(lines)


def plan_command(path: Path, fmt: str, strategy: str) -> int:
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            pipelines = load_pipelines(path)
            plans, failed = [], False
            for p in pipelines:
                try:
                    plans.append(p.plan(strategy))
                except PlanningError as exc:
                    print(f"flinkchain: pipeline {p.name!r} cannot be planned: {exc}", file=sys.stderr)
                    failed = True
    except PlanningError as exc:
        print(f"flinkchain: {path}: {exc}", file=sys.stderr)
        return EXIT_PLANNING
    except DagFileError as exc:
        print(f"flinkchain: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for w in caught:  # other warnings (e.g. Airflow's own) are not ours to print
        if issubclass(w.category, PlanningWarning):
            print(f"flinkchain: warning: {w.message}", file=sys.stderr)
    if failed:
        return EXIT_PLANNING
    if not pipelines:
        print(f"flinkchain: no StreamPipeline found in {path}", file=sys.stderr)
        return EXIT_USAGE
    from airflow_flinkchain.runtime.connectors.inferred_types import with_inferred_types

    # the schemas of undeclared Parquet sources whose files exist (templated paths: when a run starts)
    print(render([with_inferred_types(plan) for plan in plans], fmt))
    return EXIT_OK


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "plan":
        return plan_command(args.dag_file, args.format, args.strategy)
    if args.command == "checkpoints":
        return checkpoints_command(args.checkpoint_dir, args.verify, args.restore, args.json)
    return EXIT_USAGE  # pragma: no cover - argparse requires a command


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
