"""The documented install commands work from a checkout: every `pip install` line of the docs
names this source tree (the package is not on PyPI) and extras pyproject.toml declares, and
pip resolves them, offline, against the environment the tests run in.

In a fresh virtualenv, every install command of the docs, the Makefile and the Dockerfile
resolves pyspark and pyspark-client to the one version requirements.txt pins (they share
the pyspark/ folder)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
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


def build_file_installs() -> list[tuple[str, list[str]]]:
    """(file, pip install arguments) of each resolving install of this checkout or its
    requirements files in the Makefile and the Dockerfile (`--no-deps` reinstalls resolve nothing)."""
    found = []
    for name in ["Makefile", "docker/Dockerfile"]:
        text = (ROOT / name).read_text().replace("\\\n", " ")
        for match in re.finditer(r"pip install ([^&\n#]+)", text):
            args = shlex.split(match.group(1))
            if "--no-deps" in args or not ({".", "-e", "-r"} & set(args)):
                continue
            found.append((name, [a for a in args if a not in ("-q", "--no-cache-dir")]))
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


def pinned(name: str) -> str:
    return re.search(rf"^{name}==(\S+)$", (ROOT / "requirements.txt").read_text(), re.M).group(1)


RESOLVING = INSTALLS + build_file_installs()


def _resolve_in_fresh_venv(args: list[str], where: Path) -> tuple[dict[str, str], str]:
    """What pip would install for `pip install ARGS` into a new empty virtualenv:
    {distribution: version} from its --dry-run --report."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=60)
    report = where / "report.json"
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(where / "bin" / "python"), "install",
                           "--dry-run", "--quiet", "--disable-pip-version-check", "--report", str(report), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)  # 30-60 s each on an idle machine
    output = done.stdout + done.stderr
    if done.returncode != 0:
        if any(s in output for s in ("NewConnectionError", "Temporary failure in name resolution",
                                     "Network is unreachable")):
            pytest.skip(f"the package index is not reachable: {output[-500:]}")
        raise AssertionError(f"pip install {' '.join(args)} does not resolve in a fresh venv:\n{output[-3000:]}")
    resolved = json.loads(report.read_text())["install"]
    return {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in resolved}, output


@pytest.mark.e2e
def test_every_install_command_resolves_one_pyspark_version_in_a_fresh_venv(tmp_path):
    """The resolver's choice, not only that it resolves: a pyspark range once gave pyspark 4.3.0
    beside the provider's pyspark-client 4.2.0 for `pip install -e '.[openlineage]'`.
    The commands resolve concurrently (each is mostly index and metadata fetches)."""
    assert {f for f, _ in RESOLVING} >= {"Makefile", "docker/Dockerfile", "docs/getting-started.md",
                                         "docs/data-awareness.md"}, RESOLVING
    with ThreadPoolExecutor(len(RESOLVING)) as pool:
        results = list(pool.map(lambda i: _resolve_in_fresh_venv(RESOLVING[i][1], tmp_path / f"venv{i}"),
                                range(len(RESOLVING))))
    want = pinned("pyspark")
    assert pinned("pyspark-client") == want
    for (where, args), (versions, _) in zip(RESOLVING, results):
        got = {name: versions.get(name) for name in ("pyspark", "pyspark-client")}
        assert got == {"pyspark": want, "pyspark-client": want}, \
            f"{where}: `pip install {' '.join(args)}` resolves {got} in a fresh venv"
