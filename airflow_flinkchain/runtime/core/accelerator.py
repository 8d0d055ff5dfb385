"""The optional C helper `_flatcheck` (built by setup.py when a compiler is there).

`FLATCHECK` is the module, or None when it is not built, when the package comes from the
spark-submit py_files archive (a zip cannot hold an importable extension) or with
FLINKCHAIN_PURE_PYTHON=1. Its users (copying.py, arrow_records.py) then run their Python
loops, with the same answers.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Optional


def _load() -> Optional[ModuleType]:
    if os.environ.get("FLINKCHAIN_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        from airflow_flinkchain.runtime.core import _flatcheck
    except ImportError:
        return None
    return _flatcheck


FLATCHECK = _load()
