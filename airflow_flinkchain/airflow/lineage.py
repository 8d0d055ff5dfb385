"""OpenLineage for a chain task: what `ChainSubmitOperator.get_openlineage_facets_*`
return to apache-airflow-providers-openlineage.

Inputs and outputs are the chain's source and sink assets (`assets.py`), named
by OpenLineage's dataset naming (namespace + name) from their asset URIs; typed
sources/sinks carry a schema facet, committed sinks an output-statistics facet
(records written); the job gets a `flinkchain_chain` facet listing the chain's
operators. In a stream run the sinks are the outputs of the commit task instead
(`commit_lineage`): published there, each with a `flinkchain_publication` facet naming
the run's part files and checkpoint. Imported only by those methods, which only the
provider calls: without the provider nothing here is loaded.
"""

from __future__ import annotations

import urllib.parse
from typing import Any, Optional

import attr
from openlineage.client.generated.base import JobFacet, OutputDatasetFacet

from airflow_flinkchain.airflow.assets import AssetRef

#: Schema of the job facet (a custom facet: documented in docs/data-awareness.md).
FACET_SCHEMA_URL = "https://github.com/airflow-flinkchain/airflow-flinkchain/docs/data-awareness.md#flinkchain_chain"
JOB_FACET = "flinkchain_chain"
PUBLICATION_FACET = "flinkchain_publication"
PUBLICATION_SCHEMA_URL = ("https://github.com/airflow-flinkchain/airflow-flinkchain/docs/data-awareness.md"
                          "#flinkchain_publication")
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


@attr.define
class FlinkChainPublicationFacet(OutputDatasetFacet):
    """Where a stream run published a sink's output: the sink's directory, the run's part
    files there, and the checkpoint that committed them."""

    path: str
    files: list = attr.field(factory=list)
    checkpoint: int = 0
    seq: int = 0

    @staticmethod
    def _get_schema() -> str:
        return PUBLICATION_SCHEMA_URL


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
    if scheme == "iceberg" and len(parts) > 1:  # a catalog's table: namespace the catalog, name ns.table
        return f"iceberg://{u.netloc}", ".".join(parts)
    if scheme == "sqlite" and len(parts) > 1:
        return f"sqlite://{path.rsplit('/', 1)[0]}", parts[-1]
    return f"{scheme}://{u.netloc}", path or "/"


def operator_lineage(op: Any, summary: Optional[dict], failed: bool = False):
    """The OperatorLineage of a chain task: on start (`summary` None), complete or failure."""
    from airflow.providers.common.compat.openlineage.facet import Dataset, OutputStatisticsOutputDatasetFacet
    from airflow.providers.openlineage.extractors import OperatorLineage

    written = _records_by_sink(summary) if summary and not failed else {}

    def dataset(ref: AssetRef) -> Any:
        namespace, name = dataset_name(ref.uri)
        ds = Dataset(namespace=namespace, name=name, facets=_schema_facets(ref))
        if ref.operator_key in written:
            ds = _as_output(ds, {"outputStatistics": OutputStatisticsOutputDatasetFacet(
                rowCount=written[ref.operator_key])})
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


def commit_lineage(op: Any, summary: Optional[dict]):
    """The OperatorLineage of a stream run's commit task: its outputs are the pipeline's sinks;
    on completion (`summary`: the commit's result) each names what the run published."""
    from airflow.providers.common.compat.openlineage.facet import Dataset, OutputStatisticsOutputDatasetFacet
    from airflow.providers.openlineage.extractors import OperatorLineage

    published = (summary or {}).get("sinks") or {}
    outputs = []
    for ref in op.asset_refs:
        namespace, name = dataset_name(ref.uri)
        ds = Dataset(namespace=namespace, name=name, facets=_schema_facets(ref))
        sink = published.get(ref.operator_key)
        if sink is not None:
            ds = _as_output(ds, {
                "outputStatistics": OutputStatisticsOutputDatasetFacet(rowCount=sink["records"],
                                                                       fileCount=len(sink["files"])),
                PUBLICATION_FACET: FlinkChainPublicationFacet(path=sink["path"], files=list(sink["files"]),
                                                              checkpoint=sink["checkpoint"], seq=sink["seq"],
                                                              producer=PRODUCER)})
        outputs.append(ds)
    return OperatorLineage(inputs=[], outputs=outputs)


def _schema_facets(ref: AssetRef) -> dict:
    from airflow.providers.common.compat.openlineage.facet import SchemaDatasetFacet, SchemaDatasetFacetFields

    if not ref.fields:
        return {}
    return {"schema": SchemaDatasetFacet(fields=[SchemaDatasetFacetFields(name=n, type=t) for n, t in ref.fields])}


def _records_by_sink(summary: dict) -> dict[str, int]:
    return {o["sink"]: int(o.get("records") or 0) for o in summary.get("outputs") or [] if "sink" in o}


def _as_output(ds: Any, output_facets: dict) -> Any:
    """The provider turns plain Datasets into OutputDatasets; one with output facets is given as such."""
    from airflow.providers.common.compat.openlineage.facet import OutputDataset

    return OutputDataset(namespace=ds.namespace, name=ds.name, facets=ds.facets, outputFacets=output_facets)
