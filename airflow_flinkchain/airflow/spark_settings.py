"""Spark settings of a chain task, defined once.

The provider's SparkSubmitOperator takes ~30 keyword arguments; here they are
one frozen dataclass. Pipeline settings (`StreamPipeline(..., driver_memory=...)`)
are overlaid by the settings of the chain's operators (`StreamNode.settings`),
then the chain's parallelism is mapped onto the Spark job, and `operator_kwargs()`
turns the result into the provider's arguments. Pure Python (no Airflow import).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields, replace
from typing import Any, Mapping, Optional

#: Settings that are lists of files/packages (comma-joined for spark-submit).
_LIST_FIELDS = ("py_files", "files", "jars", "packages")
#: Settings where the most demanding operator of a chain wins (a chain is one Spark job).
_MAX_FIELDS = ("driver_memory", "executor_memory", "executor_cores", "num_executors", "total_executor_cores")


@dataclass(frozen=True)
class SparkSettings:
    conn_id: Optional[str] = None
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    driver_memory: Optional[str] = None
    executor_memory: Optional[str] = None
    executor_cores: Optional[int] = None
    num_executors: Optional[int] = None
    total_executor_cores: Optional[int] = None
    env_vars: Mapping[str, str] = field(default_factory=dict)
    py_files: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    jars: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()
    deploy_mode: Optional[str] = None
    spark_binary: Optional[str] = None

    # ---- construction ---------------------------------------------------
    @classmethod
    def keys(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any], owner: str, strict: bool = False) -> "SparkSettings":
        """Pick the Spark keys out of a settings dict. `owner` names the pipeline or
        operator in errors; with `strict`, unknown keys are an error (typos)."""
        known = set(cls.keys())
        if strict:
            unknown = sorted(k for k in settings if k not in known)
            if unknown:
                raise ValueError(
                    f"{owner}: unknown Spark setting(s) {unknown}; known settings are {sorted(known)}"
                )
        values: dict[str, Any] = {}
        for k in cls.keys():
            v = settings.get(k)
            if v is None:
                continue
            if k in ("spark_conf", "env_vars"):
                if not isinstance(v, Mapping):
                    raise TypeError(f"{owner}: {k} must be a dict, got {type(v).__name__}")
                v = {str(a): str(b) if not isinstance(b, bool) else str(b).lower() for a, b in v.items()}
            elif k in _LIST_FIELDS:
                v = tuple(x.strip() for x in v.split(",") if x.strip()) if isinstance(v, str) else tuple(v)
            elif k in ("executor_cores", "num_executors", "total_executor_cores"):
                v = int(v)
            elif k in ("driver_memory", "executor_memory"):
                v = str(v)
                memory_mib(v, owner=f"{owner}: {k}")  # validate now, not at run time
            values[k] = v
        return cls(**values)

    # ---- merging ----------------------------------------------------------
    def overlay(self, other: "SparkSettings") -> "SparkSettings":
        """`other` wins field by field; dicts are merged key by key, lists appended."""
        changes: dict[str, Any] = {}
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if f.name in ("spark_conf", "env_vars"):
                changes[f.name] = {**mine, **theirs}
            elif f.name in _LIST_FIELDS:
                changes[f.name] = _dedup(mine + theirs)
            elif theirs is not None:
                changes[f.name] = theirs
        return replace(self, **changes)

    @classmethod
    def combine_chain(cls, per_operator: list[tuple[str, "SparkSettings"]], chain: str) -> "SparkSettings":
        """Settings of operators fused in one chain (one Spark job). Dicts merge head to
        tail; memory and cores take the largest request; two different Spark
        connections cannot share one job, so that is an error."""
        result = cls()
        conn_owner: Optional[str] = None
        for name, s in per_operator:
            if s.conn_id and result.conn_id and s.conn_id != result.conn_id:
                raise ValueError(
                    f"chain {chain!r}: operators {conn_owner!r} and {name!r} ask for different Spark "
                    f"connections ({result.conn_id!r}, {s.conn_id!r}) but run in one Spark job; "
                    f"call start_new_chain() on {name!r} or use one conn_id"
                )
            if s.conn_id and not result.conn_id:
                conn_owner = name
            maxed = {k: _larger(k, getattr(result, k), getattr(s, k)) for k in _MAX_FIELDS}
            result = replace(result.overlay(s), **maxed)
        return result

    def with_parallelism(self, parallelism: int) -> "SparkSettings":
        """Map the chain's parallelism onto the job (unless set explicitly)."""
        conf = dict(self.spark_conf)
        conf.setdefault("spark.default.parallelism", str(parallelism))
        conf.setdefault("spark.sql.shuffle.partitions", str(parallelism))
        return replace(self, spark_conf=conf)

    # ---- output -------------------------------------------------------------
    def operator_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of the provider's SparkSubmitOperator."""
        kw: dict[str, Any] = {
            "conn_id": self.conn_id or "spark_default",
            "conf": dict(self.spark_conf),
            "env_vars": dict(self.env_vars) or None,
        }
        for k in ("driver_memory", "executor_memory", "executor_cores", "num_executors",
                  "total_executor_cores", "deploy_mode", "spark_binary"):
            if getattr(self, k) is not None:
                kw[k] = getattr(self, k)
        for k in _LIST_FIELDS:
            if getattr(self, k):
                kw[k] = ",".join(getattr(self, k))
        return kw

    def describe(self) -> list[str]:
        """Human-readable lines for a task's doc_md."""
        lines = [f"connection `{self.conn_id or 'spark_default'}`"]
        for k in ("driver_memory", "executor_memory", "executor_cores", "num_executors", "total_executor_cores", "deploy_mode"):
            if getattr(self, k) is not None:
                lines.append(f"{k} `{getattr(self, k)}`")
        lines += [f"`{k}={v}`" for k, v in sorted(self.spark_conf.items())]
        lines += [f"env `{k}`" for k in sorted(self.env_vars)]
        return lines


def _dedup(items: tuple[str, ...]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for i in items:
        seen.setdefault(i, None)
    return tuple(seen)


def _larger(key: str, a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    if key.endswith("_memory"):
        return a if memory_mib(a) >= memory_mib(b) else b
    return max(a, b)


_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)b?\s*$", re.IGNORECASE)
_UNIT_MIB = {"k": 1 / 1024, "m": 1, "": 1, "g": 1024, "t": 1024 * 1024}


def memory_mib(text: str, owner: str = "memory") -> float:
    """Spark memory string ('512m', '2g', '1024') in MiB (bare numbers are MiB, as in Spark)."""
    m = _MEMORY.match(str(text))
    if not m:
        raise ValueError(f"{owner}: {text!r} is not a Spark memory size (e.g. '512m', '2g')")
    return float(m.group(1)) * _UNIT_MIB[m.group(2).lower()]
