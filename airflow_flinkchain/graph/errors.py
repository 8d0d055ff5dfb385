"""The one error (and one warning) raised for pipelines that cannot be planned.

Every message names the operator (its name, and uid when set) and says what
to do instead, e.g.::

    PlanningError: operator 'audit' (Map): forward() needs equal parallelism ...
"""

from __future__ import annotations

from typing import Any, Callable


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


#: The page listing what of PyFlink's API is supported, and what to use instead.
PORTING_PAGE = "docs/porting.md"


class UnsupportedFeatureError(PlanningError, NotImplementedError):
    """A PyFlink type, class or method this project does not offer; raised when the pipeline
    is written (before any Spark starts), naming the feature and the porting page."""

    def __init__(self, feature: str, instead: str = ""):
        hint = f" {instead}" if instead else ""
        super().__init__(f"{feature} is not supported by airflow-flinkchain.{hint} "
                         f"See {PORTING_PAGE} (Porting from PyFlink) for what is supported and what to use instead.")
        self.feature = feature


def unsupported_names(module: str, names: dict) -> "Callable[[str], Any]":
    """A module `__getattr__` for the PyFlink names a module does not offer: importing one
    raises UnsupportedFeatureError naming it (with `names[name]`, what to use instead)."""

    def __getattr__(name: str) -> Any:
        if name in names:
            raise UnsupportedFeatureError(f"{module}.{name}", names[name])
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__
