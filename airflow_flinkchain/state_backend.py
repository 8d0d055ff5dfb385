"""State backends, named as PyFlink's `pyflink.datastream.state_backend`: where the keyed state of
a pipeline's operators lives while a chain runs (`p.set_state_backend(backend)`, PyFlink's
`env.set_state_backend`).

- `HashMapStateBackend()` (the default): Python objects in the worker's memory. Fastest; the
  state of a subtask must fit in its worker's memory.
- `EmbeddedRocksDBStateBackend()`: an embedded RocksDB database per keyed operator subtask
  (through `rocksdict`), in a temporary directory under `set_db_storage_paths(...)` (default: the
  system temp directory, `TMPDIR`; on Spark the executor's working directory) that is removed
  when the subtask ends. State larger than memory; every access (de)serializes.

Both cut their snapshots into the same portable, plain-data format, so a pipeline may switch
backends between runs. The choice is plain data and travels inside the serialized plan.

>>> EmbeddedRocksDBStateBackend(enable_incremental_checkpointing=True).spec()["kind"]
'rocksdb'
>>> HashMapStateBackend().spec()
{'kind': 'hashmap'}
"""

from __future__ import annotations

from enum import Enum
from typing import Any, List, Optional

__all__ = ["StateBackend", "HashMapStateBackend", "EmbeddedRocksDBStateBackend", "PredefinedOptions",
           "as_state_backend"]


class PredefinedOptions(Enum):
    """Flink's pre-tuned RocksDB option sets (see `EmbeddedRocksDBStateBackend.set_predefined_options`)."""

    DEFAULT = 0
    SPINNING_DISK_OPTIMIZED = 1
    SPINNING_DISK_OPTIMIZED_HIGH_MEM = 2
    FLASH_SSD_OPTIMIZED = 3


class StateBackend:
    """Base of the state backends; `spec()` is the plain-data form the plan carries."""

    kind = ""

    def spec(self) -> dict:
        return {"kind": self.kind}

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.spec() == self.spec()

    def __hash__(self) -> int:
        return hash(self.kind)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class HashMapStateBackend(StateBackend):
    """Keyed state as Python objects on the worker's heap (Flink's HashMapStateBackend)."""

    kind = "hashmap"


class EmbeddedRocksDBStateBackend(StateBackend):
    """Keyed state in an embedded RocksDB per operator subtask (Flink's EmbeddedRocksDBStateBackend).

    `enable_incremental_checkpointing`: snapshots may rewrite only the key groups changed since the
    last one (both backends track them; this flag records the pipeline's wish, as in Flink).
    Memory per subtask is bounded by RocksDB's write buffers and block cache (see
    `set_predefined_options`), not by the number of keys."""

    kind = "rocksdb"

    def __init__(self, enable_incremental_checkpointing: Optional[bool] = None):
        if enable_incremental_checkpointing is not None and not isinstance(enable_incremental_checkpointing, bool):
            raise TypeError("EmbeddedRocksDBStateBackend(enable_incremental_checkpointing=...) must be a bool or None, "
                            f"got {enable_incremental_checkpointing!r}")
        self._incremental = bool(enable_incremental_checkpointing)
        self._paths: List[str] = []
        self._predefined = PredefinedOptions.DEFAULT

    def is_incremental_checkpoints_enabled(self) -> bool:
        return self._incremental

    def set_db_storage_paths(self, *paths: str) -> None:
        """Local directories for the RocksDB files; subtasks spread over them by subtask index.
        None / no paths: the system temp directory. Each subtask gets its own fresh directory
        below, removed when the subtask ends."""
        if len(paths) == 1 and paths[0] is None:
            paths = ()
        for path in paths:
            if not isinstance(path, str) or not path:
                raise ValueError(f"EmbeddedRocksDBStateBackend.set_db_storage_paths: paths must be non-empty "
                                 f"strings (local directories), got {path!r}")
            if "://" in path and not path.startswith("file://"):
                raise ValueError(f"EmbeddedRocksDBStateBackend.set_db_storage_paths: {path!r} is not local; RocksDB "
                                 "needs a local directory of the worker (snapshots go to the checkpoint storage)")
        self._paths = [p[len("file://"):] if p.startswith("file://") else p for p in paths]

    def get_db_storage_paths(self) -> List[str]:
        return list(self._paths)

    def set_predefined_options(self, options: PredefinedOptions) -> None:
        """FLASH_SSD_OPTIMIZED and the DEFAULT use a 64 MB block cache and 2 x 32 MB write buffers per
        subtask; SPINNING_DISK_OPTIMIZED_HIGH_MEM 256 MB and 2 x 64 MB; SPINNING_DISK_OPTIMIZED 64 MB
        and larger read-ahead."""
        if not isinstance(options, PredefinedOptions):
            raise TypeError(f"set_predefined_options needs a PredefinedOptions member, got {options!r}")
        self._predefined = options

    def get_predefined_options(self) -> PredefinedOptions:
        return self._predefined

    def spec(self) -> dict:
        return {"kind": self.kind, "db_storage_paths": list(self._paths),
                "incremental": self._incremental, "predefined_options": self._predefined.name}

    def __repr__(self) -> str:
        return (f"EmbeddedRocksDBStateBackend(enable_incremental_checkpointing={self._incremental}, "
                f"db_storage_paths={self._paths!r})")


_BY_NAME = {"hashmap": HashMapStateBackend, "heap": HashMapStateBackend, "rocksdb": EmbeddedRocksDBStateBackend}


def as_state_backend(backend: Any, where: str) -> StateBackend:
    """A StateBackend, or one made from its name ("hashmap", "rocksdb"; Flink's
    `state.backend.type`); TypeError naming `where` otherwise."""
    if isinstance(backend, str) and backend.lower() in _BY_NAME:
        backend = _BY_NAME[backend.lower()]()
    if not isinstance(backend, StateBackend):
        raise TypeError(f"{where}: the state backend must be HashMapStateBackend(), EmbeddedRocksDBStateBackend() "
                        f"(airflow_flinkchain.state_backend) or 'hashmap' / 'rocksdb', got {backend!r}")
    return backend
