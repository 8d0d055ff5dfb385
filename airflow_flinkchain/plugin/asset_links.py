"""Links from the Chains tab's sources and sinks to Airflow's asset pages."""

from __future__ import annotations

import logging
from typing import Optional

from airflow_flinkchain.airflow.compat import asset_ids

log = logging.getLogger(__name__)


def add_asset_links(plan: Optional[dict]) -> Optional[dict]:
    """Gives each source/sink operator of a stored plan `links` to its asset's page
    (`[{"href": "assets/{id}", "text": name}]`, relative to the Airflow root), from the
    plan's `assets` (recorded by the setup task). An asset Airflow does not know yet
    (no task has declared it since the DAG was parsed) gets no link."""
    if not plan or not plan.get("assets"):
        return plan
    try:
        ids = asset_ids([(a["name"], a["uri"]) for a in plan["assets"]])
    except Exception:  # the tab still shows the plan when the metadata DB cannot answer
        log.warning("flinkchain: could not read asset ids", exc_info=True)
        return plan
    links: dict[str, list] = {}
    for a in plan["assets"]:
        id_ = ids.get((a["name"], a["uri"]))
        if id_ is not None:
            links.setdefault(a["operator"], []).append({"href": f"assets/{id_}", "text": a["name"]})
    for chain in plan.get("chains", []):
        for op in chain.get("operators", []):
            if op.get("key") in links:
                op["links"] = links[op["key"]]
    return plan
