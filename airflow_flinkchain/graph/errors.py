"""The one error (and one warning) raised for pipelines that cannot be planned.

Every message names the operator (its name, and uid when set) and says what
to do instead, e.g.::

    PlanningError: operator 'audit' (Map): forward() needs equal parallelism ...
"""

from __future__ import annotations


class PlanningError(ValueError):
    """A pipeline cannot be turned into a StreamGraph / JobGraph.

    `operator` is the name of the operator at fault (None for pipeline-wide
    problems such as "no sink")."""

    def __init__(self, message: str, operator: str | None = None):
        super().__init__(message)
        self.operator = operator


class PlanningWarning(UserWarning):
    """A pipeline that plans but probably does not do what was meant
    (e.g. `select()` of a name the selector never returns)."""
