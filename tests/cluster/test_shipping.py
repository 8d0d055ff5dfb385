"""package_archive: one cached, deterministic zip of the package for spark-submit py_files."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile

from airflow_flinkchain import cluster
from airflow_flinkchain.cluster import package_archive, package_content_hash


def test_archive_holds_the_package_and_cloudpickle(tmp_path):
    path = package_archive(cache_dir=tmp_path)
    assert os.path.dirname(path) == str(tmp_path)
    name = os.path.basename(path)
    assert name.startswith("airflow_flinkchain-") and name.endswith(f"-{package_content_hash()}.zip")
    names = zipfile.ZipFile(path).namelist()
    assert "airflow_flinkchain/__init__.py" in names
    assert "airflow_flinkchain/cluster.py" in names
    assert "cloudpickle/__init__.py" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert not [n for n in names if "/static/" in n]


def test_archive_is_built_once_and_reused(tmp_path):
    first = package_archive(cache_dir=tmp_path)
    mtime = os.stat(first).st_mtime_ns
    second = package_archive(cache_dir=tmp_path)
    assert second == first and os.stat(second).st_mtime_ns == mtime
    assert [p for p in os.listdir(tmp_path)] == [os.path.basename(first)]  # no temp files left


def test_archive_is_deterministic(tmp_path):
    a = package_archive(cache_dir=tmp_path / "a")
    b = package_archive(cache_dir=tmp_path / "b")
    assert open(a, "rb").read() == open(b, "rb").read()


def test_content_change_gives_a_new_archive(tmp_path, monkeypatch):
    src = tmp_path / "src" / "airflow_flinkchain"
    src.mkdir(parents=True)
    (src / "__init__.py").write_text('__version__ = "9.9"\n')
    monkeypatch.setattr(cluster, "PACKAGE_DIR", src)
    first = package_archive(cache_dir=tmp_path / "cache", bundled=())
    (src / "extra.py").write_text("X = 1\n")
    second = package_archive(cache_dir=tmp_path / "cache", bundled=())
    assert first != second
    assert sorted(os.listdir(tmp_path / "cache")) == sorted([os.path.basename(first), os.path.basename(second)])
    assert "airflow_flinkchain/extra.py" in zipfile.ZipFile(second).namelist()


def test_default_cache_dir_from_env(tmp_path, monkeypatch):
    monkeypatch.setenv("FLINKCHAIN_PACKAGE_CACHE_DIR", str(tmp_path / "c"))
    assert os.path.dirname(package_archive()) == str(tmp_path / "c")


def test_package_imports_from_the_zip_alone(tmp_path):
    """What an executor does with py_files: the zip first on sys.path, no installed copy needed."""
    path = package_archive(cache_dir=tmp_path)
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "import airflow_flinkchain.cluster as c, cloudpickle;"
        "assert c.__file__.startswith(sys.argv[1]), c.__file__;"
        "assert cloudpickle.__file__.startswith(sys.argv[1]), cloudpickle.__file__;"
        "print('ok')"
    )
    # -S: no site-packages (so no editable install of the package); cloudpickle must come from the zip.
    # The package __init__ imports only pure-Python modules of its own.
    out = subprocess.run([sys.executable, "-S", "-c", code, path], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
