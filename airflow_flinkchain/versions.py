"""Start-up check: pyspark's Python files must match the Spark jars beside them.

The Spark provider depends on `pyspark-client`, which installs into the same
`pyspark/` folder as `pyspark`; mismatched versions fail later with obscure
py4j errors (e.g. "Constructor ... UserDefinedPythonFunction ... does not exist").
"""

from __future__ import annotations

import glob
import os
import re


class SparkVersionMismatch(RuntimeError):
    pass


def jar_spark_version() -> str | None:
    import pyspark

    package_dir = os.path.dirname(pyspark.__file__)
    if ".zip" in package_dir:
        # Under spark-submit the driver imports pyspark from $SPARK_HOME/python/lib/pyspark.zip;
        # the jars are in $SPARK_HOME/jars (for pip installs SPARK_HOME is the pyspark folder).
        zip_path = package_dir[: package_dir.index(".zip") + len(".zip")]
        package_dir = os.environ.get("SPARK_HOME") or os.path.dirname(os.path.dirname(os.path.dirname(zip_path)))
    jars = glob.glob(os.path.join(package_dir, "jars", "spark-core_*.jar"))
    if not jars:
        return None
    m = re.search(r"spark-core_[\d.]+-(.+)\.jar$", os.path.basename(jars[0]))
    return m.group(1) if m else None


def check_pyspark() -> str:
    """Return the Spark version, or raise with what to do when the files disagree."""
    import pyspark

    py_version = pyspark.__version__
    jar_version = jar_spark_version()
    if jar_version is None:
        raise SparkVersionMismatch(
            f"pyspark {py_version} has no Spark jars (only pyspark-client installed?). "
            "Install the full package: pip install --force-reinstall --no-deps pyspark==" + py_version
        )
    if jar_version != py_version:
        raise SparkVersionMismatch(
            f"pyspark Python files are {py_version} but the Spark jars are {jar_version}: "
            "pyspark-client and pyspark share the pyspark/ folder. Pin both to one version and "
            f"reinstall pyspark last: pip install --force-reinstall --no-deps pyspark=={jar_version}"
        )
    return py_version


if __name__ == "__main__":
    print(f"pyspark {check_pyspark()} (Python files and jars agree)")
    from airflow_flinkchain.runtime.core.copying import flat_immutable

    print("C record-copy check (runtime/core/_flatcheck):", "built" if flat_immutable is not None
          else "not used (not built for lack of a C compiler, or FLINKCHAIN_PURE_PYTHON=1): pure-Python loops")
