"""The one place a keyed operator gets its state backend (Flink's StateBackend.createKeyedStateBackend).

`kind`: "hashmap" / "rocksdb", a StateBackend (airflow_flinkchain.state_backend) or its `spec()`
dict as the plan carries it (StreamGraph.state_backend); None is "hashmap". BATCH execution
always uses the heap backend, whatever is configured: it holds one key at a time (Flink's
BatchExecutionKeyedStateBackend ignores the configured backend too).
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from airflow_flinkchain.runtime.state.abstract_backend import AbstractKeyedStateBackend
from airflow_flinkchain.runtime.state.backend import HeapKeyedStateBackend
from airflow_flinkchain.runtime.state.key_groups import KeyGroupRange


def backend_spec(kind: Any) -> dict:
    if kind is None:
        return {"kind": "hashmap"}
    if isinstance(kind, str):
        return {"kind": kind.lower()}
    if isinstance(kind, dict):
        return kind
    spec = getattr(kind, "spec", None)
    if callable(spec):
        return spec()
    raise TypeError(f"unknown state backend {kind!r}: use 'hashmap', 'rocksdb' or a StateBackend")


def create_keyed_state_backend(kind: Any = None, max_parallelism: Optional[int] = None,
                               key_group_range: Optional[KeyGroupRange] = None,
                               clock: Optional[Callable[[], int]] = None,
                               key_group_of: Optional[Callable[[Any, int], int]] = None,
                               subtask: int = 0, operator_name: str = "keyed",
                               batch: bool = False) -> AbstractKeyedStateBackend:
    spec = backend_spec(kind)
    name = spec.get("kind")
    common = dict(max_parallelism=max_parallelism, key_group_range=key_group_range, clock=clock,
                  key_group_of=key_group_of)
    if name in ("hashmap", "heap") or batch:
        return HeapKeyedStateBackend(**common)
    if name == "rocksdb":
        try:
            from airflow_flinkchain.runtime.state.rocksdb_backend import RocksDBKeyedStateBackend
        except ImportError as exc:
            raise RuntimeError(
                f"operator {operator_name!r}: the pipeline's EmbeddedRocksDBStateBackend needs the 'rocksdict' "
                f"package in this Python ({exc}); install it where the chains run (pip install rocksdict, the "
                "version in requirements.txt) or use HashMapStateBackend") from exc

        return RocksDBKeyedStateBackend(db_storage_paths=spec.get("db_storage_paths") or None, subtask=subtask,
                                        operator_name=operator_name,
                                        predefined_options=spec.get("predefined_options") or "DEFAULT", **common)
    raise ValueError(f"operator {operator_name!r}: unknown state backend {name!r}: use 'hashmap' or 'rocksdb'")
