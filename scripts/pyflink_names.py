"""Writes the public names of PyFlink's DataStream API (`pyflink.datastream`, `pyflink.common`
and their submodules) as JSON: the list docs/porting.md's table must cover exactly
(tests/planner/test_porting_page.py). Run it with PyFlink's interpreter:

    .venv-flink/bin/python scripts/pyflink_names.py > tests/data/pyflink_names.json

What counts as public:
- modules: the two packages and every submodule under them, except private ones (a name
  part starting with "_") and PyFlink's internal helpers (`utils`, `constants`);
- a module's names: its `__all__`, else the classes and functions it defines whose names do
  not start with "_";
- a class's members: what its own body defines (methods, static and class methods,
  properties, nested classes, enum members), not starting with "_"; inherited members are
  listed once, under the class that defines them.
Each entry: `name` (the full path), `module`, `kind` (class, method, property, enum member,
function), and for classes and functions `aliases`. Each class or function is listed once, under the first path it is exposed at (packages before
their submodules); the other paths that expose it are its `aliases`.
"""

from __future__ import annotations

import enum
import importlib
import inspect
import json
import pkgutil
import sys

ROOTS = ("pyflink.common", "pyflink.datastream")
INTERNAL = {"utils", "constants", "tests"}


def modules() -> list[str]:
    found = []
    for root in ROOTS:
        found.append(root)
        package = importlib.import_module(root)
        for info in pkgutil.walk_packages(package.__path__, root + "."):
            parts = info.name.split(".")
            if any(p.startswith("_") or p in INTERNAL for p in parts):
                continue
            found.append(info.name)
    return sorted(found, key=lambda name: (name.count("."), name))


def module_names(module) -> list[str]:
    exported = getattr(module, "__all__", None)
    if exported is not None:
        return [n for n in exported if hasattr(module, n)]
    return [n for n, v in vars(module).items()
            if not n.startswith("_") and (inspect.isclass(v) or inspect.isfunction(v))
            and getattr(v, "__module__", None) == module.__name__]


def members(cls) -> list[tuple[str, object]]:
    out = []
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(value, (staticmethod, classmethod, property)) or inspect.isfunction(value):
            out.append((name, value))
        elif inspect.isclass(value) and value.__qualname__.endswith(f"{cls.__qualname__}.{name}"):
            out.append((name, value))
        elif isinstance(cls, enum.EnumMeta) and isinstance(value, cls):
            out.append((name, value))
    return out


def kind_of(value) -> str:
    if inspect.isclass(value):
        return "class"
    if isinstance(value, property):
        return "property"
    if isinstance(value, enum.Enum):
        return "enum member"
    if inspect.isfunction(value) or isinstance(value, (staticmethod, classmethod)):
        return "function"
    return "attribute"


def names() -> list[dict]:
    entries: list[dict] = []
    canonical: dict[int, dict] = {}

    def add_class_members(module_name: str, path: str, cls) -> None:
        for name, value in members(cls):
            kind = "method" if kind_of(value) == "function" else kind_of(value)
            entries.append({"name": f"{path}.{name}", "module": module_name, "kind": kind})
            if inspect.isclass(value):
                add_class_members(module_name, f"{path}.{name}", value)

    for module_name in modules():
        module = importlib.import_module(module_name)
        for name in module_names(module):
            value = getattr(module, name)
            path = f"{module_name}.{name}"
            key = id(value)
            if key in canonical and (inspect.isclass(value) or inspect.isfunction(value)):
                canonical[key]["aliases"].append(path)
                continue
            entry = {"name": path, "module": module_name, "kind": kind_of(value), "aliases": []}
            canonical[key] = entry
            entries.append(entry)
            if inspect.isclass(value):
                add_class_members(module_name, path, value)
    return entries


def main() -> None:
    import pyflink.version

    json.dump({"pyflink": pyflink.version.__version__, "names": names()}, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
