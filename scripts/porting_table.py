"""The API table of docs/porting.md ("Porting from PyFlink"): one row per public name of
PyFlink's DataStream API (tests/data/pyflink_names.json, written by pyflink_names.py), marked
supported / not supported / differs, with a note.

    .venv/bin/python scripts/porting_table.py     # rewrites the table, keeping each row's marks

Each name is marked by whether it is offered here under the same path (`pyflink` ->
`airflow_flinkchain`): supported, or not supported (absent, or a method that only raises
UnsupportedFeatureError). A row marked "differs" by hand (its note says
how) stays so while the name exists; a note is kept while its row's status stays the same. tests/planner/test_porting_page.py checks the table covers
exactly the name list and that every name marked supported or differs is offered here.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
import textwrap
from itertools import groupby
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
NAMES = ROOT / "tests" / "data" / "pyflink_names.json"
PAGE = ROOT / "docs" / "porting.md"
START, END = "<!-- api-table:start -->", "<!-- api-table:end -->"
STATUSES = ("supported", "differs", "not supported")
ROW = re.compile(r"^\| `(pyflink(?:\.\w+)+)` \| (supported|differs|not supported) \| (.*?) *\|$")


def here(name: str) -> str:
    """A PyFlink path as this package spells it."""
    return "airflow_flinkchain" + name[len("pyflink"):]


def resolve(name: str) -> Optional[object]:
    """What the PyFlink path `name` is here (None: nothing; a name this package refuses with
    UnsupportedFeatureError, a NotImplementedError, does not exist either)."""
    parts = here(name).split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for part in parts[i:]:
                obj = getattr(obj, part)
        except (AttributeError, NotImplementedError):
            return None
        return obj
    return None


def refuses(obj: object) -> bool:
    """A function whose body (after its docstring) only raises UnsupportedFeatureError: a
    PyFlink method kept for its clear error, not offered."""
    function = getattr(obj, "__func__", obj)
    if not inspect.isfunction(function):
        return False
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return False
    if not tree.body or not isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    body = tree.body[0].body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return (len(body) == 1 and isinstance(body[0], ast.Raise) and isinstance(body[0].exc, ast.Call)
            and getattr(body[0].exc.func, "id", None) == "UnsupportedFeatureError")


def offered(name: str) -> bool:
    """The PyFlink path `name` exists here and is not a refusal (see `refuses`)."""
    obj = resolve(name)
    return obj is not None and not refuses(obj)


def names() -> list[dict]:
    return json.loads(NAMES.read_text())["names"]


def rows(page: str) -> dict[str, tuple[str, str]]:
    """name -> (status, note) of the page's table."""
    found: dict[str, tuple[str, str]] = {}
    for line in page.splitlines():
        m = ROW.match(line)
        if m:
            if m.group(1) in found:
                raise ValueError(f"{m.group(1)} has two rows in {PAGE.name}")
            found[m.group(1)] = (m.group(2), m.group(3).strip())
    return found


def initial_mark(entry: dict) -> tuple[str, str]:
    if resolve(entry["name"]) is None:
        return "not supported", ""
    if not offered(entry["name"]):
        return "not supported", "raises UnsupportedFeatureError"
    missing = [a for a in entry.get("aliases", []) if resolve(a) is None]
    if missing:
        return "differs", "not importable from " + ", ".join(f"`{here(a).rsplit('.', 1)[0]}`" for a in missing)
    return "supported", ""


def mark(entry: dict, old: Optional[tuple[str, str]]) -> tuple[str, str]:
    status, note = initial_mark(entry)
    if old is not None and old[0] == "differs" and status != "not supported":
        return old
    if old is not None and old[0] == status and old[1]:
        return old
    return status, note


def table(entries: list[dict], marks: dict[str, tuple[str, str]]) -> str:
    out = []
    by_module = sorted(entries, key=lambda e: e["module"])  # stable: PyFlink's order within a module
    for module, group in groupby(by_module, key=lambda e: e["module"]):
        out += ["", f"### `{module}`", "", "| PyFlink | here | note |", "|---|---|---|"]
        for entry in group:
            status, note = mark(entry, marks.get(entry["name"]))
            out.append(f"| `{entry['name']}` | {status} | {note} |")
    return "\n".join(out) + "\n"


def main() -> None:
    page = PAGE.read_text()
    head, rest = page.split(START, 1)
    _, tail = rest.split(END, 1)
    PAGE.write_text(head + START + "\n" + table(names(), rows(page)) + "\n" + END + tail)


if __name__ == "__main__":
    main()
