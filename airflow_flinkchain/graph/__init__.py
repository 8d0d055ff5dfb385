"""StreamGraph: model, transformations, builder, planning errors (pure Python)."""

from airflow_flinkchain.graph.errors import PlanningError, PlanningWarning

__all__ = ["PlanningError", "PlanningWarning"]
