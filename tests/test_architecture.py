"""The package arrows of docs/architecture.md, checked on the source: no import cycle between
modules, no package importing one above it, click and rich only in cli, and the folders
importable only as `kreassign.<folder>`."""
from __future__ import annotations

import ast
import builtins
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("cluster", "planner", "throttle", "predict", "execute", "simulate", "sandbox", "cli")
# What each package may import (besides itself): the arrows of docs/architecture.md.
ALLOWED: dict[str, set[str]] = {
    "cluster": set(),
    "planner": {"cluster"},
    "throttle": {"planner", "cluster"},
    "predict": {"throttle", "planner", "cluster"},
    "execute": {"predict", "throttle", "planner", "cluster"},
    "simulate": {"predict", "throttle", "planner", "cluster"},
    "sandbox": {"cluster"},
    "cli": {"cluster", "planner", "throttle", "predict", "execute", "simulate", "sandbox"},
}
UI_LIBRARIES = {"click", "rich"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return "kreassign." + ".".join(parts)


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[module_name(path)] = path
    return found


def imports(path: Path) -> set[str]:
    """Every module this file imports, at any depth (lazy imports inside functions count)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: {i for i in imports(path) if i in known and i != name} for name, path in known.items()}


def package_of(module: str) -> str:
    return module.split(".")[1]


def test_no_module_imports_a_package_above_it() -> None:
    wrong = [f"{m} imports {i}" for m, deps in graph().items() for i in deps
             if package_of(i) != package_of(m) and package_of(i) not in ALLOWED[package_of(m)]]
    assert not wrong, "imports against the arrows of docs/architecture.md:\n" + "\n".join(sorted(wrong))


def test_only_cli_imports_click_or_rich() -> None:
    wrong = [f"{name} imports {lib}" for name, path in modules().items() if package_of(name) != "cli"
             for lib in UI_LIBRARIES if any(i == lib or i.startswith(lib + ".") for i in imports(path))]
    assert not wrong, "\n".join(wrong)


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """A cycle in the graph as a path that returns to its start, or None (iterative DFS)."""
    state: dict[str, int] = {}
    for start in sorted(edges):
        if state.get(start):
            continue
        stack: list[tuple[str, list[str]]] = [(start, sorted(edges[start]))]
        path = [start]
        state[start] = 1
        while stack:
            node, todo = stack[-1]
            if not todo:
                state[node] = 2
                stack.pop()
                path.pop()
                continue
            nxt = todo.pop()
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append((nxt, sorted(edges.get(nxt, ()))))
    return None


def test_find_cycle_finds_a_lazy_cycle_and_accepts_a_tree() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_no_import_cycle_between_modules() -> None:
    edges = graph()
    # a package's __init__ re-exporting its own modules is not a cycle of ideas
    for name in list(edges):
        if (ROOT / name.split(".", 1)[1].replace(".", "/") / "__init__.py").exists():
            edges[name] = {d for d in edges[name] if not d.startswith(name + ".")}
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


@pytest.mark.parametrize("folder", PACKAGES)
def test_folders_cannot_be_imported_as_top_level_modules(folder: str) -> None:
    ran = subprocess.run([sys.executable, "-c", f"import {folder}"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, check=False)
    assert ran.returncode != 0
    assert f"import kreassign.{folder}, not {folder}" in ran.stderr


def test_tests_use_the_installed_package() -> None:
    import kreassign.planner

    assert kreassign.planner.__name__ == "kreassign.planner"
    assert "planner" not in sys.modules


def test_architecture_doc_names_every_package_and_only_files_that_exist() -> None:
    import re

    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    for package in PACKAGES:
        assert f"| `{package}` |" in text, f"docs/architecture.md does not describe {package}"
    named = set(re.findall(r"`((?:%s)/[a-z_/]+\.py)`" % "|".join(PACKAGES), text))
    assert named, "docs/architecture.md names no module"
    missing = sorted(path for path in named if not (ROOT / path).exists())
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"


# ---- where exceptions live ----------------------------------------------------------------------
BUILTIN_EXCEPTIONS = {name for name, value in vars(builtins).items()
                      if isinstance(value, type) and issubclass(value, BaseException)}


def class_bases(sources: dict[str, str]) -> dict[tuple[str, str], list[str]]:
    """(module, class name) -> the last dotted part of each base, for every class of `sources`."""
    found: dict[tuple[str, str], list[str]] = {}
    for module, text in sources.items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                found[(module, node.name)] = [ast.unparse(b).split(".")[-1] for b in node.bases]
    return found


def exception_classes(sources: dict[str, str]) -> list[tuple[str, str]]:
    """The classes of `sources` that derive from an exception: a builtin one, kafka-python's
    (`kafka.errors.*Error`), or another exception class of `sources`."""
    bases = class_bases(sources)
    exceptions = set(BUILTIN_EXCEPTIONS)
    grew = True
    while grew:
        grew = False
        for (_, name), of in bases.items():
            if name not in exceptions and any(b in exceptions or b.startswith("Kafka") and b.endswith("Error")
                                              for b in of):
                exceptions.add(name)
                grew = True
    return sorted(key for key in bases if key[1] in exceptions)


def test_exception_classes_are_found_through_their_bases() -> None:
    sources = {"p.a": "class A(ValueError): pass\nclass B(A): pass\nclass C: pass\n",
               "p.b": "import kafka.errors as Errors\nclass D(B): pass\nclass E(Errors.KafkaError): pass\n"}
    assert exception_classes(sources) == [("p.a", "A"), ("p.a", "B"), ("p.b", "D"), ("p.b", "E")]


def test_every_exception_of_a_package_lives_in_its_errors_module() -> None:
    """One errors module per package (`<package>/errors.py`), as STYLE.md's habit 8 asks. A
    module's private control-flow exception (a leading underscore: raised and caught inside that
    module, as the Jackson-style JSON parser's) is no error of the package."""
    sources = {name: path.read_text(encoding="utf-8") for name, path in modules().items()}
    wrong = [f"{module}.{name}" for module, name in exception_classes(sources)
             if not name.startswith("_") and module != f"kreassign.{package_of(module)}.errors"]
    assert not wrong, "exception classes outside their package's errors module:\n" + "\n".join(wrong)

# ---- module size ----------------------------------------------------------------------------------
MAX_MODULE_LINES = 600
"""No module outside the sandbox is longer (issue 25): split one by concept, not in halves."""


def test_no_module_outside_the_sandbox_is_over_600_lines() -> None:
    long = {str(path.relative_to(ROOT)): n for name, path in modules().items() if package_of(name) != "sandbox"
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split them by concept): {long}"
