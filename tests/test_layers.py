"""The three floors stay where they are: judges/ (the metric library) < calibration/ (fitting judges to
people) < judges_app/ (CLI, MLflow tracking, demo) < experiments/ and benchmarks/. Every module's imports
are read with ast (nothing is run); a lower floor importing a higher one fails the test, wherever the
import sits (module top, inside a function, under TYPE_CHECKING)."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: floor of each top-level name; a module may import its own floor and the floors below.
FLOORS = {"judges": 0, "calibration": 1, "judges_app": 2, "experiments": 3, "benchmarks": 3}
PACKAGES = ("judges", "calibration", "judges_app", "experiments", "benchmarks")


def imported_names(tree: ast.AST, module: str) -> list[tuple[int, str]]:
    """(line, absolute dotted name) of every import in ``tree``; relative imports resolved against ``module``."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[: -node.level]
                out.append((node.lineno, ".".join(base + ([node.module] if node.module else []))))
            else:
                out.append((node.lineno, node.module))
    return out


def floor_violations(root: Path = ROOT) -> list[str]:
    problems = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root).with_suffix("")
            module = ".".join(relative.parts[:-1] if relative.name == "__init__" else relative.parts)
            own = FLOORS[package]
            for line, name in imported_names(ast.parse(path.read_text(encoding="utf-8")), module):
                top = name.split(".")[0]
                if top in FLOORS and FLOORS[top] > own:
                    problems.append(f"{path.relative_to(root)}:{line} ({package}, floor {own}) imports {name} "
                                    f"(floor {FLOORS[top]})")
    return problems


def test_no_floor_imports_a_higher_one():
    assert floor_violations() == []


def test_the_check_sees_a_violation_wherever_the_import_sits(tmp_path):
    """The walker itself: a lower floor importing upward at module top, in a function or relatively."""
    for package in PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "judges" / "top.py").write_text("import calibration.fit\n")
    (tmp_path / "judges" / "inner.py").write_text("def f():\n    from judges_app.cli import main\n")
    (tmp_path / "calibration" / "ok.py").write_text("from judges.base import Metric\nfrom . import ok\n")
    (tmp_path / "calibration" / "up.py").write_text("if False:\n    from judges_app import tracking\n")
    found = floor_violations(tmp_path)
    assert len(found) == 3, found
    assert any("judges/top.py:1" in p and "calibration.fit" in p for p in found)
    assert any("judges/inner.py:2" in p for p in found)
    assert any("calibration/up.py:2" in p for p in found)


@pytest.mark.parametrize("module, absent", [
    ("judges", ("mlflow", "calibration", "judges_app")),
    ("calibration.fit", ("mlflow", "judges_app")),
])
def test_importing_a_floor_loads_nothing_above_it(module, absent):
    """`python -X importtime -c "import judges"` lists no module of the higher floors, nor mlflow."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in done.stderr.splitlines()
              if line.startswith("import time:") and "|" in line}
    assert loaded, "no -X importtime output"
    assert not loaded & set(absent), sorted(loaded & set(absent))
