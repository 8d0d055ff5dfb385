"""Serialized plans: a JobGraph with its user functions, loadable in a fresh process.

Airflow imports DAG files under made-up module names (e.g.
`unusual_prefix_<hash>_my_dag`) that no other process can import, and the
`spark-submit` process (driver or executors, maybe on other machines) has no
DAG folder on its path. So every module that is not part of an installed
distribution or the standard library - the DAG file, helper modules next to
it, test modules - is pickled *by value* (`cloudpickle.register_pickle_by_value`)
while the plan is dumped: lambdas, closures, and classes and functions defined
there travel inside the plan. Installed packages (this one included: on a
cluster it travels as a py_files archive) are pickled by reference.
"""

from __future__ import annotations

import io
import os
import sys
import sysconfig
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional

import cloudpickle

_INSTALLED_ROOTS = tuple(
    os.path.realpath(p)
    for p in {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    if p
)
_PACKAGE_ROOT = os.path.realpath(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# path -> whether a module there is pickled by value: realpath() of every loaded module on
# every dump would dominate a checkpoint (one dump per key group)
_BY_VALUE_PATHS: dict[str, bool] = {}


def _pickled_by_value(name: str, module: Any) -> bool:
    if name == "__main__" or name.split(".")[0] in ("airflow_flinkchain", "cloudpickle", "pyspark", "py4j"):
        return False  # __main__ is by value anyway; our package ships as code
    path = getattr(module, "__file__", None)
    if not path or not path.endswith(".py"):
        return False  # builtin, namespace or extension module
    known = _BY_VALUE_PATHS.get(path)
    if known is None:
        real = os.path.realpath(path)
        known = not (real.startswith(_INSTALLED_ROOTS) or real.startswith(_PACKAGE_ROOT + os.sep))
        _BY_VALUE_PATHS[path] = known
    return known


def by_value_modules() -> list[str]:
    """Names of the loaded modules that `dump_plan` pickles by value."""
    return sorted(n for n, m in list(sys.modules.items()) if m is not None and _pickled_by_value(n, m))


@contextmanager
def _by_value() -> Iterator[None]:
    registered = []
    for name in by_value_modules():
        module = sys.modules[name]
        try:
            cloudpickle.register_pickle_by_value(module)
            registered.append(module)
        except (ValueError, TypeError):
            pass  # not registrable (e.g. a module object not in sys.modules under its own name)
    try:
        yield
    finally:
        for module in registered:
            try:
                cloudpickle.unregister_pickle_by_value(module)
            except ValueError:
                pass


class _PlanPickler(cloudpickle.CloudPickler):
    """cloudpickle, where `substitute(obj)` may pickle another object in obj's place."""

    def __init__(self, file: Any, substitute: Callable[[Any], Optional[Any]]):
        super().__init__(file, protocol=5)
        self._substitute = substitute

    def reducer_override(self, obj: Any) -> Any:
        other = self._substitute(obj)
        if other is not None:  # pickled as an argument: its class may differ from obj's
            return _same, (other,)
        return super().reducer_override(obj)


def _same(obj: Any) -> Any:
    return obj


def dumps_plan(obj: Any, substitute: Optional[Callable[[Any], Optional[Any]]] = None) -> bytes:
    """cloudpickle bytes of a plan (or anything holding user functions). `substitute(o)`
    returns what to pickle instead of object `o` (or None: `o` itself); it is called with
    the DAG file's modules registered by value (e.g. to write a collection's records as
    data files and pickle a reference to them instead)."""
    try:
        with _by_value():
            if substitute is None:
                return cloudpickle.dumps(obj, protocol=5)
            buffer = io.BytesIO()
            _PlanPickler(buffer, substitute).dump(obj)
            return buffer.getvalue()
    except Exception as exc:
        culprit = _unpicklable_operator(obj)
        raise TypeError(
            f"{culprit or 'the pipeline'} cannot be serialized ({type(exc).__name__}: {exc}); user functions and "
            "their closures must be picklable: avoid capturing open connections, locks, Spark "
            "sessions or generators; open such resources in the function's open() instead"
        ) from exc


def _unpicklable_operator(obj: Any) -> Any:
    """'operator NAME (its function)' for the first operator of a plan whose function,
    key selector or output selector cannot be pickled; None when none is found."""
    graph = getattr(obj, "stream_graph", obj)
    for node in getattr(graph, "nodes", ()):
        for what in ("function", "key_selector", "output_selector"):
            if not _pickles(getattr(node, what, None)):
                return f"operator {node.name!r} (its {what.replace('_', ' ')})"
    for edge in getattr(graph, "edges", ()):
        part = getattr(edge, "partitioner", None)
        for what in ("key_selector", "custom_partitioner"):
            if not _pickles(getattr(part, what, None)):
                return f"the {what.replace('_', ' ')} of the edge into operator {graph.node(edge.target_id).name!r}"
    return None


def _pickles(fn: Any) -> bool:
    """True when `fn` (None counts) pickles the way dump_plan pickles it."""
    if fn is None:
        return True
    try:
        with _by_value():
            cloudpickle.dumps(fn, protocol=5)
    except Exception:
        return False
    return True


def loads_plan(data: bytes) -> Any:
    return cloudpickle.loads(data)
