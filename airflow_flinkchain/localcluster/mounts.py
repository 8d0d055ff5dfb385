"""A private mount namespace: processes in it see their own /tmp, as on a machine of their own.

``PrivateMounts("worker0").start()`` starts a holder process in a new mount namespace
(``unshare --mount --propagation private``) that mounts a tmpfs over /tmp, makes
``/tmp/home`` and ``/tmp/work`` in it, and waits. ``command(cmd)`` prefixes ``cmd`` with
``nsenter`` into that namespace, so any number of processes can be started in it (a Spark
worker, the Airflow side); they share nothing on disk with the rest of the machine but what
they can reach outside /tmp (the installed software; where it lies under /tmp, e.g. a
checkout in /tmp, it is bound back at its path). Files of the namespace are read from
outside through ``/proc/<holder>/root`` (``path()``). ``stop()`` SIGKILLs every process in
the namespace, the holder last; the tmpfs goes with it.

Needs root (CAP_SYS_ADMIN) for ``unshare --mount``; the network stays the machine's.
"""

from __future__ import annotations

import os
import select
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

PRIVATE_HOME = "/tmp/home"
PRIVATE_WORK = "/tmp/work"
_HOST_TMP = "/tmp/.host-tmp"  # the machine's /tmp, seen only while the kept paths are bound back


def _holder_script(name: str, size: str, keep: list[str]) -> str:
    """sh: tmpfs over /tmp; the kept paths under the old /tmp (software installed there, e.g. a
    checkout and its venv in /tmp) bound back at their paths, the rest of the old /tmp dropped."""
    tmpfs = f"mount -t tmpfs -o size={size},mode=1777 flinkchain-{name} /tmp"
    if not keep:
        steps = [tmpfs]
    else:  # "." is the covered /tmp: a path of this namespace, so it may be bound
        steps = ["cd /tmp", tmpfs, f"mkdir -p {_HOST_TMP}", f"mount --no-canonicalize --bind . {_HOST_TMP}", "cd /"]
        for path in keep:
            rel = shlex.quote(os.path.relpath(path, "/tmp"))
            steps += [f"mkdir -p /tmp/{rel}", f"mount --bind {_HOST_TMP}/{rel} /tmp/{rel}"]
        steps += [f"umount -l {_HOST_TMP}", f"rmdir {_HOST_TMP}"]
    steps += [f"mkdir -p {PRIVATE_HOME} {PRIVATE_WORK}", "echo ready", "exec sleep infinity"]
    return " && ".join(steps)


def software_paths() -> list[str]:
    """What every process needs to see: this Python's prefix and the package's source tree."""
    import airflow_flinkchain

    return [sys.prefix, os.path.dirname(os.path.dirname(os.path.abspath(airflow_flinkchain.__file__)))]


class PrivateMountsError(RuntimeError):
    """The namespace could not be made (not root, no unshare/nsenter)."""


class PrivateMounts:
    """One mount namespace with a private tmpfs /tmp, held open until ``stop()``."""

    def __init__(self, name: str, size: str = "2g", keep: Optional[list[str]] = None):
        """``keep``: paths under /tmp that stay visible (default ``software_paths()``)."""
        self.name = name
        self.size = size
        paths = software_paths() if keep is None else keep
        real = sorted({os.path.realpath(p) for p in paths})
        self.keep = [p for p in real if p.startswith("/tmp/")
                     and not any(p.startswith(q + "/") for q in real if q != p)]
        self.holder: Optional[subprocess.Popen] = None

    @property
    def pid(self) -> int:
        if self.holder is None:
            raise PrivateMountsError(f"mount namespace {self.name!r} is not started")
        return self.holder.pid

    def start(self, timeout: float = 30.0) -> "PrivateMounts":
        if os.geteuid() != 0:
            raise PrivateMountsError(
                f"mount namespace {self.name!r}: `unshare --mount` needs root (CAP_SYS_ADMIN); run as root "
                "(CI does) or in a container that grants it")
        cmd = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
               _holder_script(self.name, self.size, self.keep)]
        try:
            self.holder = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                           stdin=subprocess.DEVNULL, start_new_session=True)
        except FileNotFoundError as exc:
            raise PrivateMountsError(f"mount namespace {self.name!r}: {exc} (util-linux's unshare and nsenter)") from exc
        ready, _, _ = select.select([self.holder.stdout], [], [], timeout)
        line = self.holder.stdout.readline().decode().strip() if ready else ""
        if line != "ready":
            err = self.holder.stderr.read().decode(errors="replace") if self.holder.poll() is not None else ""
            self.stop()
            raise PrivateMountsError(f"mount namespace {self.name!r} did not start: {line or err or 'timeout'}")
        self.holder.stdout.close()
        self.holder.stderr.close()
        return self

    def command(self, cmd: list[str], cwd: str = PRIVATE_WORK) -> list[str]:
        """``cmd`` run inside the namespace, in ``cwd`` (a path inside it)."""
        return ["nsenter", f"--target={self.pid}", "--mount", f"--wdns={cwd}", "--", *cmd]

    def path(self, inside: str) -> Path:
        """A path of the namespace (e.g. ``/tmp/work/app-1``), as seen from outside it."""
        return Path(f"/proc/{self.pid}/root") / inside.lstrip("/")

    def _ns(self, pid: int) -> Optional[str]:
        try:
            return os.readlink(f"/proc/{pid}/ns/mnt")
        except OSError:
            return None

    def contains(self, pid: int) -> bool:
        """True when process ``pid`` runs in this namespace."""
        mine = self._ns(self.pid)
        return mine is not None and self._ns(pid) == mine

    def pids(self) -> list[int]:
        """Every process of the namespace (the holder included)."""
        mine = self._ns(self.pid) if self.holder is not None else None
        if mine is None:
            return []
        return [int(p) for p in os.listdir("/proc") if p.isdigit() and self._ns(int(p)) == mine]

    def stop(self) -> None:
        """SIGKILL every process in the namespace, then the holder."""
        if self.holder is None:
            return
        for _ in range(3):  # processes may fork while being killed
            others = [p for p in self.pids() if p != self.holder.pid]
            if not others:
                break
            for p in others:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.2)
        try:
            os.killpg(self.holder.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.holder.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self.holder = None

    def __enter__(self) -> "PrivateMounts":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
