"""Running chains on a Spark cluster: what ships with a submission, and what must be shared.

Pure Python: imports neither Airflow nor Spark, so the Airflow layer (the chain
operator, the setup task) and the spark-submit entry point can both call it.

For the chain operator (``airflow/``), per chain task, before ``spark-submit``::

    from airflow_flinkchain.cluster import (
        package_archive, check_exchange_root_reachable, check_deploy_mode)

    conn = get_connection(spark_conn_id)     # Airflow's public connection lookup
    master = spark_master(conn)              # read as the provider's hook reads it
    deploy_mode = deploy_mode or conn.extra_dejson.get("deploy-mode")  # the operator's, else the connection's
    check_deploy_mode(master, deploy_mode)   # standalone + Python + cluster mode -> clear error
    check_exchange_root_reachable(master, exchange_root, shared=exchange_root_shared)
    py_files = package_archive()             # zip of airflow_flinkchain (+ cloudpickle), cached

``exchange_root_shared`` is the pipeline setting ``exchange_root_shared=True``,
else the Airflow config ``[flinkchain] exchange_root_shared`` (env
``AIRFLOW__FLINKCHAIN__EXCHANGE_ROOT_SHARED``), default False.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import zipfile
from pathlib import Path
from typing import Iterable, Optional
from urllib.parse import urlparse

__all__ = [
    "package_archive",
    "package_content_hash",
    "default_package_cache_dir",
    "is_local_master",
    "is_driver_local_root",
    "check_exchange_root_reachable",
    "check_deploy_mode",
    "ExchangeRootNotShared",
    "DeployModeNotSupported",
    "STANDALONE_PYTHON_CLUSTER_MODE_ERROR",
]

# ---------------------------------------------------------------------------
# Shipping the package with a submission
# ---------------------------------------------------------------------------

PACKAGE_NAME = "airflow_flinkchain"
PACKAGE_DIR = Path(__file__).resolve().parent
#: Pure-Python packages shipped beside ours. cloudpickle goes along so that the
#: driver that unpickles a chain plan has the very version that pickled it.
DEFAULT_BUNDLED = ("cloudpickle",)
#: Sub-folders that executors never need (UI assets of the Airflow plugin).
_SKIP_DIRS = {"__pycache__", "static", "templates", "node_modules", ".pytest_cache"}
_SKIP_SUFFIXES = (".pyc", ".pyo", ".so.tmp", ".swp")
_FIXED_ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # deterministic archives: same content -> same bytes


def _package_version() -> str:
    try:
        from importlib.metadata import version

        return version("airflow-flinkchain")
    except Exception:  # not installed (e.g. running from a source tree or from the zip itself)
        text = (PACKAGE_DIR / "__init__.py").read_text(encoding="utf-8")
        m = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", text)
        return m.group(1) if m else "0"


def _package_files(root: Path, arc_prefix: str) -> list[tuple[str, Path]]:
    """(name inside the zip, file on disk), sorted, for one package folder."""
    out: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            if name.endswith(_SKIP_SUFFIXES) or name.startswith("."):
                continue
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            out.append((f"{arc_prefix}/{rel}", path))
    return out


def _bundled_roots(bundled: Iterable[str]) -> list[tuple[str, Path]]:
    roots = []
    for mod_name in bundled:
        try:
            mod = __import__(mod_name)
        except ImportError:
            continue
        mod_file = Path(mod.__file__).resolve()
        roots.append((mod_name, mod_file.parent if mod_file.name == "__init__.py" else mod_file))
    return roots


def _archive_members(bundled: Iterable[str]) -> list[tuple[str, Path]]:
    members = _package_files(PACKAGE_DIR, PACKAGE_NAME)
    for name, root in _bundled_roots(bundled):
        if root.is_dir():
            members += _package_files(root, name)
        else:  # a single-module distribution
            members.append((root.name, root))
    return members


def _members_hash(members: list[tuple[str, Path]]) -> str:
    h = hashlib.sha256()
    for arcname, path in members:
        h.update(arcname.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def package_content_hash(bundled: Iterable[str] = DEFAULT_BUNDLED) -> str:
    """sha256 over every shipped file's name and bytes (12 hex digits)."""
    return _members_hash(_archive_members(bundled))


def default_package_cache_dir() -> Path:
    """``$FLINKCHAIN_PACKAGE_CACHE_DIR``, else ``$XDG_CACHE_HOME/airflow-flinkchain``
    (``~/.cache/airflow-flinkchain``), else a folder under the system temp dir."""
    env = os.environ.get("FLINKCHAIN_PACKAGE_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    candidate = Path(base) / "airflow-flinkchain"
    try:
        candidate.mkdir(parents=True, exist_ok=True)
        if os.access(candidate, os.W_OK):
            return candidate
    except OSError:
        pass
    return Path(tempfile.gettempdir()) / f"airflow-flinkchain-{os.getuid() if hasattr(os, 'getuid') else 'user'}"


def package_archive(cache_dir: Optional[os.PathLike | str] = None, bundled: Iterable[str] = DEFAULT_BUNDLED) -> str:
    """Return the path of a zip of the ``airflow_flinkchain`` package, for spark-submit ``py_files``.

    The zip holds ``airflow_flinkchain/`` (Python files; the UI plugin's static
    assets are left out) and, beside it, the pure-Python packages in
    ``bundled`` (cloudpickle by default, so the chain plan is unpickled with the
    version that pickled it). Spark puts ``py_files`` first on ``sys.path`` of
    the driver and every executor, so executors need no installed copy of the
    package nor of the DAG file (user functions travel by value in the plan).
    They still need a Python with pyspark's own dependencies (pyarrow).

    Built once per package version + content hash, named
    ``airflow_flinkchain-{version}-{hash}.zip`` in ``cache_dir`` (default:
    ``default_package_cache_dir()``), written to a temp file and renamed, so
    concurrent chain tasks on one Airflow worker share one archive and never see
    a half-written one. Archives are deterministic (fixed timestamps).

    The Airflow chain operator calls it at execute time (not at parse time)::

        SparkSubmitOperator(..., py_files=package_archive())

    (joined with a comma to any user-given ``py_files``).
    """
    bundled = tuple(bundled)
    target_dir = Path(cache_dir) if cache_dir is not None else default_package_cache_dir()
    target_dir.mkdir(parents=True, exist_ok=True)
    members = _archive_members(bundled)
    name = f"{PACKAGE_NAME}-{_package_version()}-{_members_hash(members)}.zip"
    target = target_dir / name
    if target.is_file():
        return str(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=target_dir)
    try:
        with os.fdopen(fd, "wb") as fh, zipfile.ZipFile(fh, "w", zipfile.ZIP_DEFLATED) as zf:
            for arcname, path in members:
                info = zipfile.ZipInfo(arcname, date_time=_FIXED_ZIP_TIME)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                zf.writestr(info, path.read_bytes())
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return str(target)


# ---------------------------------------------------------------------------
# Masters, exchange roots, deploy modes
# ---------------------------------------------------------------------------

_LOCAL_MASTER = re.compile(r"^local(\[[^\]]*\])?$|^local-cluster\[[^\]]*\]$", re.IGNORECASE)
#: Schemes whose files only the machine that wrote them can see.
_DRIVER_LOCAL_SCHEMES = {"", "file"}


class ExchangeRootNotShared(ValueError):
    """A non-local master with an exchange root only the driver can see."""


class DeployModeNotSupported(ValueError):
    """A deploy mode the master cannot run for a Python application."""


def is_local_master(master: Optional[str]) -> bool:
    """True for ``local``, ``local[N]``, ``local[*]``, ``local[N,F]``, ``local-cluster[...]``
    (all on one machine) and for no master at all (Spark's default is local)."""
    if master is None or not str(master).strip():
        return True
    return bool(_LOCAL_MASTER.match(str(master).strip()))


def _scheme(uri: str) -> str:
    scheme = urlparse(uri).scheme.lower()
    return "" if len(scheme) == 1 else scheme  # "C:\\..." is a Windows drive, not a scheme


def is_driver_local_root(exchange_root: str) -> bool:
    """True when the exchange root is a plain path or a ``file:`` URI: a folder on one
    machine's disk, shared with the executors only if mounted at the same path on all."""
    return _scheme(str(exchange_root)) in _DRIVER_LOCAL_SCHEMES


def check_exchange_root_reachable(master: Optional[str], exchange_root: str, shared: bool = False) -> None:
    """Refuse to run a chain on a non-local master with an exchange root only the driver can see.

    Passes for local masters (``local[*]``, ``local-cluster[...]``), for any
    exchange root with a scheme other than ``file``: object stores (``s3://``,
    ``gs://``, ``abfs://``, read and written by the storage layer) and Hadoop file
    systems (``hdfs://``, ``viewfs://`` ...), and for
    plain paths / ``file://`` URIs when ``shared`` is True (the folder is
    mounted at the same path on the Airflow workers, the driver and every
    executor, e.g. NFS or the docker/ stack's shared volume). Raises
    ``ExchangeRootNotShared`` otherwise, before anything is submitted.

    ``shared`` comes from the pipeline setting ``exchange_root_shared=True`` or
    the Airflow config ``[flinkchain] exchange_root_shared``.
    """
    if not exchange_root:
        raise ExchangeRootNotShared("No exchange root set: set [flinkchain] exchange_root (or the pipeline's exchange_root).")
    if is_local_master(master) or shared or not is_driver_local_root(exchange_root):
        return
    raise ExchangeRootNotShared(
        f"Exchange root {exchange_root!r} is a local path, but chains run on the Spark master {master!r}: "
        "executors on other machines would not see the exchange data, the chain plan or the metrics file. "
        "Either use storage every node reaches (s3://bucket/prefix, gs://..., abfs://..., hdfs://...), "
        "or mount one folder at the same path on the Airflow workers and every Spark node and declare it "
        "shared: pipeline setting exchange_root_shared=True, or Airflow config [flinkchain] "
        "exchange_root_shared = True (env AIRFLOW__FLINKCHAIN__EXCHANGE_ROOT_SHARED=True)."
    )


#: What spark-submit 4.x prints (and exits 1) for --deploy-mode cluster of a .py app on spark://.
STANDALONE_PYTHON_CLUSTER_MODE_ERROR = (
    "Cluster deploy mode is currently not supported for python applications on standalone clusters."
)


def check_deploy_mode(master: Optional[str], deploy_mode: Optional[str]) -> str:
    """Return the deploy mode to use ("client" or "cluster"), or raise a clear error.

    Spark's standalone master (``spark://``) cannot run Python applications in
    cluster deploy mode (spark-submit stops with: "Cluster deploy mode is
    currently not supported for python applications on standalone clusters.").
    We refuse up front with what to do instead of falling back silently: in
    client mode the driver runs on the Airflow worker, which changes where
    memory and network go, and that must be the user's choice. YARN and
    Kubernetes support both modes; local masters are always client.
    """
    mode = (deploy_mode or "client").strip().lower()
    if mode not in ("client", "cluster"):
        raise DeployModeNotSupported(f"deploy_mode must be 'client' or 'cluster', not {deploy_mode!r}.")
    m = (master or "").strip().lower()
    if mode == "cluster" and m.startswith("spark://"):
        raise DeployModeNotSupported(
            f"Spark standalone master {master!r} cannot run Python chains in cluster deploy mode "
            f"(spark-submit: {STANDALONE_PYTHON_CLUSTER_MODE_ERROR!r}). Use deploy_mode='client' "
            "(the Spark connection's extra {\"deploy-mode\": \"client\"}): the driver then runs on the "
            "Airflow worker and the executors on the cluster; or submit to YARN or Kubernetes for cluster mode."
        )
    if mode == "cluster" and is_local_master(master):
        raise DeployModeNotSupported(
            f"Cluster deploy mode is not applicable to the local master {master!r}; use deploy_mode='client'."
        )
    return mode
