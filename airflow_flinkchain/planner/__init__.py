"""Chaining planner: StreamGraph → JobGraph of chains (pure Python)."""

from airflow_flinkchain.graph.errors import PlanningError
from airflow_flinkchain.planner.chaining import build_job_graph, topological_node_order
from airflow_flinkchain.planner.strategies import ChainingPolicy, FlinkChaining, NoChaining, resolve_strategy

__all__ = [
    "PlanningError",
    "build_job_graph",
    "topological_node_order",
    "ChainingPolicy",
    "FlinkChaining",
    "NoChaining",
    "resolve_strategy",
]
