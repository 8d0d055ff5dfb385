"""The browser tests' auth manager: Airflow's SimpleAuthManager with one DAG-level rule,
as FAB's or Keycloak's per-DAG permissions give: the user "outsider" uses the UI like any
viewer but may not read `orders_dag`. Set through [core] auth_manager."""

from __future__ import annotations

from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

OUTSIDER = "outsider"
HIDDEN_DAG = "orders_dag"


class DagLevelSimpleAuthManager(SimpleAuthManager):
    def is_authorized_dag(self, *, method, user, access_entity=None, details=None) -> bool:
        if user.get_name() == OUTSIDER and details is not None and details.id == HIDDEN_DAG:
            return False
        return super().is_authorized_dag(method=method, user=user, access_entity=access_entity, details=details)
