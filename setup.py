"""Only for the optional C accelerator; all metadata lives in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("airflow_flinkchain.runtime.core._flatcheck", ["airflow_flinkchain/runtime/core/_flatcheck.c"],
                             optional=True)])
