"""Example: a DAG scheduled on a pipeline's sink.

The orders pipeline's `revenue_per_region` table is an Airflow Asset, an outlet
of the chain task that writes it. This DAG runs each time that task commits the
table, and reads the rows of the run that wrote them: the asset event's extra
names the run (`run_key`, the table's `_run_id`) and how many records it wrote.
"""

from __future__ import annotations

import json
import os

from airflow.sdk import DAG, task

import sample_data
from airflow_flinkchain.airflow.assets import asset_of
from flinkchain_orders import revenue_table

REVENUE = asset_of(revenue_table(sample_data.sqlite_url()))


@task
def report(triggering_asset_events=None) -> dict:
    """The regions of each triggering run, by revenue, into reports/<run_key>.json."""
    import sqlalchemy as sa

    written = {}
    engine = sa.create_engine(sample_data.sqlite_url())
    for event in triggering_asset_events[REVENUE]:
        extra = dict(event.extra)
        with engine.connect() as con:
            rows = con.execute(sa.text("select region, revenue from revenue_per_region where _run_id = :run "
                                       "and _dag_id = :dag order by revenue desc"),
                               {"run": extra["run_key"], "dag": event.source_dag_id}).fetchall()
        doc = {"event": extra, "source_dag_id": event.source_dag_id,
               "regions": [{"region": r[0], "revenue": r[1]} for r in rows]}
        out = os.path.join(sample_data.output_dir(), "reports", f"{extra['run_key']}.json")
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, "w") as f:
            json.dump(doc, f, indent=2)
        written[out] = len(rows)
    return written


with DAG("flinkchain_revenue_report", schedule=[REVENUE], doc_md=__doc__,
         **sample_data.example_dag_args("assets")) as dag:
    report()
