"""The documented install commands work from a checkout: every `pip install` line of the docs
names this source tree (the package is not on PyPI) and extras pyproject.toml declares, and
pip resolves them, offline, against the environment the tests run in."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
PIP_LINE = re.compile(r"^\s*pip install (.+?)(?:\s+#.*)?$")


def documented_installs() -> list[tuple[str, list[str]]]:
    """(document, pip install arguments) of each `pip install` line in a fenced block."""
    found = []
    for doc in DOCS:
        fenced = False
        for line in doc.read_text().splitlines():
            if line.lstrip().startswith("```"):
                fenced = not fenced
            elif fenced and (match := PIP_LINE.match(line)):
                found.append((doc.relative_to(ROOT).as_posix(), shlex.split(match.group(1))))
    return found


def declared_extras() -> dict[str, list[str]]:
    """pyproject.toml's optional-dependencies: extra -> requirements."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


INSTALLS = documented_installs()


def test_the_openlineage_install_is_documented():
    assert any(any("[openlineage]" in a for a in args) for _, args in INSTALLS), INSTALLS


@pytest.mark.parametrize("doc,args", INSTALLS, ids=[f"{d}:{' '.join(a)}" for d, a in INSTALLS])
def test_documented_install_names_the_checkout_and_declared_extras(doc, args):
    targets = [a for a in args if not a.startswith("-")]
    for target in targets:
        name, _, extras = target.partition("[")
        assert name == ".", f"{doc}: `pip install {' '.join(args)}` names {name!r}, which is not on PyPI; " \
                            "install the checkout ('.')"
        unknown = set(extras.rstrip("]").split(",")) - set(declared_extras()) - {""}
        assert not unknown, f"{doc}: extras {sorted(unknown)} are not in pyproject.toml's optional-dependencies"


@pytest.mark.parametrize("doc,args", INSTALLS, ids=[f"{d}:{' '.join(a)}" for d, a in INSTALLS])
def test_documented_install_resolves_offline(doc, args):
    """pip resolves the command in the checkout (--dry-run, no index: the extra's requirements
    must be satisfied by what is installed, as `make venv` installs them)."""
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "--no-build-isolation",
                           "--disable-pip-version-check", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "does not provide the extra" not in output, output
    assert "Would install airflow-flinkchain" in output, output
    extras = declared_extras()
    for target in (a for a in args if "[" in a):
        for extra in target.partition("[")[2].rstrip("]").split(","):
            for requirement in extras[extra]:
                name = re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0]
                assert f"Requirement already satisfied: {name}" in output, (extra, requirement, output[-2000:])
