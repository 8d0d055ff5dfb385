"""Airflow's own auth for the plugin: the same dependencies the core REST API
uses, so the auth manager in force (Simple, FAB, Keycloak...) decides.
No token -> 401; a user who may not read the DAG -> 403."""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.auth.managers.models.base_user import BaseUser
from airflow.api_fastapi.core_api.security import GetUserDep, requires_access_dag
from airflow.models.dag import DagModel
from fastapi import Depends

# Reads the dag_id path parameter, like /api/v2/dags/{dag_id}.
can_read_dag = Depends(requires_access_dag(method="GET"))

__all__ = ["GetUserDep", "can_read_dag", "readable_dag_ids"]


def readable_dag_ids(user: BaseUser, dag_ids: Iterable[str]) -> set[str]:
    """The DAGs of `dag_ids` that `user` may read (the same check as can_read_dag,
    team-aware; DAGs Airflow does not know are checked without a team)."""
    dag_ids = set(dag_ids)
    if not dag_ids:
        return set()
    teams = DagModel.get_dag_id_to_team_name_mapping(list(dag_ids))
    by_team: dict[str | None, set[str]] = defaultdict(set)
    for dag_id in dag_ids:
        by_team[teams.get(dag_id)].add(dag_id)
    manager = get_auth_manager()
    allowed: set[str] = set()
    for team, ids in by_team.items():
        allowed |= manager.filter_authorized_dag_ids(dag_ids=ids, user=user, method="GET", team_name=team)
    return allowed
