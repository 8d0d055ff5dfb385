"""Deployment-wide defaults of pipelines, read from Airflow's configuration.

Flink reads `execution.runtime-mode` and `pipeline.auto-watermark-interval` from its
configuration file; here the same defaults are `[flinkchain] runtime_mode` and
`[flinkchain] auto_watermark_interval` of Airflow's configuration, so that one setting applies
to every DAG file of a deployment. A pipeline's own setting (`runtime_mode=`,
`set_runtime_mode()`, `get_config().set_auto_watermark_interval()`) wins.

Where an option is looked up, in Airflow's order for one option:

1. the environment variable `AIRFLOW__FLINKCHAIN__<OPTION>`, e.g.
   `AIRFLOW__FLINKCHAIN__RUNTIME_MODE`;
2. the `[flinkchain]` section of the airflow.cfg Airflow reads: `$AIRFLOW_CONFIG`, else
   `$AIRFLOW_HOME/airflow.cfg`, else `~/airflow/airflow.cfg`;
3. Flink's default: STREAMING; 200 ms.

The file is read with `configparser`, without importing Airflow: authoring and planning
(`api/`) must not import Airflow, and a DAG file is planned by `flinkchain plan` and by tests
without it. Airflow's `_CMD` and `_SECRET` variants of the option are therefore not read.

Examples:
    >>> deployment_option(RUNTIME_MODE, {"AIRFLOW__FLINKCHAIN__RUNTIME_MODE": "BATCH"})
    ('BATCH', 'environment variable AIRFLOW__FLINKCHAIN__RUNTIME_MODE')
    >>> deployment_option(RUNTIME_MODE, {"AIRFLOW_CONFIG": "/nonexistent/airflow.cfg"})
    (None, "Flink's default")
"""

from __future__ import annotations

import configparser
import os
from functools import lru_cache
from pathlib import Path
from typing import Mapping, Optional

from airflow_flinkchain.graph.errors import PlanningError

SECTION = "flinkchain"
RUNTIME_MODE = "runtime_mode"  # Flink's execution.runtime-mode
AUTO_WATERMARK_INTERVAL = "auto_watermark_interval"  # Flink's pipeline.auto-watermark-interval (ms)


def airflow_config_path(environ: Mapping[str, str]) -> Path:
    """The airflow.cfg Airflow reads, by its own rules."""
    if environ.get("AIRFLOW_CONFIG"):
        return Path(os.path.expanduser(environ["AIRFLOW_CONFIG"]))
    home = environ.get("AIRFLOW_HOME") or "~/airflow"
    return Path(os.path.expanduser(home)) / "airflow.cfg"


@lru_cache(maxsize=8)
def _read_option(path: str, version: tuple[int, int], option: str) -> Optional[str]:
    """Parsed once per version (mtime, size) of the file: a pipeline is created per DAG parse."""
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read(path, encoding="utf-8")
    except configparser.Error as exc:
        raise PlanningError(f"cannot read [{SECTION}] {option} from {path}: {exc}") from exc
    return parser.get(SECTION, option, fallback=None)


def config_file_option(option: str, environ: Mapping[str, str]) -> tuple[Optional[str], Path]:
    """`[flinkchain] option` of the deployment's airflow.cfg (None when unset) and the file's path."""
    path = airflow_config_path(environ)
    try:
        stat = path.stat()
    except OSError:
        return None, path
    return _read_option(str(path), (stat.st_mtime_ns, stat.st_size), option), path


def deployment_option(option: str, environ: Optional[Mapping[str, str]] = None) -> tuple[Optional[str], str]:
    """`[flinkchain] option` as the deployment sets it (None when unset) and where it was set,
    for an error message; StreamPipeline parses the value."""
    environ = os.environ if environ is None else environ
    env_name = f"AIRFLOW__{SECTION.upper()}__{option.upper()}"
    value = environ.get(env_name)
    if value is not None and value.strip():
        return value.strip(), f"environment variable {env_name}"
    value, path = config_file_option(option, environ)
    if value is not None and value.strip():
        return value.strip(), f"[{SECTION}] {option} in {path}"
    return None, "Flink's default"
