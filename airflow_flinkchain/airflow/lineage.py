"""OpenLineage for a chain task: what `ChainSubmitOperator.get_openlineage_facets_*`
return to apache-airflow-providers-openlineage.

Inputs and outputs are the chain's source and sink assets (`assets.py`), named
by OpenLineage's dataset naming (namespace + name) from their asset URIs; typed
sources/sinks carry a schema facet, committed sinks an output-statistics facet
(records written); the job gets a `flinkchain_chain` facet listing the chain's
operators. Imported only by those methods, which only the provider calls: without
the provider nothing here is loaded.
"""

from __future__ import annotations

import urllib.parse
from typing import Any, Optional

import attr
from openlineage.client.generated.base import JobFacet

from airflow_flinkchain.airflow.assets import AssetRef

#: Schema of the job facet (a custom facet: documented in docs/data-awareness.md).
FACET_SCHEMA_URL = "https://github.com/airflow-flinkchain/airflow-flinkchain/docs/data-awareness.md#flinkchain_chain"
JOB_FACET = "flinkchain_chain"
PRODUCER = "https://github.com/airflow-flinkchain/airflow-flinkchain"


@attr.define
class FlinkChainJobFacet(JobFacet):
    """The chain's operators (Flink's chained operators of one JobVertex)."""

    pipeline: str
    chain: str
    parallelism: int
    operators: list = attr.field(factory=list)  # [{"name", "kind", "uid", "parallelism"}]

    @staticmethod
    def _get_schema() -> str:
        return FACET_SCHEMA_URL


def dataset_name(uri: str) -> tuple[str, str]:
    """(namespace, name) of an asset URI, per OpenLineage's dataset naming."""
    u = urllib.parse.urlsplit(uri)
    scheme, path = u.scheme, u.path
    if scheme == "file":
        return ("file" if not u.netloc else f"file://{u.netloc}"), path
    if scheme in ("s3", "gs", "wasbs", "abfss"):
        return f"{scheme}://{u.netloc}", path.lstrip("/")
    parts = [p for p in path.split("/") if p]
    if scheme in ("postgres", "mysql", "mssql", "oracle", "trino") and parts:
        return f"{scheme}://{u.netloc}", ".".join(parts)
    if scheme == "nats" and parts:  # a JetStream stream: namespace the server, name the stream
        return f"nats://{u.netloc}", parts[-1]
    if scheme == "sqlite" and len(parts) > 1:
        return f"sqlite://{path.rsplit('/', 1)[0]}", parts[-1]
    return f"{scheme}://{u.netloc}", path or "/"


def operator_lineage(op: Any, summary: Optional[dict], failed: bool = False):
    """The OperatorLineage of a chain task: on start (`summary` None), complete or failure."""
    from airflow.providers.common.compat.openlineage.facet import (
        Dataset, OutputStatisticsOutputDatasetFacet, SchemaDatasetFacet, SchemaDatasetFacetFields)
    from airflow.providers.openlineage.extractors import OperatorLineage

    written = _records_by_sink(summary) if summary and not failed else {}

    def dataset(ref: AssetRef) -> Any:
        namespace, name = dataset_name(ref.uri)
        facets = {}
        if ref.fields:
            facets["schema"] = SchemaDatasetFacet(
                fields=[SchemaDatasetFacetFields(name=n, type=t) for n, t in ref.fields])
        ds = Dataset(namespace=namespace, name=name, facets=facets)
        if ref.operator_key in written:
            ds = _as_output(ds, OutputStatisticsOutputDatasetFacet(rowCount=written[ref.operator_key]))
        return ds

    refs = op.asset_refs
    spec, pipeline = op.chain_spec, op.pipeline_spec
    facet = FlinkChainJobFacet(
        pipeline=pipeline.pipeline, chain=spec.chain_id, parallelism=spec.parallelism,
        operators=[{"name": o.name, "kind": o.kind, "uid": o.uid, "parallelism": o.parallelism}
                   for o in spec.operators],
        producer=PRODUCER)
    return OperatorLineage(
        inputs=[dataset(r) for r in refs if r.role == "source"],
        outputs=[dataset(r) for r in refs if r.role == "sink"],
        job_facets={JOB_FACET: facet},
    )


def _records_by_sink(summary: dict) -> dict[str, int]:
    return {o["sink"]: int(o.get("records") or 0) for o in summary.get("outputs") or [] if "sink" in o}


def _as_output(ds: Any, stats: Any) -> Any:
    """The provider turns plain Datasets into OutputDatasets; one with output facets is given as such."""
    from airflow.providers.common.compat.openlineage.facet import OutputDataset

    return OutputDataset(namespace=ds.namespace, name=ds.name, facets=ds.facets,
                         outputFacets={"outputStatistics": stats})
