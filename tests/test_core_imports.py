"""The controller core imports no environment (docs/architecture.md): checked by reading every import statement.

The core is every module directly in `gesscale/` (but `__main__.py`, which only starts the CLI) and every module
of `gesscale/policies/`. An environment (the local testbed, Kubernetes, the brokers, the Spark job, the producer,
the network emulation) and the layers that wire environments together (the CLI, live experiments) may import
the core, never the reverse. Imports inside functions count as much as those at the top of a module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = ("gesscale.testbed", "gesscale.k8s", "gesscale.brokers", "gesscale.cli", "gesscale.experiment",
             "jobs", "producer", "netem")  # fmt: skip


def core_modules() -> list[Path]:
    """The files of the controller core."""
    top = [p for p in sorted((ROOT / "gesscale").glob("*.py")) if p.name != "__main__.py"]
    return top + sorted((ROOT / "gesscale" / "policies").glob("*.py"))


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import statement in the file, wherever it stands."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the module's own package
                package = path.relative_to(ROOT).parent.parts
                base = ".".join(package[: len(package) - node.level + 1])
                name = f"{base}.{node.module}" if node.module else base
            else:
                name = node.module or ""
            found.append((node.lineno, name))
            found += [(node.lineno, f"{name}.{alias.name}") for alias in node.names]
    return found


def violations(path: Path) -> list[str]:
    """The imports of an environment in one file, as 'file:line module'."""
    rel = path.relative_to(ROOT)
    return [f"{rel}:{line} {name}" for line, name in imported_modules(path)
            if any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN)]  # fmt: skip


def test_the_core_is_what_the_docs_say() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in core_modules()}
    for must in ("gesscale/mape.py", "gesscale/backend.py", "gesscale/sim_backend.py", "gesscale/model.py",
                 "gesscale/placement.py", "gesscale/latency_map.py", "gesscale/metrics.py",
                 "gesscale/observation.py", "gesscale/policies/base.py"):  # fmt: skip
        assert must in names


def test_no_core_module_imports_an_environment() -> None:
    found = [v for path in core_modules() for v in violations(path)]
    assert found == []


@pytest.mark.parametrize("source, expected", [
    ("import gesscale.testbed.fleet\n", ["gesscale.testbed.fleet"]),
    ("def f():\n    from netem.plan import build\n", ["netem.plan"]),
    ("from gesscale import k8s\n", ["gesscale.k8s"]),
    ("from gesscale.testbed import backend\n", ["gesscale.testbed"]),
    ("import jobs\n", ["jobs"]),
    ("from gesscale.model import PerformanceModel\nimport netemx\nimport producers\n", []),
])  # fmt: skip
def test_the_check_sees_every_kind_of_import(tmp_path: Path, source: str, expected: list[str]) -> None:
    """The checker itself: top-level, in a function, `from package import module`; a similar name is not flagged."""
    tree_file = tmp_path / "m.py"
    tree_file.write_text(source)
    found = {name for _, name in imported_modules(tree_file)
             if any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN)}  # fmt: skip
    assert all(any(f == e or f.startswith(e + ".") for f in found) for e in expected)
    assert bool(found) == bool(expected)
