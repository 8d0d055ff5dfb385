"""A plan as shipped to the chain jobs: the pickled JobGraph, with the records of
its collection sources written next to it as data (`runtime.connectors.collection`)."""

from __future__ import annotations

from typing import Any

from airflow_flinkchain.runtime.connectors.collection import CollectionShipper
from airflow_flinkchain.runtime.core.serialize import dumps_plan, loads_plan
from airflow_flinkchain.runtime.exchange.layout import Location


def ship_plan(job_graph: Any, data_dir: Location) -> bytes:
    """The plan's bytes; collection records are written under `data_dir` (once)."""
    return dumps_plan(job_graph, substitute=CollectionShipper(data_dir))


def data_dir_of(plan_path: str) -> Location:
    plan = Location(plan_path)
    return plan.sibling(plan.name + ".data")


def dump_plan(job_graph: Any, path: str) -> None:
    """Write the plan to `path` (a local path or a pyarrow.fs URI), atomically; its
    collections go to `{path}.data/`."""
    Location(path).write_bytes(ship_plan(job_graph, data_dir_of(path)))


def load_plan(path: str) -> Any:
    return loads_plan(Location(path).read_bytes())
