"""JVM class-data sharing of the chain tasks' spark-submit (airflow/class_data_sharing.py), with the
machine's real Java: the archive a JVM writes at its exit is put in place and a later JVM maps it."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from airflow_flinkchain.airflow import class_data_sharing as cds
from airflow_flinkchain.airflow.paths import bundled_spark_home

JAVA = shutil.which("java")
pytestmark = pytest.mark.skipif(JAVA is None, reason="no java on PATH")


def java(options: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([JAVA, *options.split(), *args, "-version"], capture_output=True, text=True)


def test_the_first_jvm_writes_the_archive_and_the_next_one_maps_it(tmp_path):
    first = cds.for_submit(bundled_spark_home(), {}, str(tmp_path))
    assert first.creating and not os.path.exists(first.archive)
    assert java(first.java_options()).returncode == 0
    assert first.finish(succeeded=True) and os.path.isfile(first.archive)
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]

    second = cds.for_submit(bundled_spark_home(), {}, str(tmp_path))
    assert second.creating is None and second.archive == first.archive
    # -Xshare:on fails the JVM when the archive cannot be mapped
    used = java(second.java_options() + " -Xshare:on")
    assert used.returncode == 0 and "sharing" in used.stderr


def test_a_failed_submission_leaves_no_archive(tmp_path):
    first = cds.for_submit(bundled_spark_home(), {}, str(tmp_path))
    java(first.java_options())
    assert not first.finish(succeeded=False)
    assert os.listdir(tmp_path) == []
    assert cds.for_submit(bundled_spark_home(), {}, str(tmp_path)).creating  # created by the next one


def test_options_are_added_to_the_spark_submit_opts_already_set(tmp_path):
    sharing = cds.for_submit(bundled_spark_home(), {}, str(tmp_path))
    env = sharing.submit_env({"SPARK_SUBMIT_OPTS": "-Dx=1"})
    assert env == {"SPARK_SUBMIT_OPTS": f"-Dx=1 -XX:ArchiveClassesAtExit={sharing.creating}"}


def test_another_spark_gets_another_archive(tmp_path):
    other_spark = tmp_path / "spark"
    (other_spark / "jars").mkdir(parents=True)
    (other_spark / "jars" / "spark-core_2.13-9.9.9.jar").write_bytes(b"jar")
    ours = cds.for_submit(bundled_spark_home(), {}, str(tmp_path / "jvm"))
    theirs = cds.for_submit(str(other_spark), {}, str(tmp_path / "jvm"))
    assert ours.archive != theirs.archive


@pytest.mark.parametrize("text, major", [('JAVA_VERSION="17.0.15"', 17), ('JAVA_VERSION="21"', 21),
                                         ('JAVA_VERSION="1.8.0_392"', 8)])
def test_java_version_from_the_release_file(tmp_path, text, major):
    (tmp_path / "release").write_text(f'IMPLEMENTOR="x"\n{text}\n')
    assert cds.java_version(str(tmp_path)) == major


def test_no_sharing_for_an_old_java_or_where_the_driver_is_not_spark_submit(tmp_path, monkeypatch):
    old = tmp_path / "jdk8"
    old.mkdir()
    (old / "release").write_text('JAVA_VERSION="1.8.0_392"\n')
    assert cds.for_submit(bundled_spark_home(), {"JAVA_HOME": str(old)}, str(tmp_path / "jvm")) is None
    monkeypatch.setenv("AIRFLOW__FLINKCHAIN__JVM_ARCHIVE_DIR", str(tmp_path / "jvm"))
    submit = os.path.join(bundled_spark_home(), "bin", "spark-submit")
    assert cds.for_chain_task("local[2]", None, submit, {}) is not None
    assert cds.for_chain_task("yarn", "cluster", submit, {}) is None
    assert cds.for_chain_task("k8s://https://k:6443", "client", submit, {}) is None
    monkeypatch.setenv("AIRFLOW__FLINKCHAIN__JVM_CLASS_DATA_SHARING", "False")
    assert cds.for_chain_task("local[2]", None, submit, {}) is None
