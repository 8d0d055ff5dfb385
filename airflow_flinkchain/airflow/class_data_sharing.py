"""JVM class-data sharing (AppCDS) for the chain tasks' spark-submit.

The JVM that spark-submit starts (the driver, in client mode) loads some ten thousand
Spark classes before the first record moves. A dynamic CDS archive holds them parsed and
verified: the JVM maps it instead. The first chain task of a machine runs its JVM with
`-XX:ArchiveClassesAtExit` (the archive is written when that JVM exits, into a temporary
file moved into place once spark-submit succeeded); every later one with
`-XX:SharedArchiveFile`. The options go in `SPARK_SUBMIT_OPTS`, which spark-submit
puts on the JVM's command line.

One archive per Java installation and Spark jars (their names, sizes and times), named
by a digest of both: a Spark or Java upgrade starts a new archive. The JVM checks the
archive against its class path itself and runs without it when they differ.
`-XX:+AutoCreateSharedArchive` does the same in one option but needs Java 19; this works
from Java 13 (Spark 4 requires 17).

Settings (docs/deployment.md#jvm-class-data-sharing): `[flinkchain] jvm_class_data_sharing`
(default True), `[flinkchain] jvm_archive_dir` (default `$AIRFLOW_HOME/flinkchain/jvm`).
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import shutil
import time
import uuid
from dataclasses import dataclass
from typing import Mapping, Optional

#: Java's first release with -XX:ArchiveClassesAtExit (dynamic archives)
MIN_JAVA = 13
#: a temporary archive older than this is left over by a killed task
STALE_TMP_SECONDS = 3600
SUBMIT_OPTS = "SPARK_SUBMIT_OPTS"


@dataclass(frozen=True)
class ClassDataSharing:
    """The archive of one spark-submit: used when it exists, else created at the JVM's exit."""

    archive: str
    creating: Optional[str] = None  # the temporary file the JVM writes, when creating

    def java_options(self) -> str:
        if self.creating:
            return f"-XX:ArchiveClassesAtExit={self.creating}"
        return f"-XX:SharedArchiveFile={self.archive}"

    def submit_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """`SPARK_SUBMIT_OPTS` with the options added to what `env` (else this process) has."""
        current = env.get(SUBMIT_OPTS, os.environ.get(SUBMIT_OPTS, ""))
        return {SUBMIT_OPTS: f"{current} {self.java_options()}".strip()}

    def finish(self, succeeded: bool) -> bool:
        """After spark-submit: put a created archive in place (only after a successful run: a
        JVM killed mid-write leaves half a file). True when an archive was put in place."""
        if not self.creating:
            return False
        try:
            if succeeded and os.path.getsize(self.creating) > 0:
                os.replace(self.creating, self.archive)
                return True
        except OSError:
            pass
        _remove(self.creating)
        return False


def for_chain_task(master: str, deploy_mode: Optional[str], spark_binary: str,
                   env: Mapping[str, str]) -> Optional[ClassDataSharing]:
    """The archive of a chain task's spark-submit, or None: switched off by the setting, a
    driver that does not run in spark-submit's JVM here (deploy mode cluster), or Kubernetes
    (whose submission gets `env` as the driver's environment, not spark-submit's)."""
    from airflow_flinkchain.airflow.compat import conf_get

    enabled = str(conf_get("flinkchain", "jvm_class_data_sharing", fallback="True")).strip().lower()
    if enabled in ("0", "false", "no", "off") or deploy_mode == "cluster" or master.startswith("k8s://"):
        return None
    archive_dir = conf_get("flinkchain", "jvm_archive_dir", fallback=None) or os.path.join(
        os.environ.get("AIRFLOW_HOME") or os.path.join(os.path.expanduser("~"), "airflow"), "flinkchain", "jvm")
    binary = shutil.which(spark_binary, path=env.get("PATH") or os.environ.get("PATH")) or spark_binary
    spark_home = env.get("SPARK_HOME") or os.path.dirname(os.path.dirname(os.path.realpath(binary)))
    return for_submit(spark_home, env, archive_dir)


def for_submit(spark_home: str, env: Mapping[str, str], archive_dir: str) -> Optional[ClassDataSharing]:
    """The archive of a spark-submit from `spark_home` with `env` (its JAVA_HOME), or None when
    Java is older than MIN_JAVA or unknown, or the directory cannot be written."""
    java_home = _java_home(env)
    if java_home is None or (java_version(java_home) or 0) < MIN_JAVA:
        return None
    archive = os.path.join(archive_dir, f"spark-submit-{_digest(java_home, spark_home)}.jsa")
    if os.path.isfile(archive):
        return ClassDataSharing(archive)
    try:
        os.makedirs(archive_dir, exist_ok=True)
        _drop_stale(archive_dir)
        creating = f"{archive}.{uuid.uuid4().hex[:12]}.tmp"
        with open(creating, "wb"):  # writable? (the JVM would only say so at its exit)
            pass
        os.remove(creating)
    except OSError:
        return None
    return ClassDataSharing(archive, creating)


def java_version(java_home: str) -> Optional[int]:
    """The major version in `{java_home}/release` (JAVA_VERSION="17.0.15"; "1.8.0_392" is 8)."""
    try:
        with open(os.path.join(java_home, "release")) as f:
            m = re.search(r'^JAVA_VERSION="(\d+)(?:\.(\d+))?', f.read(), re.MULTILINE)
    except OSError:
        return None
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


def _java_home(env: Mapping[str, str]) -> Optional[str]:
    """The Java spark-class runs: JAVA_HOME, else `java` on PATH (resolved through its links)."""
    home = env.get("JAVA_HOME") or os.environ.get("JAVA_HOME")
    if home:
        return os.path.realpath(home)
    java = shutil.which("java", path=env.get("PATH") or os.environ.get("PATH"))
    return os.path.dirname(os.path.dirname(os.path.realpath(java))) if java else None


def _digest(java_home: str, spark_home: str) -> str:
    h = hashlib.sha256()
    for path in [os.path.join(java_home, "release"), os.path.join(java_home, "lib", "modules")] + \
            sorted(glob.glob(os.path.join(spark_home, "jars", "*.jar"))):
        try:
            st = os.stat(path)
        except OSError:
            continue
        h.update(f"{os.path.realpath(path)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def _drop_stale(archive_dir: str) -> None:
    for tmp in glob.glob(os.path.join(archive_dir, "*.jsa.*.tmp")):
        try:
            if time.time() - os.path.getmtime(tmp) > STALE_TMP_SECONDS:
                _remove(tmp)
        except OSError:
            pass


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass
